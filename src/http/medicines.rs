//! `/medicines`: the organisation-wide catalogue. Anyone signed in reads;
//! admins, inventory managers and branch managers write.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::{Caller, Signed};
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::medicines::committed;
use domain::medicines::{self, Medicine, MedicineView, MedicineWrite};
use domain::packs;
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
pub struct MedicineQuery {
    /// Part of the name or generic name, or the exact barcode.
    pub search: Option<String>,
    /// Category slug.
    pub category: Option<String>,
    /// Admins: whose stock `stock_quantity` shows (default: the whole chain).
    pub branch_id: Option<Uuid>,
}

/// The catalogue with live stock, 20 per page, filtered by `search` and `category`.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(MedicineQuery, PageParams),
    responses((status = 200, body = Paged<MedicineView>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/medicines")]
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
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path), MedicineQuery),
    responses((status = 200, body = MedicineView), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/medicines/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    signed: Signed,
    id: web::Path<String>,
    Query(q): Query<MedicineQuery>,
) -> Result<HttpResponse> {
    let id = signed
        .refuse_after_check(&state.pool, path_id(&id, "Medicine"))
        .await?;
    // Whose stock the read shows: a branch caller's own branch; an admin the
    // branch it names, or the whole chain.
    let scope = signed
        .refuse_after_check(&state.pool, signed.claimed().branch_filter(q.branch_id))
        .await?;
    let client = state.pool.get().await?;
    // One statement: the caller check, and the read only if it passes.
    let (token, medicine) =
        packs::medicine_with_packs_for(&client, signed.signer(), id, scope).await?;
    signed.decide(token)?;
    let medicine = medicine.ok_or_else(|| Error::not_found("Medicine not found"))?;
    Ok(HttpResponse::Ok().json(medicine))
}

/// Adds a medicine to the catalogue.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    request_body = MedicineWrite,
    responses((status = 201, body = MedicineView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/medicines")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<MedicineWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCatalogue)?;
    let medicine = committed::create(&state.pool, body).await?;
    Ok(HttpResponse::Created().json(medicine.view()))
}

/// Changes the fields sent of a medicine; a price change is audited.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = MedicineWrite,
    responses((status = 200, body = MedicineView), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[put("/medicines/{id}")]
pub async fn update(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<MedicineWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCatalogue)?;
    let id = path_id(&id, "Medicine")?;
    let medicine = committed::edit(&state.pool, id, body, caller.user_id).await?;
    Ok(HttpResponse::Ok().json(medicine.view()))
}

/// Soft-deletes a medicine: it leaves the catalogue and is no longer sold.
#[utoipa::path(tag = "medicines", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/medicines/{id}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::WriteCatalogue)?;
    let id = path_id(&id, "Medicine")?;
    committed::remove(&state.pool, id).await?;
    Ok(HttpResponse::NoContent().finish())
}
