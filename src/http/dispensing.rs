//! `/dispensing/will-call`: orders made up for a patient and waiting at the
//! counter. Any signed-in user of the branch handles them; a pickup is
//! `ready` until it is `picked_up` or `cancelled`, and no other move exists.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::input::Flag;
use domain::will_call::{self, Move, WillCall, WillCallCreate};
use domain::{Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(pickup)
        .service(cancel);
}

/// Files a pickup: `ready`, no signature yet.
#[utoipa::path(tag = "dispensing", security(("bearer" = [])),
    request_body = WillCallCreate,
    responses((status = 201, body = WillCall), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/dispensing/will-call")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<WillCallCreate>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(body.branch_id)?;
    let new = body.validate(branch_id, caller.user_id)?;
    let client = state.pool.get().await?;
    let row = will_call::insert(&client, new).await?;
    Ok(HttpResponse::Created().json(row))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WillCallQuery {
    /// `ready`, `picked_up` or `cancelled` (any case; empty = all).
    #[param(schema_with = will_call::status_filter_schema)]
    pub status: Option<String>,
    /// Admins only: another branch's pickups (default the caller's).
    pub branch_id: Option<Uuid>,
}

/// The branch's pickups, newest first, 20 per page.
#[utoipa::path(tag = "dispensing", security(("bearer" = [])),
    params(WillCallQuery, PageParams),
    responses((status = 200, body = Paged<WillCall>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/dispensing/will-call")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<WillCallQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(q.branch_id)?;
    let status = will_call::status_filter(q.status.as_deref())?;
    let page = paging.resolve(20)?;
    let client = state.pool.get().await?;
    let (items, total) = will_call::list(&client, branch_id, status.as_deref(), page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// Moves a visible pickup out of `ready`: 404 for another branch's, 409
/// when it already left `ready` (the update is conditional).
async fn run_move(state: &AppState, caller: &Caller, raw_id: &str, mv: Move) -> Result<WillCall> {
    let id = path_id(raw_id, "Will-call pickup")?;
    let not_found = || Error::not_found("Will-call pickup not found");
    let client = state.pool.get().await?;
    let current = will_call::get(&client, id)
        .await?
        .filter(|w| caller.can_see_branch(w.branch_id))
        .ok_or_else(not_found)?;
    if let Some(row) = will_call::apply(&client, id, mv).await? {
        return Ok(row);
    }
    let now = will_call::get(&client, id).await?.unwrap_or(current);
    Err(Error::conflict(format!(
        "This pickup is {}; only a ready pickup can be picked up or cancelled.",
        now.status
    )))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PickupRequest {
    /// Whether the patient signed (true/false or 0/1; default false).
    #[schema(value_type = Option<bool>)]
    pub signature_captured: Option<Flag>,
}

/// `ready` → `picked_up`, stamping `picked_up_at`.
#[utoipa::path(tag = "dispensing", security(("bearer" = [])),
    params(("id" = String, Path)), request_body(content = Option<PickupRequest>, description = "May be omitted"),
    responses((status = 200, body = WillCall), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/dispensing/will-call/{id}/pickup")]
pub async fn pickup(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<PickupRequest>,
) -> Result<HttpResponse> {
    let mv = Move::PickUp {
        signature_captured: body.signature_captured.is_some_and(|Flag(f)| f),
    };
    Ok(HttpResponse::Ok().json(run_move(&state, &caller, &id, mv).await?))
}

/// `ready` → `cancelled`.
#[utoipa::path(tag = "dispensing", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = WillCall), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/dispensing/will-call/{id}/cancel")]
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(run_move(&state, &caller, &id, Move::Cancel).await?))
}
