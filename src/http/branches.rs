//! `/branches`: admins write; everyone reads their own branch.

use actix_web::{web, HttpResponse};
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json};
use crate::state::AppState;
use domain::branches::{self, Branch, BranchCreate, BranchUpdate};
use domain::error::Problem;
use domain::{Action, Error, Result};

use actix_web::{delete, get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get)
        .service(update)
        .service(delete);
}

#[derive(Debug, serde::Serialize, ToSchema)]
pub struct BranchList {
    pub items: Vec<Branch>,
    pub total: i64,
}

/// Branches the caller may see (an admin sees all).
#[utoipa::path(tag = "branches", security(("bearer" = [])),
    responses((status = 200, body = BranchList), (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/branches")]
pub async fn list(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    let client = state.pool.get().await?;
    let only = (!caller.any_branch()).then_some(caller.branch_id);
    let items = branches::list(&client, only).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(BranchList { items, total }))
}

/// One branch; 404 for a branch the caller may not see.
#[utoipa::path(tag = "branches", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Branch), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/branches/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Branch")?;
    if !caller.can_see_branch(id) {
        return Err(Error::not_found("Branch not found"));
    }
    let client = state.pool.get().await?;
    let branch = branches::get(&client, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    Ok(HttpResponse::Ok().json(branch))
}

/// Creates a branch (admin); its currency defaults to the base currency.
#[utoipa::path(tag = "branches", security(("bearer" = [])),
    request_body = BranchCreate,
    responses((status = 201, body = Branch), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/branches")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<BranchCreate>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageBranches)?;
    let branch = branches::create_branch(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(branch))
}

/// Changes the fields sent of a branch (admin).
#[utoipa::path(tag = "branches", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = BranchUpdate,
    responses((status = 200, body = Branch), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[put("/branches/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<BranchUpdate>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageBranches)?;
    let id = path_id(&id, "Branch")?;
    let branch = branches::update_branch(&state.pool, id, body).await?;
    Ok(HttpResponse::Ok().json(branch))
}

/// Soft-deletes a branch (admin); 409 while it has active users or is the caller's own.
#[utoipa::path(tag = "branches", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[delete("/branches/{id}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageBranches)?;
    let id = path_id(&id, "Branch")?;
    branches::delete_branch(&state.pool, &caller.acting(), id).await?;
    Ok(HttpResponse::NoContent().finish())
}
