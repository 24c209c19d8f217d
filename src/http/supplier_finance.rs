//! `/supplier-finance`: batch quarantine, reorder suggestions, supplier
//! invoices and their payments.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, Query as QueryParams};
use crate::state::AppState;
use domain::error::Problem;
use domain::stock::quarantine::{set_status, QuarantineRequest};
use domain::stock::reorder::{self, ReorderList};
use domain::stock::Batch;
use domain::suppliers::invoices::{
    self, InvoiceRequest, SupplierInvoice, SupplierPaymentReceipt, SupplierPaymentRequest,
};
use domain::suppliers::matching::{self, ReleaseRequest};
use domain::{Action, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(quarantine)
        .service(reorder_suggestions)
        .service(list_invoices)
        .service(create_invoice)
        .service(pay_invoice)
        .service(release_invoice);
}

/// Sets a batch's regulator status. Quarantined and recalled batches are
/// never sold or transferred.
#[utoipa::path(tag = "supplier-finance",
    security(("bearer" = [])), params(("id" = String, Path, description = "Batch id")),
    request_body = QuarantineRequest,
    responses((status = 200, body = Batch), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[post("/supplier-finance/batches/{id}/quarantine")]
pub async fn quarantine(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<QuarantineRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::QuarantineBatches)?;
    let id = path_id(&id, "Batch")?;
    let status = body.validate()?;
    let batch = set_status(&state.pool, &caller.acting(), id, status).await?;
    Ok(HttpResponse::Ok().json(batch))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReorderQuery {
    /// Admins only: one branch's stock (default: the whole chain).
    pub branch_id: Option<Uuid>,
}

/// Active medicines at or below their low-stock threshold, lowest stock first.
#[utoipa::path(tag = "supplier-finance",
    security(("bearer" = [])), params(ReorderQuery),
    responses((status = 200, body = ReorderList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/supplier-finance/reorder-suggestions")]
pub async fn reorder_suggestions(
    state: web::Data<AppState>,
    caller: Caller,
    QueryParams(q): QueryParams<ReorderQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadReorderSuggestions)?;
    let branch = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    let list = reorder::suggestions(&client, branch, q.branch_id.is_some()).await?;
    Ok(HttpResponse::Ok().json(list))
}

/// Records a supplier invoice as `unpaid`.
#[utoipa::path(tag = "supplier-finance",
    security(("bearer" = [])), request_body = InvoiceRequest,
    responses((status = 201, body = SupplierInvoice), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/supplier-finance/invoices")]
pub async fn create_invoice(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<InvoiceRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageSupplierInvoices)?;
    let invoice = invoices::record(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(invoice))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InvoiceQuery {
    /// Only this supplier's invoices.
    pub supplier_id: Option<Uuid>,
    /// Admins only: one branch (default: the whole chain). Others see their own branch.
    pub branch_id: Option<Uuid>,
    /// `unpaid`, `partial` or `paid` (any case; empty = all).
    #[param(
        pattern = "^\\s*([Uu][Nn][Pp][Aa][Ii][Dd]|[Pp][Aa][Rr][Tt][Ii][Aa][Ll]|[Pp][Aa][Ii][Dd])?\\s*$"
    )]
    pub status: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InvoiceList {
    /// Newest first, at most 50.
    pub items: Vec<SupplierInvoice>,
    /// Rows returned.
    pub total: i64,
}

/// Supplier invoices, newest first, at most 50.
#[utoipa::path(tag = "supplier-finance",
    security(("bearer" = [])), params(InvoiceQuery),
    responses((status = 200, body = InvoiceList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/supplier-finance/invoices")]
pub async fn list_invoices(
    state: web::Data<AppState>,
    caller: Caller,
    QueryParams(q): QueryParams<InvoiceQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageSupplierInvoices)?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let status = invoices::status_filter(q.status.as_deref())?;
    let client = state.pool.get().await?;
    let filter = invoices::ListFilter {
        branch_id,
        supplier_id: q.supplier_id,
        status,
    };
    let items = invoices::list(&client, filter).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(InvoiceList { items, total }))
}

/// Pays (part of) a supplier invoice: `unpaid` → `partial` → `paid`.
#[utoipa::path(tag = "supplier-finance",
    security(("bearer" = [])), params(("id" = String, Path, description = "Supplier invoice id")),
    request_body = SupplierPaymentRequest,
    responses((status = 201, body = SupplierPaymentReceipt), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/supplier-finance/invoices/{id}/payments")]
pub async fn pay_invoice(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<SupplierPaymentRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ManageSupplierInvoices)?;
    let invoice_id = path_id(&id, "Supplier invoice")?;
    let receipt = invoices::pay(
        &state.pool,
        &state.actors,
        &caller.acting(),
        invoice_id,
        body,
    )
    .await?;
    Ok(HttpResponse::Created().json(receipt))
}

/// Releases a supplier invoice on hold so it can be paid as billed: a
/// branch manager or admin other than its creator, with a reason (audited).
#[utoipa::path(tag = "supplier-finance",
    security(("bearer" = [])), params(("id" = String, Path, description = "Invoice id")),
    request_body = ReleaseRequest,
    responses((status = 200, body = SupplierInvoice),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not a branch manager or admin, or the invoice's creator", body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The invoice is not on hold", body = Problem, content_type = "application/problem+json")))]
#[post("/supplier-finance/invoices/{id}/release")]
pub async fn release_invoice(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<ReleaseRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReleaseSupplierInvoices)?;
    let id = path_id(&id, "Supplier invoice")?;
    let invoice = matching::release(&state.pool, &caller.acting(), id, body).await?;
    Ok(HttpResponse::Ok().json(invoice))
}
