//! `/medicines`: the organisation-wide catalogue. Anyone signed in reads;
//! admins, inventory managers and branch managers write.

use actix_web::{web, HttpResponse};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use crate::store::medicines::{self, Fields, Medicine, MedicineView};
use actors::changes::Op;
use actors::error::Problem;
use actors::input::{self, Flag};
use actors::{Error, Result, Role};

const WRITERS: &[Role] = &[Role::Admin, Role::InventoryManager, Role::BranchManager];
pub const VAT_CATEGORIES: [&str; 3] = ["standard", "zero", "exempt"];

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/medicines")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(
        web::resource("/medicines/{id}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    );
}

/// Body of a create (`name` and `selling_price` required) or an update
/// (only the fields to change). Money as a number or a decimal string,
/// flags as booleans or 0/1.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct MedicineWrite {
    pub name: Option<String>,
    pub generic_name: Option<String>,
    pub barcode: Option<String>,
    /// A category slug or name; unknown ones are added.
    pub category: Option<String>,
    pub form: Option<String>,
    pub strength: Option<String>,
    pub unit: Option<String>,
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub selling_price: Option<Decimal>,
    /// 0 or null: no ceiling.
    #[schema(value_type = Option<f64>, minimum = 0)]
    pub max_public_price: Option<Decimal>,
    /// Defaults to the settings' `default_low_stock_threshold`.
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub low_stock_threshold: Option<Decimal>,
    #[schema(value_type = Option<bool>)]
    pub requires_prescription: Option<Flag>,
    #[schema(value_type = Option<bool>)]
    pub is_controlled: Option<Flag>,
    pub control_schedule: Option<String>,
    /// `standard` (default), `zero` or `exempt`.
    pub vat_category: Option<String>,
    #[schema(value_type = Option<bool>)]
    pub requires_cold_chain: Option<Flag>,
    pub regulator_registration_no: Option<String>,
    pub image_key: Option<String>,
    pub image_url: Option<String>,
    #[schema(value_type = Option<bool>)]
    pub is_active: Option<Flag>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MedicineQuery {
    /// Part of the name or generic name, or the exact barcode.
    pub search: Option<String>,
    /// Category slug.
    pub category: Option<String>,
    /// Admins: whose stock `stock_quantity` shows (default: the whole chain).
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, serde::Serialize, ToSchema)]
pub struct MedicinePage {
    pub items: Vec<MedicineView>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
}

#[utoipa::path(get, path = "/api/v1/medicines", tag = "medicines", security(("bearer" = [])),
    params(MedicineQuery, PageParams),
    responses((status = 200, body = MedicinePage), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<MedicineQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let filter = medicines::ListFilter {
        search: q.search,
        category: q.category,
        branch_id: caller.branch_filter(q.branch_id)?,
    };
    let client = state.pool.get().await?;
    let (items, total) = medicines::list(&client, &filter, page).await?;
    let items = items.iter().map(Medicine::view).collect();
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One medicine with its live stock; 404 when missing or deactivated.
#[utoipa::path(get, path = "/api/v1/medicines/{id}", tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path), MedicineQuery),
    responses((status = 200, body = MedicineView), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Query(q): Query<MedicineQuery>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Medicine")?;
    // Whose stock the read shows: a branch caller's own branch; an admin the
    // branch it names, or the whole chain.
    let scope = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    let medicine = medicines::get(&client, id, scope)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    Ok(HttpResponse::Ok().json(medicine.view()))
}

#[utoipa::path(post, path = "/api/v1/medicines", tag = "medicines", security(("bearer" = [])),
    request_body = MedicineWrite,
    responses((status = 201, body = MedicineView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<MedicineWrite>,
) -> Result<HttpResponse> {
    caller.require(WRITERS)?;
    let name = body
        .name
        .as_deref()
        .ok_or_else(|| Error::validation("name", "The field `name` is required."))?;
    input::required_text("name", name, 200)?;
    let price = body.selling_price.ok_or_else(|| {
        Error::validation("selling_price", "The field `selling_price` is required.")
    })?;
    check_ceiling(price, body.max_public_price.unwrap_or_default())?;
    let mut client = state.pool.get().await?;
    let threshold_given = body.low_stock_threshold.is_some();
    let default_threshold = medicines::default_threshold(&client).await?;
    let tx = client.transaction().await?;
    let mut fields = fields(&tx, body).await?;
    if !threshold_given {
        fields.set("low_stock_threshold", default_threshold);
    }
    let mut medicine = medicines::insert(&tx, fields).await?;
    tx.commit().await?;
    medicine.stock_quantity = 0;
    Ok(HttpResponse::Created().json(medicine.view()))
}

#[utoipa::path(put, path = "/api/v1/medicines/{id}", tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = MedicineWrite,
    responses((status = 200, body = MedicineView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<MedicineWrite>,
) -> Result<HttpResponse> {
    caller.require(WRITERS)?;
    let id = path_id(&id, "Medicine")?;
    let mut client = state.pool.get().await?;
    let current = medicines::current(&client, id)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    check_ceiling(
        body.selling_price.unwrap_or(current.selling_price),
        body.max_public_price.unwrap_or(current.max_public_price),
    )?;
    let tx = client.transaction().await?;
    let fields = fields(&tx, body).await?;
    if fields.is_empty() {
        return Err(Error::bad_request("No fields to update"));
    }
    let medicine = medicines::update(&tx, id, fields, Op::Update)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(medicine.view()))
}

#[utoipa::path(delete, path = "/api/v1/medicines/{id}", tag = "medicines", security(("bearer" = [])),
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
    let id = path_id(&id, "Medicine")?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let mut fields = Fields::default();
    fields.set("is_deleted", true);
    fields.set("is_active", false);
    medicines::update(&tx, id, fields, Op::Delete)
        .await?
        .ok_or_else(|| Error::not_found("Medicine not found"))?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A selling price above a filed ceiling is refused.
fn check_ceiling(price: Decimal, ceiling: Decimal) -> Result<()> {
    if ceiling > Decimal::ZERO && price > ceiling {
        return Err(Error::validation(
            "selling_price",
            format!("The selling price {price} is above the maximum public price {ceiling}."),
        ));
    }
    Ok(())
}

/// Validates the fields present in `body` into column values.
async fn fields(tx: &impl deadpool_postgres::GenericClient, body: MedicineWrite) -> Result<Fields> {
    let mut f = Fields::default();
    if let Some(v) = body.name {
        f.set("name", input::required_text("name", &v, 200)?);
    }
    let texts = [
        ("generic_name", body.generic_name),
        ("barcode", body.barcode),
        ("form", body.form),
        ("strength", body.strength),
        ("unit", body.unit),
        ("control_schedule", body.control_schedule),
        ("regulator_registration_no", body.regulator_registration_no),
        ("image_key", body.image_key),
        ("image_url", body.image_url),
    ];
    for (col, v) in texts {
        if let Some(v) = v {
            f.set(col, input::text(col, &v, 500)?);
        }
    }
    if let Some(v) = body.category {
        let slug = if v.trim().is_empty() {
            None
        } else {
            Some(medicines::ensure_category(tx, &v).await?)
        };
        f.set("category", slug);
    }
    if let Some(v) = body.selling_price {
        f.set("selling_price", input::amount("selling_price", v)?);
    }
    if let Some(v) = body.max_public_price {
        f.set("max_public_price", input::amount("max_public_price", v)?);
    }
    if let Some(v) = body.low_stock_threshold {
        f.set(
            "low_stock_threshold",
            input::whole("low_stock_threshold", v, 0)?,
        );
    }
    let flags = [
        ("requires_prescription", body.requires_prescription),
        ("is_controlled", body.is_controlled),
        ("requires_cold_chain", body.requires_cold_chain),
        ("is_active", body.is_active),
    ];
    for (col, v) in flags {
        if let Some(Flag(b)) = v {
            f.set(col, b);
        }
    }
    if let Some(v) = body.vat_category {
        let v = v.trim().to_lowercase();
        if !VAT_CATEGORIES.contains(&v.as_str()) {
            return Err(Error::validation(
                "vat_category",
                "`vat_category` must be standard, zero or exempt.",
            ));
        }
        f.set("vat_category", v);
    }
    Ok(f)
}
