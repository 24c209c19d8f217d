//! `/purchase-orders`: orders a branch drafts, a manager approves and the
//! buyer sends to the supplier (see docs/buying.md for the states).

use actix_web::guard::GuardContext;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::buying::orders::{
    self, FromReorderRequest, ListFilter, Move, PurchaseOrder, PurchaseOrderRequest,
};
use domain::error::Problem;
use domain::{input, Action, Error, Result};

use actix_web::{get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(from_reorder)
        .service(create)
        .service(list)
        .service(get)
        .service(replace)
        .service(submit)
        .service(approve)
        .service(reject)
        .service(send)
        .service(close)
        .service(cancel);
}

/// Whether a request's path names an order (a guard of the `{id}`
/// routes): `from-reorder` is its own path, which only takes POST, so any
/// other method there gets the router's 405 rather than a 404 for an id.
fn names_an_order(ctx: &GuardContext) -> bool {
    !ctx.head()
        .uri
        .path()
        .ends_with("/purchase-orders/from-reorder")
}

/// Drafts an order (`status: draft`), numbered `<BRANCH CODE>-PO-<6
/// digits>` from the branch's counter. With `pack_id`, a line's `quantity`
/// counts packs and its `unit_cost` is per pack.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    request_body = PurchaseOrderRequest,
    responses((status = 201, body = PurchaseOrder),
        (status = 400, description = "A field is missing or wrong, or names no supplier, medicine or pack (`validation_failed` naming it)", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<PurchaseOrderRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePurchaseOrders)?;
    let made = orders::create(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(made))
}

/// Drafts an order for a supplier from the branch's reorder suggestions:
/// each low medicine whose last purchase came from that supplier, at its
/// suggested quantity (base units) and the last unit cost paid.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    request_body = FromReorderRequest,
    responses((status = 201, body = PurchaseOrder),
        (status = 400, description = "Nothing to order from this supplier, or a field is wrong (`validation_failed` naming it)", body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/from-reorder")]
pub async fn from_reorder(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<FromReorderRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePurchaseOrders)?;
    let made = orders::from_reorder(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(made))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PurchaseOrderQuery {
    /// One state (any case; empty = all).
    #[param(schema_with = status_schema)]
    pub status: Option<String>,
    /// Only this supplier's orders.
    pub supplier_id: Option<Uuid>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

fn status_schema() -> utoipa::openapi::schema::Schema {
    input::one_of_or_blank_schema(&orders::STATUSES)
}

/// Purchase orders newest first with their lines, 20 a page.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(PurchaseOrderQuery, PageParams),
    responses((status = 200, body = Paged<PurchaseOrder>),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/purchase-orders")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<PurchaseOrderQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadPurchaseOrders)?;
    let page = paging.resolve(orders::PAGE_SIZE)?;
    let filter = ListFilter {
        branch_id: caller.branch_filter(q.branch_id)?,
        supplier_id: q.supplier_id,
        status: input::one_of_or_blank("status", q.status.as_deref(), &orders::STATUSES)?,
    };
    let client = state.pool.get().await?;
    let (items, total) = orders::list(&client, &filter, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One purchase order with its lines.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/purchase-orders/{id}", guard = "names_an_order")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadPurchaseOrders)?;
    let id = path_id(&id, "Purchase order")?;
    let client = state.pool.get().await?;
    let found = orders::get(&client, id)
        .await?
        .filter(|o| caller.can_see_branch(o.branch_id))
        .ok_or_else(|| Error::not_found("Purchase order not found"))?;
    Ok(HttpResponse::Ok().json(found))
}

/// Replaces a draft's header fields and lines (409 naming the state once
/// it left draft).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    request_body = PurchaseOrderRequest,
    responses((status = 200, body = PurchaseOrder),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[put("/purchase-orders/{id}", guard = "names_an_order")]
pub async fn replace(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<PurchaseOrderRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePurchaseOrders)?;
    let id = path_id(&id, "Purchase order")?;
    let changed = orders::replace(&state.pool, &caller.acting(), id, body).await?;
    Ok(HttpResponse::Ok().json(changed))
}

/// One move of an order, after the role check of its action.
async fn moved(
    state: &AppState,
    caller: &Caller,
    raw_id: &str,
    action: Action,
    mv: Move,
) -> Result<HttpResponse> {
    caller.require(action)?;
    let id = path_id(raw_id, "Purchase order")?;
    let order = orders::move_order(&state.pool, &caller.acting(), id, mv).await?;
    Ok(HttpResponse::Ok().json(order))
}

/// `draft` → `submitted`: asks a manager to approve it.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The order is not in draft (the detail names its state)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/{id}/submit")]
pub async fn submit(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    moved(
        &state,
        &caller,
        &id,
        Action::ManagePurchaseOrders,
        Move::Submit,
    )
    .await
}

/// `submitted` → `approved`, by a manager who did not submit it (audited).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The role may not approve, or the caller submitted the order", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The order is not submitted (the detail names its state)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/{id}/approve")]
pub async fn approve(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    moved(
        &state,
        &caller,
        &id,
        Action::ApprovePurchaseOrders,
        Move::Approve,
    )
    .await
}

/// `submitted` → `draft`, by a manager who did not submit it (audited).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The role may not reject, or the caller submitted the order", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The order is not submitted (the detail names its state)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/{id}/reject")]
pub async fn reject(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    moved(
        &state,
        &caller,
        &id,
        Action::ApprovePurchaseOrders,
        Move::Reject,
    )
    .await
}

/// `approved` → `sent`: the order went to the supplier; goods received
/// notes may now fill it.
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The order is not approved (the detail names its state)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/{id}/send")]
pub async fn send(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    moved(
        &state,
        &caller,
        &id,
        Action::ManagePurchaseOrders,
        Move::Send,
    )
    .await
}

/// `partially_received` → `closed`: what is still outstanding is no longer
/// awaited (audited).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The order is not partly received (the detail names its state)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/{id}/close")]
pub async fn close(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    moved(
        &state,
        &caller,
        &id,
        Action::ManagePurchaseOrders,
        Move::Close,
    )
    .await
}

/// `draft`, `submitted`, `approved` or `sent` → `cancelled`, while nothing
/// was delivered against it (audited).
#[utoipa::path(tag = "buying", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = PurchaseOrder),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The order is past its first receipt or already ended (the detail names its state)", body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/purchase-orders/{id}/cancel")]
pub async fn cancel(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    moved(
        &state,
        &caller,
        &id,
        Action::ManagePurchaseOrders,
        Move::Cancel,
    )
    .await
}
