//! `/suppliers`: the supplier directory. Anyone signed in reads; admins,
//! inventory managers and branch managers write.

use actix_web::{web, HttpResponse};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use crate::store::suppliers::{self, Activity, Fields, Supplier};
use actors::changes::Op;
use actors::error::Problem;
use actors::input::{self, Flag};
use actors::{Error, Result, Role};

const WRITERS: &[Role] = &[Role::Admin, Role::InventoryManager, Role::BranchManager];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/suppliers")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(
        web::resource("/suppliers/{id}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    );
}

/// Create (`name` required) or update body. An update applies only these
/// fields (the allowlist); anything else is ignored.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SupplierWrite {
    pub name: Option<String>,
    pub tax_number: Option<String>,
    pub contact_person: Option<String>,
    pub phone: Option<String>,
    pub email: Option<String>,
    pub address: Option<String>,
    pub image_url: Option<String>,
    /// Default `distributor`.
    pub supplier_type: Option<String>,
    /// Whole days, 0..365 (default 7).
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 365)]
    pub lead_time_days: Option<Decimal>,
    /// 0..100 (default 100).
    #[schema(value_type = Option<f64>, minimum = 0, maximum = 100)]
    pub reliability_score: Option<Decimal>,
    /// Updates only: reactivate (true) or deactivate (false).
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Flag>,
}

fn fields(body: SupplierWrite) -> Result<Fields> {
    let mut f: Fields = Vec::new();
    if let Some(v) = body.name {
        f.push(("name", input::required_text("name", &v, 200)?.into()));
    }
    if let Some(v) = body.supplier_type {
        let v = input::required_text("supplier_type", &v, 50)?.to_lowercase();
        f.push(("supplier_type", v.into()));
    }
    for (col, v) in [
        ("tax_number", body.tax_number),
        ("contact_person", body.contact_person),
        ("phone", body.phone),
        ("email", body.email),
        ("address", body.address),
        ("image_url", body.image_url),
    ] {
        if let Some(v) = v {
            f.push((col, input::text(col, &v, 500)?.into()));
        }
    }
    if let Some(v) = body.lead_time_days {
        let days = input::whole("lead_time_days", v, 0)?;
        if days > 365 {
            return Err(Error::validation(
                "lead_time_days",
                "`lead_time_days` must be at most 365.",
            ));
        }
        f.push(("lead_time_days", days.into()));
    }
    if let Some(v) = body.reliability_score {
        let v = input::amount("reliability_score", v)?;
        if v > Decimal::ONE_HUNDRED {
            return Err(Error::validation(
                "reliability_score",
                "`reliability_score` must be between 0 and 100.",
            ));
        }
        f.push(("reliability_score", v.into()));
    }
    if let Some(Flag(v)) = body.is_active {
        f.push(("is_active", v.into()));
    }
    Ok(f)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SupplierQuery {
    /// Part of the name or tax number.
    pub search: Option<String>,
    /// `true` (default), `false` (deactivated or deleted) or `all`.
    pub is_active: Option<String>,
}

#[derive(Debug, serde::Serialize, ToSchema)]
pub struct SupplierPage {
    pub items: Vec<Supplier>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[utoipa::path(get, path = "/api/v1/suppliers", tag = "suppliers", security(("bearer" = [])),
    params(SupplierQuery, PageParams),
    responses((status = 200, body = SupplierPage), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json")))]
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

#[utoipa::path(get, path = "/api/v1/suppliers/{id}", tag = "suppliers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Supplier), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
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

#[utoipa::path(post, path = "/api/v1/suppliers", tag = "suppliers", security(("bearer" = [])),
    request_body = SupplierWrite,
    responses((status = 201, body = Supplier), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(mut body): Json<SupplierWrite>,
) -> Result<HttpResponse> {
    caller.require(WRITERS)?;
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    body.is_active = None;
    let fields = fields(body)?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let supplier = suppliers::insert(&tx, fields).await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(supplier))
}

#[utoipa::path(put, path = "/api/v1/suppliers/{id}", tag = "suppliers", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = SupplierWrite,
    responses((status = 200, body = Supplier), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<SupplierWrite>,
) -> Result<HttpResponse> {
    caller.require(WRITERS)?;
    let id = path_id(&id, "Supplier")?;
    let fields = fields(body)?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let supplier = suppliers::update(&tx, id, fields, Op::Update)
        .await?
        .ok_or_else(|| Error::not_found("Supplier not found"))?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(supplier))
}

#[utoipa::path(delete, path = "/api/v1/suppliers/{id}", tag = "suppliers", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(WRITERS)?;
    let id = path_id(&id, "Supplier")?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let fields: Fields = vec![("is_deleted", true.into()), ("is_active", false.into())];
    suppliers::update(&tx, id, fields, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("Supplier not found"))?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}
