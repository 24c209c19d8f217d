//! `/printing`: printers and receipt templates of a branch (admins write
//! them, anyone signed in reads their own branch's) and the print-job log.
//! Printing itself happens in the till's browser; the service keeps the
//! configuration and a log of what was printed.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::printing::writes::{self, PrintJobWrite, PrinterWrite, TemplateWrite};
use domain::printing::{self, Kind, PrintJob, Printer, ReceiptTemplate};
use domain::{Action, Result};

use actix_web::{delete, get, post, put};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(list_printers)
        .service(create_printer)
        .service(update_printer)
        .service(delete_printer)
        .service(list_templates)
        .service(create_template)
        .service(update_template)
        .service(delete_template)
        .service(list_jobs)
        .service(log_job);
}

/// `branch_id` of a list: admins any branch, others only their own (403).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchQuery {
    /// Default: the caller's branch. Only admins may name another.
    pub branch_id: Option<Uuid>,
}

// ---------------------------------------------------------------- printers

#[derive(Debug, Serialize, ToSchema)]
pub struct PrinterList {
    pub items: Vec<Printer>,
    pub total: i64,
}

/// A branch's printers, the default first, then by name.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(BranchQuery),
    responses((status = 200, body = PrinterList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/printing/printers")]
pub async fn list_printers(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<BranchQuery>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(q.branch_id)?;
    let client = state.pool.get().await?;
    let items = printing::printers(&client, branch_id).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(PrinterList { items, total }))
}

/// Adds a printer to a branch.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    request_body = PrinterWrite,
    responses((status = 201, body = Printer), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/printing/printers")]
pub async fn create_printer(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<PrinterWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePrinting)?;
    let printer = writes::create_printer(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(printer))
}

/// Changes the fields sent of a printer.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = PrinterWrite,
    responses((status = 200, body = Printer), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[put("/printing/printers/{id}")]
pub async fn update_printer(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<PrinterWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePrinting)?;
    let id = path_id(&id, "Printer")?;
    let printer = writes::update_printer(&state.pool, id, body).await?;
    Ok(HttpResponse::Ok().json(printer))
}

/// Soft-deletes a printer; the branch's default is refused (400) until
/// another printer is made default.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/printing/printers/{id}")]
pub async fn delete_printer(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    delete(state, caller, id, Kind::Printer).await
}

async fn delete(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    kind: Kind,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePrinting)?;
    let what = match kind {
        Kind::Printer => "Printer",
        Kind::Template => "Receipt template",
    };
    let id = path_id(&id, what)?;
    writes::remove(&state.pool, kind, id).await?;
    Ok(HttpResponse::NoContent().finish())
}

// ------------------------------------------------------- receipt templates

#[derive(Debug, Serialize, ToSchema)]
pub struct TemplateList {
    pub items: Vec<ReceiptTemplate>,
    pub total: i64,
}

/// A branch's receipt templates, the default first, then by name.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(BranchQuery),
    responses((status = 200, body = TemplateList), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/printing/receipt-templates")]
pub async fn list_templates(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<BranchQuery>,
) -> Result<HttpResponse> {
    let branch_id = caller.branch_scope(q.branch_id)?;
    let client = state.pool.get().await?;
    let items = printing::templates(&client, branch_id).await?;
    let total = items.len() as i64;
    Ok(HttpResponse::Ok().json(TemplateList { items, total }))
}

/// Adds a receipt template to a branch.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    request_body = TemplateWrite,
    responses((status = 201, body = ReceiptTemplate), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/printing/receipt-templates")]
pub async fn create_template(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<TemplateWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePrinting)?;
    let template = writes::create_template(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(template))
}

/// Changes the fields sent of a receipt template.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(("id" = String, Path)), request_body = TemplateWrite,
    responses((status = 200, body = ReceiptTemplate), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[put("/printing/receipt-templates/{id}")]
pub async fn update_template(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
    Json(body): Json<TemplateWrite>,
) -> Result<HttpResponse> {
    caller.require(Action::ManagePrinting)?;
    let id = path_id(&id, "Receipt template")?;
    let template = writes::update_template(&state.pool, id, body).await?;
    Ok(HttpResponse::Ok().json(template))
}

/// Soft-deletes a template; the branch's default is refused (400) until
/// another template is made default.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(("id" = String, Path)),
    responses((status = 204), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json")))]
#[delete("/printing/receipt-templates/{id}")]
pub async fn delete_template(
    state: web::Data<AppState>,
    caller: Caller,
    id: web::Path<String>,
) -> Result<HttpResponse> {
    delete(state, caller, id, Kind::Template).await
}

// -------------------------------------------------------------- print jobs

/// Logs a print job. Rows are never edited: a reprint of a failed job is a
/// new row with status `reprint` and the same `reference_id`.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    request_body = PrintJobWrite,
    responses((status = 201, body = PrintJob), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[post("/printing/print-jobs")]
pub async fn log_job(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<PrintJobWrite>,
) -> Result<HttpResponse> {
    let job = writes::log_job(&state.pool, &caller.acting(), body).await?;
    Ok(HttpResponse::Created().json(job))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobQuery {
    /// Admins: one branch (default all). Others: their own branch only.
    pub branch_id: Option<Uuid>,
    /// Only the jobs of this sale or document.
    pub reference_id: Option<String>,
}

/// The print-job log, newest first, 20 per page.
#[utoipa::path(tag = "printing", security(("bearer" = [])),
    params(JobQuery, PageParams),
    responses((status = 200, body = Paged<PrintJob>), (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json")))]
#[get("/printing/print-jobs")]
pub async fn list_jobs(
    state: web::Data<AppState>,
    caller: Caller,
    Query(q): Query<JobQuery>,
    Query(paging): Query<PageParams>,
) -> Result<HttpResponse> {
    let page = paging.resolve(20)?;
    let branch_id = caller.branch_filter(q.branch_id)?;
    let reference = q
        .reference_id
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty());
    let client = state.pool.get().await?;
    let (items, total) = printing::list_jobs(&client, branch_id, reference, page).await?;
    Ok(HttpResponse::Ok().json(Paged::new(items, total, page)))
}
