//! `/users`: an admin manages users of any branch; a branch manager manages
//! the non-admin users of its own branch. Deactivating a user, or changing
//! its password, role or branch, ends every token it holds at once (the
//! token version the caller extractor checks on every request).

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{passwords, Caller};
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::sync::changes::Op;
use domain::users::{self, User};
use domain::{audit, branches};
use domain::{input, Action, Error, Result, Role};

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

#[derive(Debug, Deserialize, ToSchema)]
pub struct UserCreate {
    pub email: String,
    /// At least 8 characters.
    pub password: String,
    pub full_name: String,
    pub role: Role,
    #[schema(value_type = String, format = Uuid)]
    pub branch_id: Uuid,
    pub phone: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct UserUpdate {
    pub email: Option<String>,
    pub password: Option<String>,
    pub full_name: Option<String>,
    pub role: Option<Role>,
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    pub phone: Option<String>,
    pub is_active: Option<bool>,
}

/// A branch manager may only touch non-admin users of its own branch.
fn may_manage(caller: &Caller, branch_id: Uuid, role: Role) -> Result<()> {
    caller.require(Action::ManageUsers)?;
    if branch_id != caller.branch_id && !caller.any_branch() {
        return Err(Error::forbidden(
            "You can only manage users of your own branch.",
        ));
    }
    if role == Role::Admin && !Action::ManageAdminUsers.permits(caller.role) {
        return Err(Error::forbidden("Only an admin can manage admin users."));
    }
    Ok(())
}

fn email(value: &str) -> Result<String> {
    let e = input::text("email", value, input::max::EMAIL)?.to_lowercase();
    let valid = e.len() <= 254
        && e.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        })
        && !e.contains(char::is_whitespace);
    if !valid {
        return Err(Error::validation(
            "email",
            "`email` must be an email address.",
        ));
    }
    Ok(e)
}

fn full_name(value: &str) -> Result<String> {
    input::required_text("full_name", value, input::max::NAME)
}

fn phone(value: &str) -> Result<String> {
    input::text("phone", value, input::max::CODE)
}

/// Records a user write in the audit log with its before and after values.
async fn audit_user(
    tx: &deadpool_postgres::Transaction<'_>,
    caller: &Caller,
    action: &str,
    before: Option<&User>,
    after: Option<&User>,
) -> Result<()> {
    let subject = after.or(before);
    audit::write_for(
        tx,
        subject.map(|u| u.branch_id),
        audit::Entry {
            actor_id: Some(caller.user_id),
            action,
            entity_type: "user",
            entity_id: subject.map(|u| u.id.to_string()).unwrap_or_default(),
            before: before.and_then(|u| serde_json::to_value(u).ok()),
            after: after.and_then(|u| serde_json::to_value(u).ok()),
        },
    )
    .await
}

fn duplicate_email(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict("A user with this email already exists."),
        other => other,
    }
}

async fn live_branch(client: &deadpool_postgres::Client, id: Uuid) -> Result<()> {
    branches::get(client, id)
        .await?
        .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    Ok(())
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
    Ok(HttpResponse::Created().json(create_as(&state, &caller, body).await?))
}

/// Creates a staff account as `caller` (the API and the console both
/// create through here).
pub async fn create_as(state: &AppState, caller: &Caller, body: UserCreate) -> Result<User> {
    may_manage(caller, body.branch_id, body.role)?;
    let email = email(&body.email)?;
    let full_name = full_name(&body.full_name)?;
    passwords::validate_new(&body.password)?;
    let mut client = state.pool.get().await?;
    live_branch(&client, body.branch_id).await?;
    let password_hash = passwords::hash_blocking(body.password).await?;
    let tx = client.transaction().await?;
    let user = users::insert(
        &tx,
        users::NewUser {
            org_id: caller.org_id,
            branch_id: body.branch_id,
            email,
            password_hash,
            full_name,
            phone: phone(body.phone.as_deref().unwrap_or_default())?,
            role: body.role,
        },
    )
    .await
    .map_err(duplicate_email)?;
    audit_user(&tx, caller, "user.create", None, Some(&user)).await?;
    tx.commit().await?;
    Ok(user)
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
    Ok(HttpResponse::Ok().json(update_as(&state, &caller, &id, body).await?))
}

/// Changes the fields sent of staff account `raw_id` as `caller` (the API
/// and the console both change accounts through here).
pub async fn update_as(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    body: UserUpdate,
) -> Result<User> {
    caller.require(Action::ManageUsers)?;
    let id = path_id(raw_id, "User")?;
    let mut client = state.pool.get().await?;
    let before = users::get(&client, id)
        .await?
        .filter(|u| caller.can_see_branch(u.branch_id))
        .ok_or_else(|| Error::not_found("User not found"))?;
    // Both the user as it is and as it would be must be the caller's to manage.
    may_manage(caller, before.branch_id, before.role)?;
    may_manage(
        caller,
        body.branch_id.unwrap_or(before.branch_id),
        body.role.unwrap_or(before.role),
    )?;
    if id == caller.user_id
        && (body.role.is_some_and(|r| r != before.role) || body.is_active == Some(false))
    {
        return Err(Error::bad_request(
            "You cannot change your own role or deactivate yourself.",
        ));
    }
    let mut pairs: Vec<(&'static str, sea_query::Value)> = Vec::new();
    if let Some(e) = &body.email {
        pairs.push(("email", email(e)?.into()));
    }
    if let Some(n) = &body.full_name {
        pairs.push(("full_name", full_name(n)?.into()));
    }
    if let Some(p) = &body.phone {
        pairs.push(("phone", phone(p)?.into()));
    }
    if let Some(r) = body.role {
        pairs.push(("role", r.as_str().into()));
    }
    if let Some(b) = body.branch_id {
        live_branch(&client, b).await?;
        pairs.push(("branch_id", b.into()));
    }
    if let Some(a) = body.is_active {
        pairs.push(("is_active", a.into()));
    }
    if let Some(p) = body.password.clone() {
        passwords::validate_new(&p)?;
        pairs.push(("password_hash", passwords::hash_blocking(p).await?.into()));
    }
    if pairs.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let tx = client.transaction().await?;
    let user = users::update(&tx, id, pairs, Op::Update)
        .await
        .map_err(duplicate_email)?
        .ok_or_else(|| Error::not_found("User not found"))?;
    // The same update bumped the user's token version (a trigger), which
    // ends every token issued before it; the sessions are ended too.
    let ends_tokens = body.password.is_some()
        || (before.is_active && !user.is_active)
        || user.role != before.role
        || user.branch_id != before.branch_id;
    if ends_tokens {
        users::revoke_refresh_tokens(&tx, id).await?;
    }
    let action = if user.role != before.role {
        "user.role_change"
    } else {
        "user.update"
    };
    audit_user(&tx, caller, action, Some(&before), Some(&user)).await?;
    tx.commit().await?;
    Ok(user)
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
    if id == caller.user_id {
        return Err(Error::bad_request("You cannot deactivate yourself."));
    }
    let mut client = state.pool.get().await?;
    let before = users::get(&client, id)
        .await?
        .filter(|u| caller.can_see_branch(u.branch_id))
        .ok_or_else(|| Error::not_found("User not found"))?;
    may_manage(&caller, before.branch_id, before.role)?;
    let tx = client.transaction().await?;
    let pairs = vec![("is_active", false.into()), ("is_deleted", true.into())];
    let user = users::update(&tx, id, pairs, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("User not found"))?;
    users::revoke_refresh_tokens(&tx, id).await?;
    audit_user(&tx, &caller, "user.deactivate", Some(&before), Some(&user)).await?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}
