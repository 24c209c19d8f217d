//! `/sync/conflicts`: pushed updates that lost a `base_rev` race, for head
//! office to resolve.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::sync::conflicts::{self, Conflict, Resolution, Strategy};
use domain::{Action, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list).service(resolve);
}

/// Pending conflicts, newest first (50 per page).
#[utoipa::path(tag = "sync", security(("bearer" = [])),
    params(PageParams),
    responses((status = 200, body = Paged<Conflict>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/sync/conflicts")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ResolveConflicts)?;
    let page = paging.resolve(50)?;
    let client = state.pool.get().await?;
    let (items, total) = conflicts::pending(&client, caller.org_id, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ResolveRequest {
    /// `last_write_wins`, `client`, `server` or `merge`.
    // The document's pattern is built from `Strategy::ALL` (request rules).
    #[schema(value_type = String, required = true)]
    pub strategy: Option<String>,
}

/// Resolves a pending conflict. `client` writes the till's fields, `server`
/// keeps the server row, `last_write_wins` keeps the later `updated_at`,
/// `merge` writes the till's changed fields unless the server changed one of
/// them too (409).
#[utoipa::path(tag = "sync", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = ResolveRequest,
    responses((status = 200, body = Resolution), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/sync/conflicts/{id}/resolve")]
pub async fn resolve(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<ResolveRequest>,
) -> Result<HttpResponse> {
    let resolution = resolve_as(&state, &caller, &id, body.strategy.as_deref()).await?;
    Ok(HttpResponse::Ok().json(resolution))
}

/// Resolves conflict `raw_id` with `strategy` as `caller`.
async fn resolve_as(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    strategy: Option<&str>,
) -> Result<Resolution> {
    caller.require(Action::ResolveConflicts)?;
    let strategy = Strategy::required(strategy)?;
    let id = path_id(raw_id, "Conflict")?;
    conflicts::resolve_one(&state.pool, &caller.acting(), id, strategy).await
}
