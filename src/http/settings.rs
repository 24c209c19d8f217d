//! `/settings`: the organisation's single settings record. Anyone signed in
//! reads it (tills need the receipt fields and the tax rate); admins change
//! it, and every change is audited with the record before and after.

use actix_web::{web, HttpResponse};

use crate::auth::Caller;
use crate::http::extract::Json;
use crate::state::AppState;
use domain::error::Problem;
use domain::settings::write::{self, SettingsWrite};
use domain::settings::{self, Settings};
use domain::{Action, Result};

use actix_web::{get, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(get).service(update);
}

/// The settings record, or exactly the spec's defaults when none exists.
#[utoipa::path(tag = "settings", security(("bearer" = [])),
    responses((status = 200, body = Settings), (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/settings")]
pub async fn get(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    let client = state.pool.get().await?;
    Ok(HttpResponse::Ok().json(settings::read(&client, caller.org_id).await?))
}

/// Changes the fields sent (admin). 400 names the first invalid field; an
/// audit-log entry keeps the record before and after.
#[utoipa::path(tag = "settings", security(("bearer" = [])),
    request_body = SettingsWrite,
    responses((status = 200, body = Settings), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[put("/settings")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<SettingsWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteSettings)?;
    let after = write::change(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Ok().json(after))
}
