//! The fiscal outbox as people see it: the documents page, one document
//! with every attempt, the re-send of a rejected document, and the summary
//! per branch (`docs/fiscal.md`).

use actix_web::{get, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::fiscal::read::{
    self, BranchSummary, DocumentFilter, FiscalDocument, FiscalDocumentDetail,
};
use domain::window::{day_of, DateWindow, Day};
use domain::{Action, Error, Result};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list)
        .service(summary)
        .service(get)
        .service(retry);
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DocumentQuery {
    /// `waiting`, `pending`, `submitting`, `accepted`, `retrying` or `rejected`.
    pub status: Option<String>,
    /// `T109` invoice, `T110` credit note, `T130` goods, `T131` stock.
    pub kind: Option<String>,
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
    /// First day queued (`YYYY-MM-DD`, organisation time zone), inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub from_date: Option<Day>,
    /// Last day, inclusive.
    #[param(value_type = Option<String>, format = Date)]
    pub to_date: Option<Day>,
}

/// Fiscal documents newest first, paged (20 per page by default).
#[utoipa::path(tag = "fiscal", security(("bearer" = [])),
    params(DocumentQuery, PageParams),
    responses((status = 200, body = Paged<FiscalDocument>),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/fiscal/documents")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<DocumentQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadFiscalDocuments)?;
    let page = paging.resolve(20)?;
    read::check_filter(q.status.as_deref(), q.kind.as_deref())?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    let (from, until) = DateWindow::optional(day_of(q.from_date), day_of(q.to_date))?
        .bounds(&client)
        .await?;
    let filter = DocumentFilter {
        status: q.status,
        kind: q.kind,
        branch_id,
        from,
        until,
    };
    let (items, total) =
        read::list(&client, &filter, page.offset() as i64, page.limit() as i64).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// One fiscal document with its frozen payload and every attempt (time,
/// outcome, the authority's return code and message).
#[utoipa::path(tag = "fiscal", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 200, body = FiscalDocumentDetail),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/fiscal/documents/{id}")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadFiscalDocuments)?;
    let id = path_id(&id, "Fiscal document")?;
    let client = state.pool.get().await?;
    let doc = read::get(&client, id)
        .await?
        .filter(|d| visible(&caller, d.document.branch_id))
        .ok_or_else(|| Error::not_found("Fiscal document not found"))?;
    Ok(HttpResponse::Ok().json(doc))
}

/// Goods registrations belong to no branch: every reader sees them.
fn visible(caller: &Caller, branch_id: Option<Uuid>) -> bool {
    branch_id.is_none_or(|b| caller.can_see_branch(b))
}

/// The new revision queued by a retry.
#[derive(Debug, Serialize, ToSchema)]
pub struct Retried {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// `waiting` until what it depends on is accepted, then `pending`.
    pub status: String,
}

/// Re-sends a rejected document after its source was corrected: a new
/// revision, its payload built again from the source. 409 when the
/// document was accepted or is still on its way.
#[utoipa::path(tag = "fiscal", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 202, body = Retried),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json")))]
#[post("/fiscal/documents/{id}/retry")]
pub async fn retry(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    caller.require(Action::RetryFiscalDocuments)?;
    let id = path_id(&id, "Fiscal document")?;
    let mut client = state.pool.get().await?;
    let made = read::retry_visible(&mut client, id, |b| visible(&caller, b)).await?;
    Ok(HttpResponse::Accepted().json(Retried {
        id: made,
        status: "waiting".to_owned(),
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SummaryQuery {
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
}

/// The fiscal summary.
#[derive(Debug, Serialize, ToSchema)]
pub struct FiscalSummary {
    /// One row per branch (and one for goods registrations, of no branch).
    pub branches: Vec<BranchSummary>,
}

/// Counts by status and the age of the oldest unfinished document, per
/// branch.
#[utoipa::path(tag = "fiscal", security(("bearer" = [])),
    params(SummaryQuery),
    responses((status = 200, body = FiscalSummary),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/fiscal/summary")]
pub async fn summary(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<SummaryQuery>,
) -> Result<HttpResponse> {
    caller.require(Action::ReadFiscalDocuments)?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let client = state.pool.get().await?;
    let branches = read::summary(&client, branch_id).await?;
    Ok(HttpResponse::Ok().json(FiscalSummary { branches }))
}
