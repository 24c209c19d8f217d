//! `/suppliers`: the supplier directory. Anyone signed in reads; admins,
//! inventory managers and branch managers write.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::suppliers::committed;
use domain::suppliers::{self, Activity, Supplier, SupplierWrite};
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

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SupplierQuery {
    /// Part of the name or tax number.
    pub search: Option<String>,
    /// `true` (default), `false` (deactivated or deleted) or `all`.
    pub is_active: Option<String>,
}

/// Suppliers by name, 20 per page.
#[utoipa::path(tag = "suppliers", security(("bearer" = [])),
    params(SupplierQuery, PageParams),
    responses((status = 200, body = Paged<Supplier>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
#[get("/suppliers")]
pub async fn list(
    state: web::Data<AppState>,
    _caller: Caller,
    Query(q): Query<SupplierQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let activity = match q.is_active.as_deref().map(str::trim) {
        None | Some("") | Some("true") | Some("1") => Activity::Active,
        Some("false") | Some("0") => Activity::Inactive,
        Some("all") => Activity::All,
        Some(_) => {
            return Err(Error::validation(
                "is_active",
                "`is_active` must be true, false or all.",
            ))
        }
    };
    let client = state.pool.get().await?;
    let (items, total) = suppliers::list(&client, q.search.as_deref(), activity, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One supplier.
#[utoipa::path(tag = "suppliers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Supplier), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/suppliers/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    _caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Supplier")?;
    let client = state.pool.get().await?;
    let supplier = suppliers::get(&client, id)
        .await?
        .ok_or_else(|| Error::not_found("Supplier not found"))?;
    Ok(HttpResponse::Ok().json(supplier))
}

/// Adds a supplier.
#[utoipa::path(tag = "suppliers", security(("bearer" = [])),
    request_body = SupplierWrite,
    responses((status = 201, body = Supplier), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/suppliers")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<SupplierWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteSuppliers)?;
    let supplier = committed::create(&state.pool, body).await?;
    Ok(HttpResponse::Created().json(supplier))
}

/// Changes the fields sent of a supplier.
#[utoipa::path(tag = "suppliers", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = SupplierWrite,
    responses((status = 200, body = Supplier), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[put("/suppliers/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<SupplierWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteSuppliers)?;
    let id = path_id(&id, "Supplier")?;
    let supplier = committed::edit(&state.pool, id, body).await?;
    Ok(HttpResponse::Ok().json(supplier))
}

/// Soft-deletes a supplier.
#[utoipa::path(tag = "suppliers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/suppliers/{id}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteSuppliers)?;
    let id = path_id(&id, "Supplier")?;
    committed::remove(&state.pool, id).await?;
    Ok(HttpResponse::NoContent().finish())
}
