//! `/printing`: printers and receipt templates of a branch (admins write
//! them, anyone signed in reads their own branch's) and the print-job log.
//! Printing itself happens in the till's browser; the service keeps the
//! configuration and a log of what was printed.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::extract::{path_id, Json, PageParams, Paged, Query};
use crate::state::AppState;
use domain::error::Problem;
use domain::input::{self, Flag};
use domain::printing::{self, Fields, Kind, NewJob, PrintJob, Printer, ReceiptTemplate};
use domain::{branches, settings};
use domain::{Action, Error, Result};

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

const PRINTER_KINDS: &[&str] = &[
    "receipt_80mm",
    "receipt_58mm",
    "a4_invoice",
    "label",
    "report",
];
const PAPERS: &[&str] = &["mm80", "mm58", "a4"];
const DOCUMENT_TYPES: &[&str] = &["receipt", "invoice_a4", "credit_note", "label", "report"];
const JOB_STATUSES: &[&str] = &["queued", "completed", "failed", "reprint"];

/// A value from a closed list; 400 naming the field and the allowed values.
fn one_of(field: &str, value: &str, allowed: &[&str]) -> Result<String> {
    let v = value.trim();
    if allowed.contains(&v) {
        return Ok(v.to_owned());
    }
    Err(Error::validation(
        field,
        format!("`{field}` must be one of {}.", allowed.join(", ")),
    ))
}

/// A copy count, 1..20.
fn copies(field: &str, n: i64) -> Result<i32> {
    match i32::try_from(n) {
        Ok(c @ 1..=20) => Ok(c),
        _ => Err(Error::validation(
            field,
            format!("`{field}` must be a whole number from 1 to 20."),
        )),
    }
}

/// `true` when the field was sent at all, whatever its value (even null).
fn sent<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d)?;
    Ok(true)
}

/// The branch a write names: the caller's own by default; an admin may name
/// any live branch.
async fn write_branch(state: &AppState, caller: &Caller, named: Option<Uuid>) -> Result<Uuid> {
    let branch_id = caller.branch_scope(named)?;
    let client = state.pool.get().await?;
    branches::get(&client, branch_id)
        .await?
        .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?;
    Ok(branch_id)
}

/// `branch_id` of a list: admins any branch, others only their own (403).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BranchQuery {
    /// Default: the caller's branch. Only admins may name another.
    pub branch_id: Option<Uuid>,
}

// ---------------------------------------------------------------- printers

/// Create (`name` required) or update (only the fields to change) body.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PrinterWrite {
    /// Default: the caller's branch. Cannot change on update.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    pub name: Option<String>,
    /// `receipt_80mm` (default), `receipt_58mm`, `a4_invoice`, `label`, `report`.
    pub kind: Option<String>,
    /// 1..20 (default: the settings' `default_copies`).
    #[schema(minimum = 1, maximum = 20)]
    pub copies: Option<i64>,
    /// The branch's first printer is the default whatever is sent.
    #[schema(value_type = Option<bool>)]
    pub is_default: Option<Flag>,
    #[schema(value_type = Option<bool>)]
    pub auto_print: Option<Flag>,
    #[schema(value_type = Option<bool>)]
    pub kick_drawer: Option<Flag>,
    /// Only `browser`.
    pub connection: Option<String>,
    /// Rejected if sent (400).
    #[serde(default, deserialize_with = "sent")]
    #[schema(ignore)]
    pub device_path: bool,
}

fn printer_fields(body: &PrinterWrite) -> Result<Fields> {
    if body.device_path {
        return Err(Error::validation(
            "device_path",
            "`device_path` is not accepted: printers print through the browser.",
        ));
    }
    let mut f: Fields = Vec::new();
    if let Some(v) = &body.name {
        f.push(("name", input::required_text("name", v, 100)?.into()));
    }
    if let Some(v) = &body.kind {
        f.push(("kind", one_of("kind", v, PRINTER_KINDS)?.into()));
    }
    if let Some(n) = body.copies {
        f.push(("copies", copies("copies", n)?.into()));
    }
    if let Some(Flag(v)) = body.auto_print {
        f.push(("auto_print", v.into()));
    }
    if let Some(Flag(v)) = body.kick_drawer {
        f.push(("kick_drawer", v.into()));
    }
    if let Some(v) = &body.connection {
        f.push(("connection", one_of("connection", v, &["browser"])?.into()));
    }
    Ok(f)
}

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
    let rows = printing::list(&client, Kind::Printer, branch_id).await?;
    let items: Vec<Printer> = rows.iter().map(Printer::from_row).collect();
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
    let mut fields = printer_fields(&body)?;
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    let branch_id = write_branch(&state, &caller, body.branch_id).await?;
    let mut client = state.pool.get().await?;
    if body.copies.is_none() {
        fields.push(("copies", settings::default_copies(&client).await?.into()));
    }
    fields.push(("created_by", caller.user_id.into()));
    let wants_default = body.is_default.is_some_and(|Flag(d)| d);
    let tx = client.transaction().await?;
    let row = printing::create(&tx, Kind::Printer, branch_id, fields, wants_default).await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(Printer::from_row(&row)))
}

/// `branch_id` on an update may only repeat the row's own branch.
async fn same_branch(state: &AppState, kind: Kind, id: Uuid, named: Option<Uuid>) -> Result<()> {
    let Some(named) = named else {
        return Ok(());
    };
    let client = state.pool.get().await?;
    let row = printing::get(&client, kind, id).await?;
    match row.map(|r| r.get::<_, Uuid>("branch_id")) {
        Some(b) if b != named => Err(Error::validation(
            "branch_id",
            format!("A {} cannot move to another branch.", kind.noun()),
        )),
        _ => Ok(()),
    }
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
    let fields = printer_fields(&body)?;
    same_branch(&state, Kind::Printer, id, body.branch_id).await?;
    let wants_default = body.is_default.map(|Flag(d)| d);
    if fields.is_empty() && wants_default.is_none() {
        return Err(Error::bad_request("No fields to update"));
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let row = printing::update(&tx, Kind::Printer, id, fields, wants_default).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(Printer::from_row(&row)))
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
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    printing::delete(&tx, kind, id).await?;
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}

// ------------------------------------------------------- receipt templates

/// Create (`name` required) or update (only the fields to change) body.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct TemplateWrite {
    /// Default: the caller's branch. Cannot change on update.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    pub name: Option<String>,
    /// `mm80` (default), `mm58` or `a4`.
    pub paper: Option<String>,
    pub header_text: Option<String>,
    pub footer_text: Option<String>,
    /// Default true.
    #[schema(value_type = Option<bool>)]
    pub show_logo: Option<Flag>,
    /// Default true.
    #[schema(value_type = Option<bool>)]
    pub show_vat: Option<Flag>,
    /// Default false.
    #[schema(value_type = Option<bool>)]
    pub show_batch: Option<Flag>,
    /// The branch's first template is the default whatever is sent.
    #[schema(value_type = Option<bool>)]
    pub is_default: Option<Flag>,
}

fn template_fields(body: &TemplateWrite) -> Result<Fields> {
    let mut f: Fields = Vec::new();
    if let Some(v) = &body.name {
        f.push(("name", input::required_text("name", v, 100)?.into()));
    }
    if let Some(v) = &body.paper {
        f.push(("paper", one_of("paper", v, PAPERS)?.into()));
    }
    for (col, v) in [
        ("header_text", &body.header_text),
        ("footer_text", &body.footer_text),
    ] {
        if let Some(v) = v {
            f.push((col, input::multiline(col, v, 2000)?.into()));
        }
    }
    for (col, v) in [
        ("show_logo", body.show_logo),
        ("show_vat", body.show_vat),
        ("show_batch", body.show_batch),
    ] {
        if let Some(Flag(v)) = v {
            f.push((col, v.into()));
        }
    }
    Ok(f)
}

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
    let rows = printing::list(&client, Kind::Template, branch_id).await?;
    let items: Vec<ReceiptTemplate> = rows.iter().map(ReceiptTemplate::from_row).collect();
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
    let mut fields = template_fields(&body)?;
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    let branch_id = write_branch(&state, &caller, body.branch_id).await?;
    fields.push(("created_by", caller.user_id.into()));
    let wants_default = body.is_default.is_some_and(|Flag(d)| d);
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let row = printing::create(&tx, Kind::Template, branch_id, fields, wants_default).await?;
    tx.commit().await?;
    Ok(HttpResponse::Created().json(ReceiptTemplate::from_row(&row)))
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
    let fields = template_fields(&body)?;
    same_branch(&state, Kind::Template, id, body.branch_id).await?;
    let wants_default = body.is_default.map(|Flag(d)| d);
    if fields.is_empty() && wants_default.is_none() {
        return Err(Error::bad_request("No fields to update"));
    }
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let row = printing::update(&tx, Kind::Template, id, fields, wants_default).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(ReceiptTemplate::from_row(&row)))
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

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PrintJobWrite {
    /// Default: the caller's branch. Only admins may name another.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// The sale or document printed. Required unless `reprint_of` is given.
    pub reference_id: Option<String>,
    /// `receipt` (default), `invoice_a4`, `credit_note`, `label`, `report`.
    pub document_type: Option<String>,
    /// 1..20 (default: the settings' `default_copies`).
    #[schema(minimum = 1, maximum = 20)]
    pub copies: Option<i64>,
    /// `queued` (default), `completed`, `failed`, `reprint` (legacy
    /// `printed` is stored as `completed`).
    pub status: Option<String>,
    /// A job of the same branch this one reprints: the status becomes
    /// `reprint` and `reference_id` defaults to that job's.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub reprint_of: Option<Uuid>,
}

/// The job `reprint_of` names, which must be of `branch_id`.
async fn original(state: &AppState, branch_id: Uuid, id: Option<Uuid>) -> Result<Option<PrintJob>> {
    let Some(id) = id else {
        return Ok(None);
    };
    let client = state.pool.get().await?;
    let job = printing::get_job(&client, id)
        .await?
        .filter(|j| j.branch_id == branch_id)
        .ok_or_else(|| {
            Error::validation(
                "reprint_of",
                "`reprint_of` names no print job of this branch.",
            )
        })?;
    Ok(Some(job))
}

fn job_status(body: &PrintJobWrite, reprint: bool) -> Result<String> {
    let status = match body.status.as_deref().map(str::trim) {
        None => return Ok(if reprint { "reprint" } else { "queued" }.to_owned()),
        // Older tills send the legacy spelling; store the current one.
        Some("printed") => "completed".to_owned(),
        Some(s) => one_of("status", s, JOB_STATUSES)?,
    };
    if reprint && status != "reprint" {
        return Err(Error::validation(
            "status",
            "`status` must be `reprint` when `reprint_of` is given.",
        ));
    }
    Ok(status)
}

fn job_reference(body: &PrintJobWrite, original: Option<&PrintJob>) -> Result<String> {
    match (body.reference_id.as_deref(), original) {
        (None, Some(o)) => Ok(o.reference_id.clone()),
        (Some(r), Some(o)) if r.trim() != o.reference_id => Err(Error::validation(
            "reference_id",
            "A reprint keeps the `reference_id` of the job it reprints.",
        )),
        (Some(r), _) => input::required_text("reference_id", r, 100),
        (None, None) => Err(Error::validation(
            "reference_id",
            "The field `reference_id` is required.",
        )),
    }
}

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
    let branch_id = write_branch(&state, &caller, body.branch_id).await?;
    let original = original(&state, branch_id, body.reprint_of).await?;
    let status = job_status(&body, original.is_some())?;
    let reference_id = job_reference(&body, original.as_ref())?;
    let document_type = match body.document_type.as_deref() {
        Some(d) => one_of("document_type", d, DOCUMENT_TYPES)?,
        None => original
            .as_ref()
            .map_or("receipt".to_owned(), |o| o.document_type.clone()),
    };
    let client = state.pool.get().await?;
    let copies = match body.copies {
        Some(n) => copies("copies", n)?,
        None => settings::default_copies(&client).await?,
    };
    let job = NewJob {
        branch_id,
        reference_id,
        document_type,
        copies,
        status,
        reprint_of: original.map(|o| o.id),
        created_by: caller.user_id,
    };
    let job = printing::log_job(&client, job).await?;
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
