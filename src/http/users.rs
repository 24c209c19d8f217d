//! `/users`: an admin manages users of any branch; a branch manager manages
//! the non-admin users of its own branch. Deactivating a user, or changing
//! its password, role or branch, ends every token it holds at once (the
//! token version the caller extractor checks on every request).

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::users::manage::{self, UserCreate, UserUpdate};
use domain::users::{self, User};
use domain::{Action, Error, Result, Role};

use actix_web::{delete, get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(get)
        .service(update)
        .service(delete);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UserQuery {
    pub branch_id: Option<Uuid>,
    pub role: Option<Role>,
    /// Partial match on name or email.
    pub search: Option<String>,
}

/// Staff accounts the caller manages, 20 per page.
#[utoipa::path(tag = "users", security(("bearer" = [])), params(UserQuery, PageParams),
    responses((status = 200, body = Paged<User>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/users")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<UserQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageUsers)?;
    let page = paging.resolve(20)?;
    let filter = users::ListFilter {
        branch_id: caller.branch_filter(q.branch_id)?,
        role: q.role,
        search: q.search,
    };
    let client = state.pool.get().await?;
    let (items, total) = users::list(&client, &filter, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One staff account (anyone may read their own).
#[utoipa::path(tag = "users", security(("bearer" = [])), params(("id" = String, Path)),
    responses((status = 200, body = User), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/users/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "User")?;
    if id != caller.user_id {
        caller.require(Action::ManageUsers)?;
    }
    let client = state.pool.get().await?;
    let user = users::get(&client, id)
        .await?
        .filter(|u| caller.can_see_branch(u.branch_id))
        .ok_or_else(|| Error::not_found("User not found"))?;
    Ok(HttpResponse::Ok().json(user))
}

/// Creates a staff account; a branch manager only on its own branch and never an admin.
#[utoipa::path(tag = "users", security(("bearer" = [])), request_body = UserCreate,
    responses((status = 201, body = User), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/users")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<UserCreate>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageUsers)?;
    let user = manage::create_user(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(user))
}

/// Changes the fields sent of a staff account; the change is audited.
#[utoipa::path(tag = "users", security(("bearer" = [])), params(("id" = String, Path)),
    request_body = UserUpdate,
    responses((status = 200, body = User), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[put("/users/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<UserUpdate>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageUsers)?;
    let id = path_id(&id, "User")?;
    let user = manage::update_user(&state.pool, &caller.acting(), id, body).await?;
    Ok(HttpResponse::Ok().json(user))
}

/// Deactivates a staff account and revokes its refresh tokens; the change is audited.
#[utoipa::path(tag = "users", security(("bearer" = [])), params(("id" = String, Path)),
    responses((status = 204), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/users/{id}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageUsers)?;
    let id = path_id(&id, "User")?;
    manage::deactivate_user(&state.pool, &caller.acting(), id).await?;
    Ok(HttpResponse::NoContent().finish())
}
