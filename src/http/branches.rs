//! `/branches`: admins write; everyone reads their own branch.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json};
use crate::state::AppState;
use domain::branches::{self, Branch, BranchFields};
use domain::error::Problem;
use domain::input::{self, max};
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

#[derive(Debug, Deserialize, ToSchema)]
pub struct BranchCreate {
    pub code: String,
    pub name: String,
    pub city: Option<String>,
    pub vat_number: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    /// Defaults to the organisation's base currency.
    pub currency_code: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct BranchUpdate {
    pub code: Option<String>,
    pub name: Option<String>,
    pub city: Option<String>,
    pub vat_number: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    pub currency_code: Option<String>,
    pub is_active: Option<bool>,
}

#[derive(Debug, serde::Serialize, ToSchema)]
pub struct BranchList {
    pub items: Vec<Branch>,
    pub total: i64,
}

fn required(field: &str, value: &str) -> Result<String> {
    input::required_text(field, value, max::NAME)
}

fn optional(field: &str, value: Option<String>, limit: usize) -> Result<Option<String>> {
    value.map(|v| input::text(field, &v, limit)).transpose()
}

fn code(value: &str) -> Result<String> {
    let c = required("code", value)?.to_uppercase();
    if c.len() > 32
        || !c
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
    {
        return Err(Error::validation(
            "code",
            "`code` must be up to 32 letters, digits, `-` or `_`.",
        ));
    }
    Ok(c)
}

async fn currency(client: &deadpool_postgres::Client, code: &str) -> Result<String> {
    let c = code.trim().to_uppercase();
    if !branches::currency_active(client, &c).await? {
        return Err(Error::validation(
            "currency_code",
            format!("`{c}` is not an active currency."),
        ));
    }
    Ok(c)
}

fn duplicate_code(e: Error) -> Error {
    match e {
        Error::Conflict(_) => Error::conflict("A branch with this code already exists."),
        other => other,
    }
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
    Ok(HttpResponse::Created().json(create_as(&state, &caller, body).await?))
}

/// Creates a branch as `caller` (the API and the console both create
/// branches through here).
pub async fn create_as(state: &AppState, caller: &Caller, body: BranchCreate) -> Result<Branch> {
    caller.require(Action::ManageBranches)?;
    let mut client = state.pool.get().await?;
    let currency_code = match body.currency_code.as_deref() {
        Some(c) => currency(&client, c).await?,
        None => base_currency(&client).await?,
    };
    let fields = BranchFields {
        code: Some(code(&body.code)?),
        name: Some(required("name", &body.name)?),
        city: optional("city", body.city, max::LABEL)?,
        vat_number: optional("vat_number", body.vat_number, max::CODE)?,
        address: optional("address", body.address, max::ADDRESS)?,
        image_url: optional("image_url", body.image_url, max::URL)?,
        currency_code: Some(currency_code),
        is_active: None,
    };
    let tx = client.transaction().await?;
    let branch = branches::insert(&tx, caller.org_id, fields)
        .await
        .map_err(duplicate_code)?;
    tx.commit().await?;
    Ok(branch)
}

async fn base_currency(client: &deadpool_postgres::Client) -> Result<String> {
    use sea_query::Query;
    let q = Query::select()
        .column("base_currency")
        .from("settings")
        .to_owned();
    Ok(domain::db::fetch_opt(client, &q)
        .await?
        .map(|r| r.get(0))
        .unwrap_or_else(|| "UGX".to_owned()))
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
    let mut client = state.pool.get().await?;
    let currency_code = match body.currency_code.as_deref() {
        Some(c) => Some(currency(&client, c).await?),
        None => None,
    };
    let fields = BranchFields {
        code: body.code.as_deref().map(code).transpose()?,
        name: body
            .name
            .as_deref()
            .map(|n| required("name", n))
            .transpose()?,
        city: optional("city", body.city, max::LABEL)?,
        vat_number: optional("vat_number", body.vat_number, max::CODE)?,
        address: optional("address", body.address, max::ADDRESS)?,
        image_url: optional("image_url", body.image_url, max::URL)?,
        currency_code,
        is_active: body.is_active,
    };
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let tx = client.transaction().await?;
    let branch = branches::update(&tx, id, fields)
        .await
        .map_err(duplicate_code)?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    tx.commit().await?;
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
    if id == caller.branch_id {
        return Err(Error::conflict(
            "You cannot delete the branch you belong to.",
        ));
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    if branches::active_user_count(&tx, id).await? > 0 {
        return Err(Error::conflict(
            "The branch still has active users; move or deactivate them first.",
        ));
    }
    branches::soft_delete(&tx, id)
        .await?
        .ok_or_else(|| Error::not_found("Branch not found"))?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}
