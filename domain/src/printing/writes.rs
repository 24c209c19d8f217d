//! The printing configuration's writes (printers and receipt templates,
//! their bodies and rules) and the print-job log's entries.

use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;
use uuid::Uuid;

use super::PrintColumn as Col;
use super::ReceiptTemplate;
use super::{create, delete, get, get_job, update, Fields, Kind, NewJob, PrintJob, Printer};
use crate::db::Pool;
use crate::input::{self, Flag};
use crate::{branches, settings, Acting, Error, Result};
use sea_query::Iden;

/// How a printer is reached: the browser prints for the till.
pub const PRINTER_CONNECTIONS: &[&str] = &["browser"];
pub const PRINTER_KINDS: &[&str] = &[
    "receipt_80mm",
    "receipt_58mm",
    "a4_invoice",
    "label",
    "report",
];
/// The paper a receipt template is laid out for.
pub const PAPERS: &[&str] = &["mm80", "mm58", "a4"];
/// Longest printer or receipt template name, in characters.
pub const MAX_NAME: usize = 100;
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
async fn write_branch(pool: &Pool, acting: &Acting, named: Option<Uuid>) -> Result<Uuid> {
    let branch_id = acting.branch_scope(named)?;
    let client = pool.get().await?;
    branches::named(&client, branch_id).await?;
    Ok(branch_id)
}

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
    let mut f = Fields::new();
    if let Some(v) = &body.name {
        f.set(Col::Name, input::required_text("name", v, MAX_NAME)?);
    }
    if let Some(v) = &body.kind {
        f.set(Col::Kind, one_of("kind", v, PRINTER_KINDS)?);
    }
    if let Some(n) = body.copies {
        f.set(Col::Copies, copies("copies", n)?);
    }
    if let Some(Flag(v)) = body.auto_print {
        f.set(Col::AutoPrint, v);
    }
    if let Some(Flag(v)) = body.kick_drawer {
        f.set(Col::KickDrawer, v);
    }
    if let Some(v) = &body.connection {
        f.set(
            Col::Connection,
            one_of("connection", v, PRINTER_CONNECTIONS)?,
        );
    }
    Ok(f)
}

/// `branch_id` on an update may only repeat the row's own branch.
async fn same_branch(pool: &Pool, kind: Kind, id: Uuid, named: Option<Uuid>) -> Result<()> {
    let Some(named) = named else {
        return Ok(());
    };
    let client = pool.get().await?;
    let row = get(&client, kind, id).await?;
    match row.map(|r| r.get::<_, Uuid>("branch_id")) {
        Some(b) if b != named => Err(Error::validation(
            "branch_id",
            format!("A {} cannot move to another branch.", kind.noun()),
        )),
        _ => Ok(()),
    }
}

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
    let mut f = Fields::new();
    if let Some(v) = &body.name {
        f.set(Col::Name, input::required_text("name", v, MAX_NAME)?);
    }
    if let Some(v) = &body.paper {
        f.set(Col::Paper, one_of("paper", v, PAPERS)?);
    }
    for (col, v) in [
        (Col::HeaderText, &body.header_text),
        (Col::FooterText, &body.footer_text),
    ] {
        if let Some(v) = v {
            f.set(col, input::multiline(col.unquoted(), v, input::max::NOTES)?);
        }
    }
    for (col, v) in [
        (Col::ShowLogo, body.show_logo),
        (Col::ShowVat, body.show_vat),
        (Col::ShowBatch, body.show_batch),
    ] {
        if let Some(Flag(v)) = v {
            f.set(col, v);
        }
    }
    Ok(f)
}

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
async fn original(pool: &Pool, branch_id: Uuid, id: Option<Uuid>) -> Result<Option<PrintJob>> {
    let Some(id) = id else {
        return Ok(None);
    };
    let client = pool.get().await?;
    let job = get_job(&client, id)
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
        (Some(r), _) => input::required_text("reference_id", r, input::max::LABEL),
        (None, None) => Err(Error::validation(
            "reference_id",
            "The field `reference_id` is required.",
        )),
    }
}

/// Adds a printer to a branch (the caller's own by default; an admin may
/// name any live branch); `name` is required, `copies` defaults to the
/// settings' `default_copies`, and the branch's first printer is its
/// default.
pub async fn create_printer(pool: &Pool, acting: &Acting, body: PrinterWrite) -> Result<Printer> {
    let mut fields = printer_fields(&body)?;
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    let branch_id = write_branch(pool, acting, body.branch_id).await?;
    let mut client = pool.get().await?;
    if body.copies.is_none() {
        fields.set(Col::Copies, settings::default_copies(&client).await?);
    }
    fields.set(Col::CreatedBy, acting.user_id);
    let wants_default = body.is_default.is_some_and(|Flag(d)| d);
    let tx = client.transaction().await?;
    let row = create(&tx, Kind::Printer, branch_id, fields, wants_default).await?;
    crate::db::commit(tx).await?;
    Ok(Printer::from_row(&row))
}

/// Changes the fields sent of printer `id`.
pub async fn update_printer(pool: &Pool, id: Uuid, body: PrinterWrite) -> Result<Printer> {
    let fields = printer_fields(&body)?;
    same_branch(pool, Kind::Printer, id, body.branch_id).await?;
    let wants_default = body.is_default.map(|Flag(d)| d);
    if fields.is_empty() && wants_default.is_none() {
        return Err(Error::bad_request("No fields to update"));
    }
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let row = update(&tx, Kind::Printer, id, fields, wants_default).await?;
    crate::db::commit(tx).await?;
    Ok(Printer::from_row(&row))
}

/// Soft-deletes a printer or template; the branch's default is refused
/// (400) until another is made default.
pub async fn remove(pool: &Pool, kind: Kind, id: Uuid) -> Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    delete(&tx, kind, id).await?;
    crate::db::commit(tx).await?;
    Ok(())
}

/// Adds a receipt template to a branch (as a printer: `name` required, the
/// branch's first template is its default).
pub async fn create_template(
    pool: &Pool,
    acting: &Acting,
    body: TemplateWrite,
) -> Result<ReceiptTemplate> {
    let mut fields = template_fields(&body)?;
    if body.name.is_none() {
        return Err(Error::validation("name", "The field `name` is required."));
    }
    let branch_id = write_branch(pool, acting, body.branch_id).await?;
    fields.set(Col::CreatedBy, acting.user_id);
    let wants_default = body.is_default.is_some_and(|Flag(d)| d);
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let row = create(&tx, Kind::Template, branch_id, fields, wants_default).await?;
    crate::db::commit(tx).await?;
    Ok(ReceiptTemplate::from_row(&row))
}

/// Changes the fields sent of receipt template `id`.
pub async fn update_template(
    pool: &Pool,
    id: Uuid,
    body: TemplateWrite,
) -> Result<ReceiptTemplate> {
    let fields = template_fields(&body)?;
    same_branch(pool, Kind::Template, id, body.branch_id).await?;
    let wants_default = body.is_default.map(|Flag(d)| d);
    if fields.is_empty() && wants_default.is_none() {
        return Err(Error::bad_request("No fields to update"));
    }
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let row = update(&tx, Kind::Template, id, fields, wants_default).await?;
    crate::db::commit(tx).await?;
    Ok(ReceiptTemplate::from_row(&row))
}

/// Logs a print job. Rows are never edited: a reprint of a failed job is a
/// new row with status `reprint` and the same `reference_id`.
pub async fn log_job(pool: &Pool, acting: &Acting, body: PrintJobWrite) -> Result<PrintJob> {
    let branch_id = write_branch(pool, acting, body.branch_id).await?;
    let original = original(pool, branch_id, body.reprint_of).await?;
    let status = job_status(&body, original.is_some())?;
    let reference_id = job_reference(&body, original.as_ref())?;
    let document_type = match body.document_type.as_deref() {
        Some(d) => one_of("document_type", d, DOCUMENT_TYPES)?,
        None => original
            .as_ref()
            .map_or("receipt".to_owned(), |o| o.document_type.clone()),
    };
    let client = pool.get().await?;
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
        created_by: acting.user_id,
    };
    let job = super::log_job(&client, job).await?;
    Ok(job)
}
