//! Printers, receipt templates and the print-job log.
//!
//! Printers and templates share one rule: a branch that has any has exactly
//! one default. Every write of either takes the branch row lock first (so two
//! writers of one branch take turns, across server processes), then locks
//! the branch's rows it decides on. The partial unique index
//! `*_one_default_per_branch` stops two defaults even if a writer forgot.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Iden, LockType, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::patch::Patch;
use crate::{db, wire, Error, Result};
use PrintColumn as Col;

use crate::paging::{self, Page};

pub mod receipt;
pub mod writes;

/// The columns a printer or receipt template write sets (the two tables
/// share the list columns; each write names only its table's own).
#[derive(Iden, Clone, Copy)]
pub enum PrintColumn {
    Id,
    BranchId,
    IsDefault,
    Name,
    Kind,
    Copies,
    AutoPrint,
    KickDrawer,
    Connection,
    Paper,
    HeaderText,
    FooterText,
    ShowLogo,
    ShowVat,
    ShowBatch,
    CreatedBy,
    UpdatedAt,
}

/// Column values of a write, already validated.
pub type Fields = Patch<PrintColumn>;

/// The two per-branch lists with a default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Printer,
    Template,
}

impl Kind {
    fn table(self) -> &'static str {
        match self {
            Kind::Printer => "printers",
            Kind::Template => "receipt_templates",
        }
    }

    fn columns(self) -> &'static [&'static str] {
        match self {
            Kind::Printer => &PRINTER_COLUMNS,
            Kind::Template => &TEMPLATE_COLUMNS,
        }
    }

    /// For sentences: "printer", "receipt template".
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Printer => "printer",
            Kind::Template => "receipt template",
        }
    }

    fn not_found(self) -> Error {
        match self {
            Kind::Printer => Error::not_found("Printer not found"),
            Kind::Template => Error::not_found("Receipt template not found"),
        }
    }
}

const PRINTER_COLUMNS: [&str; 11] = [
    "id",
    "branch_id",
    "name",
    "kind",
    "copies",
    "is_default",
    "auto_print",
    "kick_drawer",
    "connection",
    "created_at",
    "updated_at",
];

/// A printer as every printer route answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Printer {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub name: String,
    /// `receipt_80mm`, `receipt_58mm`, `a4_invoice`, `label` or `report`.
    pub kind: String,
    pub copies: i32,
    pub is_default: bool,
    pub auto_print: bool,
    pub kick_drawer: bool,
    /// Always `browser`.
    pub connection: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

impl Printer {
    pub fn from_row(r: &Row) -> Self {
        Printer {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            name: r.get("name"),
            kind: r.get("kind"),
            copies: r.get("copies"),
            is_default: r.get("is_default"),
            auto_print: r.get("auto_print"),
            kick_drawer: r.get("kick_drawer"),
            connection: r.get("connection"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

const TEMPLATE_COLUMNS: [&str; 12] = [
    "id",
    "branch_id",
    "name",
    "paper",
    "header_text",
    "footer_text",
    "show_logo",
    "show_vat",
    "show_batch",
    "is_default",
    "created_at",
    "updated_at",
];

/// A receipt template as every template route answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReceiptTemplate {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub name: String,
    /// `mm80`, `mm58` or `a4`.
    pub paper: String,
    pub header_text: String,
    pub footer_text: String,
    pub show_logo: bool,
    pub show_vat: bool,
    pub show_batch: bool,
    pub is_default: bool,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
}

impl ReceiptTemplate {
    pub fn from_row(r: &Row) -> Self {
        ReceiptTemplate {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            name: r.get("name"),
            paper: r.get("paper"),
            header_text: r.get("header_text"),
            footer_text: r.get("footer_text"),
            show_logo: r.get("show_logo"),
            show_vat: r.get("show_vat"),
            show_batch: r.get("show_batch"),
            is_default: r.get("is_default"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
        }
    }
}

fn select(kind: Kind) -> SelectStatement {
    Query::select()
        .columns(kind.columns().iter().copied())
        .from(kind.table())
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned()
}

/// A branch's live printers, the default first, then by name.
pub async fn printers<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<Vec<Printer>> {
    let rows = list(c, Kind::Printer, branch_id).await?;
    Ok(rows.iter().map(Printer::from_row).collect())
}

/// A branch's live receipt templates, the default first, then by name.
pub async fn templates<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
) -> Result<Vec<ReceiptTemplate>> {
    let rows = list(c, Kind::Template, branch_id).await?;
    Ok(rows.iter().map(ReceiptTemplate::from_row).collect())
}

/// A branch's live rows, the default first, then by name.
async fn list<C: GenericClient + Sync>(c: &C, kind: Kind, branch_id: Uuid) -> Result<Vec<Row>> {
    let q = select(kind)
        .and_where(Expr::col("branch_id").eq(branch_id))
        .order_by("is_default", Order::Desc)
        .order_by_expr(Expr::cust("lower(name)"), Order::Asc)
        .order_by("id", Order::Asc)
        .to_owned();
    db::fetch_all(c, &q).await
}

pub(crate) async fn get<C: GenericClient + Sync>(
    c: &C,
    kind: Kind,
    id: Uuid,
) -> Result<Option<Row>> {
    let q = select(kind).and_where(Expr::col("id").eq(id)).to_owned();
    db::fetch_opt(c, &q).await
}

/// Takes the branch's config lock: its row, `FOR NO KEY UPDATE`, which
/// serialises printer and template writes of the branch without blocking
/// sales (their foreign-key checks take only `KEY SHARE`). `false` when the
/// branch does not exist.
async fn lock_branch<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<bool> {
    let q = Query::select()
        .column("id")
        .from(Table::Branches)
        .and_where(Expr::col("id").eq(branch_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .lock(LockType::NoKeyUpdate)
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.is_some())
}

/// Locks the branch's live rows; returns `(id, is_default)` of each.
async fn lock_rows<C: GenericClient + Sync>(
    tx: &C,
    kind: Kind,
    branch_id: Uuid,
) -> Result<Vec<(Uuid, bool)>> {
    let q = Query::select()
        .columns(["id", "is_default"])
        .from(kind.table())
        .and_where(Expr::col("branch_id").eq(branch_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .order_by("id", Order::Asc)
        .lock(LockType::Update)
        .to_owned();
    let rows = db::fetch_all(tx, &q).await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Clears the branch's default; runs before the new default is set, so the
/// unique index never sees two.
async fn clear_default<C: GenericClient + Sync>(tx: &C, kind: Kind, branch_id: Uuid) -> Result<()> {
    let q = Query::update()
        .table(kind.table())
        .values([
            ("is_default", Expr::val(false)),
            ("updated_at", Expr::val(Utc::now())),
        ])
        .and_where(Expr::col("branch_id").eq(branch_id))
        .and_where(Expr::col("is_default").eq(true))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(())
}

/// Inserts a row for `branch_id`. The branch's first row becomes its
/// default whatever was asked; a new default replaces the old one.
pub async fn create<C: GenericClient + Sync>(
    tx: &C,
    kind: Kind,
    branch_id: Uuid,
    mut fields: Fields,
    wants_default: bool,
) -> Result<Row> {
    if !lock_branch(tx, branch_id).await? {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    let rows = lock_rows(tx, kind, branch_id).await?;
    let is_default = wants_default || rows.is_empty();
    if is_default {
        clear_default(tx, kind, branch_id).await?;
    }
    fields.set(Col::Id, Uuid::now_v7());
    fields.set(Col::BranchId, branch_id);
    fields.set(Col::IsDefault, is_default);
    let (cols, vals): (Vec<_>, Vec<_>) = fields.into_pairs().into_iter().unzip();
    let q = Query::insert()
        .into_table(kind.table())
        .columns(cols)
        .values_panic(vals.into_iter().map(Into::into))
        .returning(Query::returning().columns(kind.columns().iter().copied()))
        .to_owned();
    db::fetch_one(tx, &q).await
}

/// The row `id` under the branch lock, with its branch's rows locked:
/// `(branch_id, is_default)`. 404 when it is gone.
async fn lock_one<C: GenericClient + Sync>(tx: &C, kind: Kind, id: Uuid) -> Result<(Uuid, bool)> {
    let branch_id: Uuid = get(tx, kind, id)
        .await?
        .ok_or_else(|| kind.not_found())?
        .get("branch_id");
    lock_branch(tx, branch_id).await?;
    // Read again under the lock: another writer may have changed it.
    let rows = lock_rows(tx, kind, branch_id).await?;
    let (_, is_default) = rows
        .into_iter()
        .find(|(row_id, _)| *row_id == id)
        .ok_or_else(|| kind.not_found())?;
    Ok((branch_id, is_default))
}

/// Updates a live row. `wants_default: Some(true)` makes it the branch's
/// default; `Some(false)` on the default is refused (the branch would have
/// none: make another one default instead).
pub async fn update<C: GenericClient + Sync>(
    tx: &C,
    kind: Kind,
    id: Uuid,
    mut fields: Fields,
    wants_default: Option<bool>,
) -> Result<Row> {
    let (branch_id, is_default) = lock_one(tx, kind, id).await?;
    match wants_default {
        Some(true) if !is_default => {
            clear_default(tx, kind, branch_id).await?;
            fields.set(Col::IsDefault, true);
        }
        Some(false) if is_default => {
            return Err(Error::validation("is_default", last_default(kind)))
        }
        _ => {}
    }
    fields.set(Col::UpdatedAt, Utc::now());
    let q = Query::update()
        .table(kind.table())
        .values(
            fields
                .into_pairs()
                .into_iter()
                .map(|(c, v)| (c, Expr::val(v))),
        )
        .and_where(Expr::col("id").eq(id))
        .returning(Query::returning().columns(kind.columns().iter().copied()))
        .to_owned();
    db::fetch_one(tx, &q).await
}

/// Soft-deletes a row that is not its branch's default.
pub async fn delete<C: GenericClient + Sync>(tx: &C, kind: Kind, id: Uuid) -> Result<()> {
    let (_, is_default) = lock_one(tx, kind, id).await?;
    if is_default {
        return Err(Error::bad_request(last_default(kind)));
    }
    let q = Query::update()
        .table(kind.table())
        .values([
            ("is_deleted", Expr::val(true)),
            ("updated_at", Expr::val(Utc::now())),
        ])
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    db::execute(tx, &q).await?;
    Ok(())
}

/// Why a change that would leave the branch without a default is refused.
fn last_default(kind: Kind) -> String {
    let noun = kind.noun();
    format!(
        "This is the branch's default {noun}; make another {noun} the default first, \
         so the branch always keeps one."
    )
}

/// Print-job columns as read.
const JOB_COLUMNS: [&str; 9] = [
    "id",
    "branch_id",
    "reference_id",
    "document_type",
    "copies",
    "status",
    "reprint_of",
    "created_by",
    "created_at",
];

/// One entry of the print-job log.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PrintJob {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    pub reference_id: String,
    /// `receipt`, `invoice_a4`, `credit_note`, `label` or `report`.
    pub document_type: String,
    pub copies: i32,
    /// `queued`, `completed`, `failed` or `reprint` (a stored legacy
    /// `printed` reads as `completed`).
    pub status: String,
    /// The job this one reprints, when the till said so.
    #[schema(value_type = Option<String>)]
    pub reprint_of: Option<Uuid>,
    #[schema(value_type = Option<String>)]
    pub created_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

impl PrintJob {
    fn from_row(r: &Row) -> Self {
        let status: String = r.get("status");
        PrintJob {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            reference_id: r.get("reference_id"),
            document_type: r.get("document_type"),
            copies: r.get("copies"),
            // The legacy spelling is read as the current one (spec, Versioning).
            status: if status == "printed" {
                "completed".to_owned()
            } else {
                status
            },
            reprint_of: r.get("reprint_of"),
            created_by: r.get("created_by"),
            created_at: r.get("created_at"),
        }
    }
}

pub struct NewJob {
    pub branch_id: Uuid,
    pub reference_id: String,
    pub document_type: String,
    pub copies: i32,
    pub status: String,
    pub reprint_of: Option<Uuid>,
    pub created_by: Uuid,
}

/// Appends a job; rows are never edited afterwards.
pub async fn log_job<C: GenericClient + Sync>(c: &C, j: NewJob) -> Result<PrintJob> {
    let q = Query::insert()
        .into_table(Table::PrintJobs)
        .columns([
            "id",
            "branch_id",
            "reference_id",
            "document_type",
            "copies",
            "status",
            "reprint_of",
            "created_by",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            j.branch_id.into(),
            j.reference_id.into(),
            j.document_type.into(),
            j.copies.into(),
            j.status.into(),
            j.reprint_of.into(),
            j.created_by.into(),
        ])
        .returning(Query::returning().columns(JOB_COLUMNS))
        .to_owned();
    Ok(PrintJob::from_row(&db::fetch_one(c, &q).await?))
}

pub async fn get_job<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<PrintJob>> {
    let q = Query::select()
        .columns(JOB_COLUMNS)
        .from(Table::PrintJobs)
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| PrintJob::from_row(&r)))
}

/// Jobs newest first; `branch_id: None` is every branch.
pub async fn list_jobs<C: GenericClient + Sync>(
    c: &C,
    branch_id: Option<Uuid>,
    reference_id: Option<&str>,
    page: Page,
) -> Result<(Vec<PrintJob>, i64)> {
    let mut base = Query::select().from(Table::PrintJobs).to_owned();
    if let Some(b) = branch_id {
        base.and_where(Expr::col("branch_id").eq(b));
    }
    if let Some(r) = reference_id {
        base.and_where(Expr::col("reference_id").eq(r));
    }
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(JOB_COLUMNS)
            .order_by("created_at", Order::Desc)
            .order_by("id", Order::Desc);
    })
    .await?;
    let items = rows.iter().map(PrintJob::from_row).collect();
    Ok((items, total))
}
