//! `/approvals`: manager approvals. Anyone signed in asks for one on their
//! branch; an admin or a manager of that branch, never the requester,
//! decides it once. Each decision is audited with the before and after rows.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::approvals::{self, Approval, ApprovalCreate};
use domain::error::Problem;
use domain::{Action, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(approve)
        .service(reject);
}

/// Files a `pending` request on the caller's branch.
#[utoipa::path(tag = "approvals", security(("bearer" = [])),
    request_body = ApprovalCreate,
    responses((status = 201, body = Approval), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/approvals")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<ApprovalCreate>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(body.branch_id)?;
    let new = body.validate(branch_id, caller.user_id)?;
    let client = state.pool.get().await?;
    let approval = approvals::insert(&client, new).await?;
    Ok(HttpResponse::Created().json(approval))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ApprovalQuery {
    /// `pending`, `approved` or `rejected` (any case; empty = all).
    #[param(schema_with = approvals::status_filter_schema)]
    pub status: Option<String>,
    /// Admins only: one branch (default: every branch for an admin, the
    /// caller's own for everyone else).
    pub branch_id: Option<Uuid>,
}

/// Approvals, newest first, 20 per page.
#[utoipa::path(tag = "approvals", security(("bearer" = [])),
    params(ApprovalQuery, PageParams),
    responses((status = 200, body = Paged<Approval>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/approvals")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<ApprovalQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_filter(q.branch_id)?;
    let status = approvals::status_filter(q.status.as_deref())?;
    let page = paging.resolve(20)?;
    let client = state.pool.get().await?;
    let (items, total) = approvals::list(&client, branch_id, status.as_deref(), page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// Decides one approval (see `domain::approvals::decide_one`); the console
/// decides through the same domain function.
async fn decide(state: &AppState, caller: &Caller, raw_id: &str, status: &str) -> Result<Approval> {
    caller.require(Action::DecideApprovals)?;
    let id = path_id(raw_id, "Approval")?;
    approvals::decide_one(&state.pool, &state.actors, &caller.acting(), id, status).await
}

/// `pending` → `approved`.
#[utoipa::path(tag = "approvals", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Approval), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/approvals/{id}/approve")]
pub async fn approve(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(decide(&state, &caller, &id, "approved").await?))
}

/// `pending` → `rejected`.
#[utoipa::path(tag = "approvals", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Approval), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/approvals/{id}/reject")]
pub async fn reject(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(decide(&state, &caller, &id, "rejected").await?))
}
