//! `/prescriptions`: the branch's prescription book. A prescription starts
//! `PENDING` and moves once, to `DISPENSED` (linking the sale that filled it)
//! or `CANCELLED`; every other move is 409. Sales against a prescription
//! record what they gave out on its lines and move it to `DISPENSED`
//! themselves once every line is filled; from the first unit given out it
//! can no longer be cancelled or deleted (409).

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::prescriptions::moves;
use domain::prescriptions::request::PrescriptionCreate;
use domain::prescriptions::{self, Move, Prescription};
use domain::{Action, Error, Result};

use actix_web::{delete, get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get)
        .service(delete)
        .service(dispense)
        .service(cancel);
}

/// Files a `PENDING` prescription with its lines on the caller's branch.
#[utoipa::path(tag = "prescriptions", security(("bearer" = [])),
    request_body = PrescriptionCreate,
    responses((status = 201, body = Prescription), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/prescriptions")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<PrescriptionCreate>,
) -> Result<HttpResponse> {
    caller.require(Action::WritePrescriptions)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let new = body.into_new(branch_id, caller.user_id)?;
    let prescription = moves::record(&state.pool, new).await?;
    Ok(HttpResponse::Created().json(prescription))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PrescriptionQuery {
    /// `PENDING`, `DISPENSED` or `CANCELLED` (any case; empty = all).
    #[param(
        pattern = "^\\s*([Pp][Ee][Nn][Dd][Ii][Nn][Gg]|[Dd][Ii][Ss][Pp][Ee][Nn][Ss][Ee][Dd]|[Cc][Aa][Nn][Cc][Ee][Ll][Ll][Ee][Dd])?\\s*$"
    )]
    pub status: Option<String>,
    /// Admins only: another branch's prescriptions (default the caller's).
    pub branch_id: Option<Uuid>,
}

/// `status` normalised to the stored upper case; empty means no filter.
fn status_filter(raw: Option<&str>) -> Result<Option<String>> {
    let Some(s) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let s = s.to_uppercase();
    if !prescriptions::STATUSES.contains(&s.as_str()) {
        return Err(Error::validation(
            "status",
            "`status` must be PENDING, DISPENSED or CANCELLED.",
        ));
    }
    Ok(Some(s))
}

/// The branch's prescriptions with their lines: pending first, then newest.
#[utoipa::path(tag = "prescriptions", security(("bearer" = [])),
    params(PrescriptionQuery, PageParams),
    responses((status = 200, body = Paged<Prescription>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/prescriptions")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<PrescriptionQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(q.branch_id)?;
    let status = status_filter(q.status.as_deref())?;
    let page = paging.resolve(20)?;
    let client = state.pool.get().await?;
    let (items, total) = prescriptions::list(&client, branch_id, status.as_deref(), page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One prescription with its lines.
#[utoipa::path(tag = "prescriptions", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Prescription), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/prescriptions/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Prescription")?;
    let client = state.pool.get().await?;
    Ok(HttpResponse::Ok().json(moves::visible(&client, &caller.acting(), id).await?))
}

/// Runs one move as `caller`: the role, then the id, then the domain's
/// rules (`domain::prescriptions::moves::run_move`).
async fn run(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    mv: Move,
) -> Result<Option<Prescription>> {
    caller.require(Action::WritePrescriptions)?;
    let id = path_id(raw_id, "Prescription")?;
    moves::run_move(&state.pool, &caller.acting(), id, mv).await
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DispenseRequest {
    /// Required: the sale that filled the prescription, of the same branch.
    #[schema(value_type = String, format = Uuid)]
    pub sale_id: Option<Uuid>,
}

/// `PENDING` → `DISPENSED`, linking the sale and recording who dispensed it.
#[utoipa::path(tag = "prescriptions", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = DispenseRequest,
    responses((status = 200, body = Prescription), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/prescriptions/{id}/dispense")]
pub async fn dispense(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<DispenseRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::WritePrescriptions)?;
    let sale_id = body
        .sale_id
        .ok_or_else(|| Error::validation("sale_id", "The field `sale_id` is required."))?;
    let mv = Move::Dispense {
        sale_id,
        by: caller.user_id,
    };
    let p = run(&state, &caller, &id, mv).await?;
    Ok(HttpResponse::Ok().json(p))
}

/// `PENDING` → `CANCELLED`, while nothing was dispensed against it (409 after).
#[utoipa::path(tag = "prescriptions", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Prescription), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/prescriptions/{id}/cancel")]
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let p = run(&state, &caller, &id, Move::Cancel).await?;
    Ok(HttpResponse::Ok().json(p))
}

/// Soft-deletes a pending or cancelled prescription (409 once anything was
/// dispensed against it).
#[utoipa::path(tag = "prescriptions", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[delete("/prescriptions/{id}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    run(&state, &caller, &id, Move::Delete).await?;
    Ok(HttpResponse::NoContent().finish())
}
