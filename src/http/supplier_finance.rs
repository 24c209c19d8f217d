//! `/supplier-finance`: batch quarantine, reorder suggestions, supplier
//! invoices and their payments.

use actix_web::{web, HttpResponse};
use chrono::{NaiveDate, Utc};
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, LockType, Query};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, Query as QueryParams};
use crate::state::AppState;
use domain::audit;
use domain::error::Problem;
use domain::input;
use domain::stock::{self, Batch};
use domain::suppliers::invoices::{
    self, NewInvoice, PaySupplierInvoice, SupplierInvoice, SupplierPaymentReceipt,
};
use domain::sync::changes::{self, Op};
use domain::{db, Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(quarantine)
        .service(reorder_suggestions)
        .service(list_invoices)
        .service(create_invoice)
        .service(pay_invoice);
}

pub const REGULATOR_STATUSES: [&str; 3] = ["quarantined", "active", "recalled"];
const SUGGESTION_LIMIT: i64 = 100;

#[derive(Debug, Deserialize, ToSchema)]
pub struct QuarantineRequest {
    /// `quarantined`, `active` or `recalled`.
    pub status: String,
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
    // Exactly one of the spec's values: no case folding, no trimming.
    let status = body.status;
    if !REGULATOR_STATUSES.contains(&status.as_str()) {
        return Err(Error::validation(
            "status",
            "`status` must be `quarantined`, `active` or `recalled`.",
        ));
    }
    let not_found = || Error::not_found("Batch not found");
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    // Other branches' batches read as missing to a non-admin.
    let own = (!caller.any_branch()).then_some(caller.branch_id);
    let current = Query::select()
        .column("regulator_status")
        .from("batches")
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(own, |q, b| {
            q.and_where(Expr::col("branch_id").eq(b));
        })
        .lock(LockType::Update)
        .to_owned();
    let before: String = db::fetch_opt(&tx, &current)
        .await?
        .ok_or_else(not_found)?
        .get(0);
    let rev = changes::allocate(&tx).await?;
    let update = Query::update()
        .table("batches")
        .value("regulator_status", status.clone())
        .value("rev", rev)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(id))
        .returning(Query::returning().columns(stock::COLUMNS))
        .to_owned();
    let batch = db::fetch_opt(&tx, &update)
        .await?
        .map(|r| Batch::from_row(&r))
        .ok_or_else(not_found)?;
    stock::emit(&tx, rev, &batch, Op::Update).await?;
    audit::write_for(
        &tx,
        Some(batch.branch_id),
        audit::Entry {
            actor_id: Some(caller.user_id),
            action: "batch.regulator_status",
            entity_type: "batch",
            entity_id: id.to_string(),
            before: Some(serde_json::json!({ "regulator_status": before })),
            after: Some(serde_json::json!({ "regulator_status": status })),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(batch))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReorderQuery {
    /// Admins only: one branch's stock (default: the whole chain).
    pub branch_id: Option<Uuid>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReorderSuggestion {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    pub name: String,
    /// Units on hand in the scope (branch or chain).
    pub stock_quantity: i64,
    pub low_stock_threshold: i32,
    /// `2 × low_stock_threshold − stock_quantity`.
    pub suggested_qty: i64,
    /// Supplier of the most recently received batch naming one.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub supplier_id: Option<Uuid>,
    pub supplier_name: Option<String>,
    pub lead_time_days: Option<i32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReorderList {
    /// Lowest stock first, at most 100.
    pub items: Vec<ReorderSuggestion>,
    /// Rows returned.
    pub total: i64,
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
    if let (Some(b), true) = (branch, q.branch_id.is_some()) {
        domain::branches::get(&client, b)
            .await?
            .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    }
    // `branch` NULL means the whole chain.
    let sql = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH on_hand AS (
               SELECT medicine_id, sum(qty_remaining)::bigint AS qty
               FROM batches
               WHERE NOT is_deleted AND ({branch}::uuid IS NULL OR branch_id = {branch}::uuid)
               GROUP BY medicine_id
           ), last_supplier AS (
               SELECT DISTINCT ON (medicine_id) medicine_id, supplier_id
               FROM batches
               WHERE NOT is_deleted AND supplier_id IS NOT NULL
                 AND ({branch}::uuid IS NULL OR branch_id = {branch}::uuid)
               ORDER BY medicine_id, created_at DESC, id DESC
           )
           SELECT m.id, m.name, coalesce(h.qty, 0)::bigint AS stock_quantity,
                  m.low_stock_threshold, s.id AS supplier_id, s.name AS supplier_name,
                  s.lead_time_days
           FROM medicines m
           LEFT JOIN on_hand h ON h.medicine_id = m.id
           LEFT JOIN last_supplier ls ON ls.medicine_id = m.id
           LEFT JOIN suppliers s ON s.id = ls.supplier_id
           WHERE m.is_active AND NOT m.is_deleted
             AND coalesce(h.qty, 0) <= m.low_stock_threshold
           ORDER BY stock_quantity, m.name, m.id
           LIMIT {SUGGESTION_LIMIT}"#
    );
    let rows = db::raw_all(&client, &sql.sql, sql.values).await?;
    let items: Vec<ReorderSuggestion> = rows
        .iter()
        .map(|r| {
            let stock_quantity: i64 = r.get("stock_quantity");
            let low_stock_threshold: i32 = r.get("low_stock_threshold");
            ReorderSuggestion {
                medicine_id: r.get("id"),
                name: r.get("name"),
                stock_quantity,
                low_stock_threshold,
                suggested_qty: 2 * i64::from(low_stock_threshold) - stock_quantity,
                supplier_id: r.get("supplier_id"),
                supplier_name: r.get("supplier_name"),
                lead_time_days: r.get("lead_time_days"),
            }
        })
        .collect();
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(ReorderList { items, total }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct InvoiceRequest {
    #[schema(value_type = String, format = Uuid)]
    pub supplier_id: Option<Uuid>,
    /// More than 0; a number or a decimal string.
    #[schema(value_type = f64, minimum = 0)]
    pub total_amount: Option<Decimal>,
    /// Default the caller's branch; only admins may name another.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    pub invoice_no: Option<String>,
    /// `YYYY-MM-DD`.
    #[schema(example = "2026-12-31")]
    pub due_date: Option<String>,
    pub notes: Option<String>,
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
    let supplier_id = body
        .supplier_id
        .ok_or_else(|| Error::validation("supplier_id", "The field `supplier_id` is required."))?;
    let total_amount = body.total_amount.ok_or_else(|| {
        Error::validation("total_amount", "The field `total_amount` is required.")
    })?;
    let total_amount = input::positive_amount("total_amount", total_amount)?;
    let branch_id = caller.branch_scope(body.branch_id)?;
    let due_date = match body.due_date.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(d) => Some(NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| {
            Error::validation("due_date", "`due_date` must be a date as YYYY-MM-DD.")
        })?),
    };
    let invoice_no = input::text("invoice_no", body.invoice_no.as_deref().unwrap_or(""), 100)?;
    let notes = input::multiline("notes", body.notes.as_deref().unwrap_or(""), 1000)?;
    let client = state.pool.get().await?;
    if body.branch_id.is_some() {
        domain::branches::get(&client, branch_id)
            .await?
            .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    }
    let new = NewInvoice {
        supplier_id,
        branch_id,
        invoice_no,
        total_amount,
        due_date,
        notes,
        created_by: caller.user_id,
    };
    let invoice = invoices::insert(&client, new)
        .await?
        .ok_or_else(|| Error::validation("supplier_id", "`supplier_id` names no supplier."))?;
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
    let status = match q.status.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(s) => {
            let s = s.to_lowercase();
            if !invoices::STATUSES.contains(&s.as_str()) {
                return Err(Error::validation(
                    "status",
                    "`status` must be `unpaid`, `partial` or `paid`.",
                ));
            }
            Some(s)
        }
    };
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

#[derive(Debug, Deserialize, ToSchema)]
pub struct SupplierPaymentRequest {
    /// More than 0 and at most the outstanding balance; a number or a decimal string.
    #[schema(value_type = f64)]
    pub amount: Option<Decimal>,
    /// `cash` (default), `bank_transfer`, `mobile_money`, `cheque` or `card`.
    pub method: Option<String>,
    pub reference: Option<String>,
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
    let amount = body
        .amount
        .ok_or_else(|| Error::validation("amount", "The field `amount` is required."))?;
    let amount = input::positive_amount("amount", amount)?;
    let method = match body.method.as_deref().map(str::trim) {
        None | Some("") => "cash".to_owned(),
        Some(m) => {
            let m = m.to_lowercase();
            if !invoices::METHODS.contains(&m.as_str()) {
                return Err(Error::validation(
                    "method",
                    "`method` must be `cash`, `bank_transfer`, `mobile_money`, `cheque` or `card`.",
                ));
            }
            m
        }
    };
    let reference = input::text("reference", body.reference.as_deref().unwrap_or(""), 200)?;
    let not_found = || Error::not_found("Supplier invoice not found");
    // Other branches' invoices read as missing to a non-admin.
    let invoice = {
        let client = state.pool.get().await?;
        invoices::get(&client, invoice_id)
            .await?
            .filter(|i| caller.can_see_branch(i.branch_id))
            .ok_or_else(not_found)?
    };
    let payment = PaySupplierInvoice {
        invoice_id,
        amount,
        method,
        reference,
        user_id: caller.user_id,
    };
    let receipt = state.actors.branch(invoice.branch_id, payment).await?;
    Ok(HttpResponse::Created().json(receipt))
}
