//! `/sales`: making a sale through the branch actor (the same code path as a
//! pushed `sale`/`create`), reading sales, and checking a branch's invoice
//! hash chain.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::auth::{Caller, Signed};
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::printing::receipt::Receipt;
use domain::returns::{self, CreditNoteChain};
use domain::sales::{self, ChainReport, Sale, SaleRequest};
use domain::window::{day_of, DateWindow, Day};
use domain::{Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(create)
        .service(verify_chain)
        .service(receipt)
        .service(get);
}

/// Makes a sale. A retry with the same `client_mutation_id` answers the
/// first sale again (200 with `Idempotent-Replay: true`) and changes nothing.
#[utoipa::path(tag = "sales", security(("bearer" = [])),
    request_body = SaleRequest,
    responses((status = 201, body = Sale), (status = 200, description = "A replay of an earlier request with the same client_mutation_id", body = Sale),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/sales")]
pub async fn create(
    state: web::Data<AppState>,
    signed: Signed,
    Json(body): Json<SaleRequest>,
) -> Result<HttpResponse> {
    // The caller as its token states it; the group writer checks the token
    // with the sale's first statement.
    let caller = signed.claimed();
    let decided = caller.require(Action::Sell).and_then(|()| {
        let branch_id = caller.branch_scope(body.branch_id)?;
        body.validate(branch_id, caller.user_id, caller.role)
    });
    let mut sale = signed.refuse_after_check(&state.pool, decided).await?;
    sale.signer = Some(signed.signer());
    let outcome = state
        .sales
        .submit(&state.actors, sale.branch_id, sale)
        .await?;
    if outcome.replayed {
        return Ok(HttpResponse::Ok()
            .insert_header(("Idempotent-Replay", "true"))
            .json(outcome.sale));
    }
    Ok(HttpResponse::Created().json(outcome.sale))
}

/// One sale with its lines.
#[utoipa::path(tag = "sales", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Sale), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/sales/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Sale")?;
    let client = state.pool.get().await?;
    let sale = sales::get_shown(&client, id)
        .await?
        .filter(|s| caller.can_see_branch(s.branch_id))
        .ok_or_else(|| Error::not_found("Sale not found"))?;
    Ok(HttpResponse::Ok().json(sale))
}

/// The sale's receipt, ready to print: its lines and totals, and the tax
/// authority's FDN, verification code and QR code once the invoice is
/// accepted (`fiscal.pending` and a "Fiscal document pending" line until
/// then).
#[utoipa::path(tag = "sales", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = Receipt), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/sales/{id}/receipt")]
pub async fn receipt(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Sale")?;
    let client = state.pool.get().await?;
    let sale = sales::get_shown(&client, id)
        .await?
        .filter(|s| caller.can_see_branch(s.branch_id))
        .ok_or_else(|| Error::not_found("Sale not found"))?;
    let printed = domain::printing::receipt::of_sale(&client, sale).await?;
    Ok(HttpResponse::Ok().json(printed))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SalesQuery {
    /// First day (`YYYY-MM-DD`, organisation time zone), inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

/// Sales newest first, paged (20 per page by default).
#[utoipa::path(tag = "sales", security(("bearer" = [])),
    params(SalesQuery, PageParams),
    responses((status = 200, body = Paged<Sale>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/sales")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<SalesQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    let (from, until) = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?
        .bounds(&client)
        .await?;
    let filter = sales::ListFilter {
        branch_id,
        from,
        until,
    };
    let (items, total) = sales::list(&client, &filter, page.offset(), page.limit()).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// The invoice chain's check, and the credit note chain's beside it;
/// `status` is `broken` when either is.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChainCheck {
    #[serde(flatten)]
    pub invoices: ChainReport,
    pub credit_notes: CreditNoteChain,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChainQuery {
    /// Admins and auditors name the branch; others check their own.
    pub branch_id: Option<Uuid>,
}

/// Recomputes a branch's invoice and credit note hash chains and reports
/// the first broken link of each.
#[utoipa::path(tag = "sales", security(("bearer" = [])),
    params(ChainQuery),
    responses((status = 200, body = ChainCheck), (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/sales/verify-chain")]
pub async fn verify_chain(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<ChainQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::VerifyInvoiceChain)?;
    let branch_id = caller.branch_scope(q.branch_id)?;
    let client = state.pool.get().await?;
    let mut invoices = sales::verify_chain(&client, branch_id).await?;
    let credit_notes = returns::verify_chain(&client, branch_id).await?;
    if credit_notes.status != "ok" {
        invoices.status = credit_notes.status.clone();
    }
    Ok(HttpResponse::Ok().json(ChainCheck {
        invoices,
        credit_notes,
    }))
}
