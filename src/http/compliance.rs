//! /compliance: the books an inspector reads.
//!
//! Every book is readable by any signed-in user, scoped to the caller's
//! branch (an admin sees every branch, or the one `branch_id` names), and
//! paged with 50 rows by default. The prescription book and the classified
//! drugs register also export as CSV (`Accept: text/csv` or `?format=csv`),
//! every row of the window in one file. The books and exports read from the
//! read replica while it is within its lag bound; the fiscal preview of a
//! sale just made reads the primary.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::csv_export;
use crate::http::extract::{PageParams, Paged, Query};
use crate::state::AppState;
use domain::books::{self, ClassifiedBookRow, FiscalPayload, PrescriptionBookRow, Scope};
use domain::error::Problem;
use domain::sync::devices::{self, RegisterRow};
use domain::window::{DateWindow, MAX_WINDOW_DAYS};
use domain::{Error, Result};

/// Default page size of every compliance book (the spec's Limits table).
pub const BOOK_PAGE_SIZE: i64 = 50;

use actix_web::get;
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(device_register)
        .service(prescription_book)
        .service(classified_drugs_book)
        .service(fiscal_preview);
}

/// The branch filter every book takes.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchFilter {
    /// Admins: only this branch. Others may name only their own branch (else 403).
    #[param(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
}

/// The device register: every till ever registered (revoked ones too),
/// newest first, each with its branch's name. An empty list means none.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    params(BranchFilter, PageParams),
    responses((status = 200, body = Paged<RegisterRow>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/devices")]
pub async fn device_register(
    state: web::Data<AppState>,
    caller: Caller,
    Query(filter): Query<BranchFilter>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(BOOK_PAGE_SIZE)?;
    let branch = caller.branch_filter(filter.branch_id)?;
    let client = books::connect(&state.reads()).await?;
    let (items, total) = devices::register(&client, branch, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}

/// Filters of the two books.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BookQuery {
    /// Admins: only this branch. Others may name only their own branch (else 403).
    #[param(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// First day (`YYYY-MM-DD`, organisation time zone), inclusive.
    #[param(schema_with = domain::window::day_or_blank)]
    pub from_date: Option<String>,
    /// Last day (`YYYY-MM-DD`), inclusive.
    #[param(schema_with = domain::window::day_or_blank)]
    pub to_date: Option<String>,
    /// `csv` exports every row of the window as CSV (as does `Accept: text/csv`);
    /// an export's window is at most 366 days (`to_date` default today,
    /// `from_date` default 365 days before it).
    #[param(value_type = Option<String>, pattern = "^\\s*(json|csv)?\\s*$")]
    pub format: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PrescriptionBookPage {
    pub items: Vec<PrescriptionBookRow>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
    /// Keep these records 2 years for inspection.
    pub retention_note: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ClassifiedBookPage {
    pub items: Vec<ClassifiedBookRow>,
    pub total: i64,
    pub page: i64,
    pub page_size: i64,
    /// The statutory record of classes A/B/C group II.
    pub retention_note: String,
}

/// The book's scope and whether CSV was asked for.
pub(crate) async fn scope(
    state: &AppState,
    caller: &Caller,
    req: &HttpRequest,
    q: &BookQuery,
) -> Result<(Scope, bool)> {
    let window = DateWindow::parse(q.from_date.as_deref(), q.to_date.as_deref())?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let csv = csv_wanted(req, q.format.as_deref())?;
    let client = books::connect(&state.reads()).await?;
    // A page is bounded by its size; an export is every row of the window,
    // so its window is closed and at most `MAX_WINDOW_DAYS` long.
    let bounds = if csv {
        let w = window.or_last_days(&client, MAX_WINDOW_DAYS).await?;
        (Some(w.start), Some(w.end))
    } else {
        window.bounds(&client).await?
    };
    Ok((Scope { branch_id, bounds }, csv))
}

/// Whether a CSV answer was asked for: `format=csv`, or `Accept: text/csv`
/// without a `format`; 400 for another format than json or csv.
pub(crate) fn csv_wanted(req: &HttpRequest, format: Option<&str>) -> Result<bool> {
    match format.map(str::trim) {
        None | Some("") | Some("json") => Ok(wants_csv(req)),
        Some("csv") => Ok(true),
        Some(_) => Err(Error::validation("format", "`format` must be json or csv.")),
    }
}

fn wants_csv(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("text/csv"))
}

/// Rows as a CSV download: a header row from the field names (also when
/// there are no rows), one line each, formulas neutralised
/// (`csv_export::to_csv`).
pub(crate) fn csv_response<T: Serialize + Default>(name: &str, rows: &[T]) -> Result<HttpResponse> {
    let body = csv_export::to_csv(rows)?;
    Ok(HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{name}.csv\""),
        ))
        .body(body))
}

/// The prescription book: every live prescription of the window, newest
/// first, with its line count. Deleted prescriptions never appear.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    params(BookQuery, PageParams),
    responses((status = 200, content((PrescriptionBookPage = "application/json"), (String = "text/csv"))),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/prescription-book")]
pub async fn prescription_book(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    Query(q): Query<BookQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(BOOK_PAGE_SIZE)?;
    let (scope, csv) = scope(&state, &caller, &req, &q).await?;
    let client = books::connect(&state.reads()).await?;
    if csv {
        let (rows, _) = books::prescription_book(&client, scope, None).await?;
        return csv_response("prescription-book", &rows);
    }
    let paging = Some((page.offset(), page.limit()));
    let (items, total) = books::prescription_book(&client, scope, paging).await?;
    Ok(HttpResponse::Ok().json(PrescriptionBookPage {
        items,
        total,
        page: page.page,
        page_size: page.page_size,
        retention_note: books::PRESCRIPTION_BOOK_NOTE.to_owned(),
    }))
}

/// The classified-drugs register: every dispensing of a controlled
/// medicine in the window, newest first.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    params(BookQuery, PageParams),
    responses((status = 200, content((ClassifiedBookPage = "application/json"), (String = "text/csv"))),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/classified-drugs-book")]
pub async fn classified_drugs_book(
    state: web::Data<AppState>,
    caller: Caller,
    req: HttpRequest,
    Query(q): Query<BookQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(BOOK_PAGE_SIZE)?;
    let (scope, csv) = scope(&state, &caller, &req, &q).await?;
    let client = books::connect(&state.reads()).await?;
    if csv {
        let (rows, _) = books::classified_book(&client, scope, None).await?;
        return csv_response("classified-drugs-book", &rows);
    }
    let paging = Some((page.offset(), page.limit()));
    let (items, total) = books::classified_book(&client, scope, paging).await?;
    Ok(HttpResponse::Ok().json(ClassifiedBookPage {
        items,
        total,
        page: page.page,
        page_size: page.page_size,
        retention_note: books::CLASSIFIED_BOOK_NOTE.to_owned(),
    }))
}

/// The fiscal payload of a sale, read-only: what would be submitted to the
/// national fiscal system.
#[utoipa::path(tag = "compliance", security(("bearer" = [])),
    params(("sale_id" = String, Path)),
    responses((status = 200, body = FiscalPayload),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[get("/compliance/fiscal-preview/{sale_id}")]
pub async fn fiscal_preview(
    state: web::Data<AppState>,
    caller: Caller,
    sale_id: web::Path<String>,
) -> Result<HttpResponse> {
    let not_found = || Error::not_found("Sale not found");
    let id: Uuid = sale_id.parse().map_err(|_| not_found())?;
    let client = state.pool.get().await?;
    let sale = domain::sales::get(&client, id)
        .await?
        .filter(|s| caller.can_see_branch(s.branch_id))
        .ok_or_else(not_found)?;
    let payload = books::fiscal_payload(&client, sale).await?;
    Ok(HttpResponse::Ok().json(payload))
}
