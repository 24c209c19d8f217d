//! Returns and credit notes: `POST /sales/{id}/returns` through the sale
//! branch's actor, the reads of returns, and the fiscal payload of a
//! credit note. Another branch's sale or return reads as 404 for everyone
//! but an admin.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::printing::receipt::Receipt;
use domain::returns::{self, CreditNote, CreditNoteFiscalPayload, ListFilter, ReturnRequest};
use domain::window::{day_of, DateWindow, Day};
use domain::{Action, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(create)
        .service(for_sale)
        .service(list)
        .service(get)
        .service(receipt)
        .service(fiscal_preview);
}

/// The sale's branch, when the caller may see the sale (404 otherwise).
async fn visible_sale(state: &AppState, caller: &Caller, raw_id: &str) -> Result<(Uuid, Uuid)> {
    let sale_id = path_id(raw_id, "Sale")?;
    let client = state.pool.get().await?;
    let branch_id = returns::sale_branch(&client, sale_id)
        .await?
        .filter(|b| caller.can_see_branch(*b))
        .ok_or_else(|| Error::not_found("Sale not found"))?;
    Ok((sale_id, branch_id))
}

/// Takes back lines of a sale. An admin's, branch manager's or
/// pharmacist's return is issued at once (201, `status: issued`, with its
/// credit note number); anyone else's waits for a manager (202, `status:
/// pending_approval`, with the `approval_id` of kind `refund` to decide).
/// A retry with the same `client_mutation_id` answers the same return
/// (200 with `Idempotent-Replay: true`) and changes nothing.
#[utoipa::path(tag = "returns", security(("bearer" = [])),
    params(("id" = String, Path, description = "The sale")),
    request_body = ReturnRequest,
    responses((status = 201, description = "Issued: the credit note", body = CreditNote),
        (status = 202, description = "Waiting for an approval of kind `refund`", body = CreditNote),
        (status = 200, description = "A replay of an earlier request with the same client_mutation_id", body = CreditNote),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json")))]
#[post("/sales/{id}/returns")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<ReturnRequest>,
) -> Result<HttpResponse> {
    caller.require(Action::ReturnSale)?;
    let (sale_id, branch_id) = visible_sale(&state, &caller, &id).await?;
    let r = body.validate(sale_id, branch_id, caller.user_id, caller.role)?;
    let outcome = state
        .actors
        .branch(branch_id, returns::CreateReturn(r))
        .await?;
    if outcome.replayed {
        return Ok(HttpResponse::Ok()
            .insert_header(("Idempotent-Replay", "true"))
            .json(outcome.note));
    }
    if outcome.note.status == "issued" {
        return Ok(HttpResponse::Created().json(outcome.note));
    }
    Ok(HttpResponse::Accepted().json(outcome.note))
}

/// A list that is not paged: every row, and how many.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreditNoteList {
    pub items: Vec<CreditNote>,
    pub total: i64,
}

/// Every return of a sale (issued, pending and rejected), newest first.
#[utoipa::path(tag = "returns", security(("bearer" = [])),
    params(("id" = String, Path, description = "The sale")),
    responses((status = 200, body = CreditNoteList),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/sales/{id}/returns")]
pub async fn for_sale(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let (sale_id, _) = visible_sale(&state, &caller, &id).await?;
    let client = state.pool.get().await?;
    let filter = ListFilter {
        sale_id: Some(sale_id),
        ..Default::default()
    };
    let (items, total) = returns::list(&client, &filter, None).await?;
    Ok(HttpResponse::Ok().json(CreditNoteList { items, total }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReturnsQuery {
    /// First day a return was filed (`YYYY-MM-DD`, organisation time zone), inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
    /// `pending_approval`, `issued` or `rejected` (default all).
    #[param(pattern = "^(pending_approval|issued|rejected)?$")]
    pub status: Option<String>,
}

/// Returns newest first, paged (20 per page by default).
#[utoipa::path(tag = "returns", security(("bearer" = [])),
    params(ReturnsQuery, PageParams),
    responses((status = 200, body = Paged<CreditNote>),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/returns")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<ReturnsQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let status = match q.status.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(s @ ("pending_approval" | "issued" | "rejected")) => Some(s.to_owned()),
        Some(_) => {
            return Err(Error::validation(
                "status",
                "`status` must be pending_approval, issued or rejected.",
            ));
        }
    };
    let client = state.pool.get().await?;
    let (from, until) = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?
        .bounds(&client)
        .await?;
    let filter = ListFilter {
        branch_id,
        sale_id: None,
        status,
        from,
        until,
    };
    let (items, total) = returns::list(&client, &filter, Some(page)).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One return with its lines: the credit note once issued.
#[utoipa::path(tag = "returns", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = CreditNote),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/returns/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Return")?;
    let client = state.pool.get().await?;
    let note = returns::get_shown(&client, id)
        .await?
        .filter(|n| caller.can_see_branch(n.branch_id))
        .ok_or_else(|| Error::not_found("Return not found"))?;
    Ok(HttpResponse::Ok().json(note))
}

/// An issued credit note ready to print: its lines and totals, the
/// original invoice number, and the tax authority's reference once the
/// credit note is accepted (`fiscal.pending` and a "Fiscal document
/// pending" line until then). A return not issued is 404.
#[utoipa::path(tag = "returns", security(("bearer" = [])),
    params(("id" = String, Path, description = "The credit note (return) id")),
    responses((status = 200, body = Receipt),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/returns/{id}/receipt")]
pub async fn receipt(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let id = path_id(&id, "Credit note")?;
    let client = state.pool.get().await?;
    let note = returns::get_shown(&client, id)
        .await?
        .filter(|n| caller.can_see_branch(n.branch_id) && n.status == "issued")
        .ok_or_else(|| Error::not_found("Credit note not found"))?;
    let printed = domain::printing::receipt::of_credit_note(&client, note).await?;
    Ok(HttpResponse::Ok().json(printed))
}

/// The fiscal payload of an issued credit note, read-only: the sale's
/// shape with `document_type: credit_note`, the credit note's number and
/// `cn_seq` as the seller's, and the original invoice's number and icv.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    params(("id" = String, Path, description = "The credit note (return) id")),
    responses((status = 200, body = CreditNoteFiscalPayload),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/fiscal-preview/credit-notes/{id}")]
pub async fn fiscal_preview(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    let not_found = || Error::not_found("Credit note not found");
    let id: Uuid = id.parse().map_err(|_| not_found())?;
    let client = state.pool.get().await?;
    let note = returns::get(&client, id)
        .await?
        .filter(|n| caller.can_see_branch(n.branch_id) && n.status == "issued")
        .ok_or_else(not_found)?;
    let payload = returns::fiscal_payload(&client, note).await?;
    Ok(HttpResponse::Ok().json(payload))
}
