//! `/ops/actors`: the live actors of this server process, and per-branch
//! mailbox tuning without a restart (admin).
//!
//! A branch's mailbox capacity and group-commit size come, field by field,
//! from its stored override (set here), else the static override of its
//! code in `config/*.toml` (`[actors.branches.<CODE>]`), else the
//! `[actors]` defaults. A change is audited, applied at once by the process
//! that took it and by every other process at its next reload
//! (`actors.overrides_reload_ms`, 2 s by default).

use actix_web::{web, HttpResponse};

use crate::auth::Caller;
use crate::http::extract::{path_id, Json};
use crate::state::AppState;
use domain::actor_tuning::{self, ActorList, BranchTuning, BranchTuningWrite};
use domain::error::Problem;
use domain::{Action, Result};

use actix_web::{delete, get, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(get_branch)
        .service(put_branch)
        .service(delete_branch);
}

/// The live actors of the answering process, branches first (by code).
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    responses((status = 200, body = ActorList), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/ops/actors")]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    caller.require(Action::OperateActors)?;
    let list = actor_tuning::actors_of(&state.runtime(), &caller.acting()).await?;
    Ok(HttpResponse::Ok().json(list))
}

/// A branch's tuning.
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    params(("branchId" = String, Path)),
    responses((status = 200, body = BranchTuning), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/ops/actors/branches/{branchId}")]
pub async fn get_branch(
    state: web::Data<AppState>,
    caller: Caller,
    branch_id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::OperateActors)?;
    let id = path_id(&branch_id, "Branch")?;
    let tuning = actor_tuning::tuning_of(&state.runtime(), &caller.acting(), id).await?;
    Ok(HttpResponse::Ok().json(tuning))
}

/// Sets the branch's mailbox capacity and group-commit size (admin),
/// audited, and applied by every server process within a few seconds.
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    params(("branchId" = String, Path)), request_body = BranchTuningWrite,
    responses((status = 200, body = BranchTuning), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[put("/ops/actors/branches/{branchId}")]
pub async fn put_branch(
    state: web::Data<AppState>,
    caller: Caller,
    branch_id: web::Path<String>,
    Json(body): Json<BranchTuningWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::OperateActors)?;
    let id = path_id(&branch_id, "Branch")?;
    let tuning = actor_tuning::set_tuning(&state.runtime(), &caller.acting(), id, body).await?;
    Ok(HttpResponse::Ok().json(tuning))
}

/// Removes the branch's stored override (admin): it goes back to the
/// configured values. 204 also when it had none.
#[utoipa::path(tag = "ops",
    security(("bearer" = [])),
    params(("branchId" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/ops/actors/branches/{branchId}")]
pub async fn delete_branch(
    state: web::Data<AppState>,
    caller: Caller,
    branch_id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::OperateActors)?;
    let id = path_id(&branch_id, "Branch")?;
    actor_tuning::clear_tuning(&state.runtime(), &caller.acting(), id).await?;
    Ok(HttpResponse::NoContent().finish())
}
