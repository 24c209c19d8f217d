//! Will-call pickups: orders made up and waiting at the counter. A pickup
//! is `ready` until it is `picked_up` or `cancelled`; each move is one
//! conditional update (`WHERE status = 'ready'`).

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Order, Query, SelectStatement};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{db, input, wire, Error, Result};

use crate::paging::{self, Page};

pub const STATUSES: [&str; 3] = ["ready", "picked_up", "cancelled"];

/// A list's `status` filter: one of `STATUSES` in any case, blank for all.
pub fn status_filter(raw: Option<&str>) -> Result<Option<String>> {
    input::one_of_or_blank("status", raw, &STATUSES)
}

/// The document's schema of that filter, from the same list.
pub fn status_filter_schema() -> utoipa::openapi::schema::Schema {
    input::one_of_or_blank_schema(&STATUSES)
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WillCall {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = Option<String>)]
    pub prescription_id: Option<Uuid>,
    #[schema(value_type = Option<String>)]
    pub sale_id: Option<Uuid>,
    pub patient_name: String,
    pub patient_phone: String,
    /// `ready`, `picked_up` or `cancelled`.
    pub status: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub signature_captured: bool,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub picked_up_at: Option<DateTime<Utc>>,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

const COLUMNS: [&str; 11] = [
    "id",
    "branch_id",
    "prescription_id",
    "sale_id",
    "patient_name",
    "patient_phone",
    "status",
    "signature_captured",
    "picked_up_at",
    "created_by",
    "created_at",
];

impl WillCall {
    fn from_row(r: &Row) -> Self {
        WillCall {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            prescription_id: r.get("prescription_id"),
            sale_id: r.get("sale_id"),
            patient_name: r.get("patient_name"),
            patient_phone: r.get("patient_phone"),
            status: r.get("status"),
            signature_captured: r.get("signature_captured"),
            picked_up_at: r.get("picked_up_at"),
            created_by: r.get("created_by"),
            created_at: r.get("created_at"),
        }
    }
}

fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS)
        .from(Table::WillCallPickups)
        .to_owned()
}

pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<WillCall>> {
    let q = select().and_where(Expr::col("id").eq(id)).to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| WillCall::from_row(&r)))
}

/// One branch's pickups, newest first.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
    status: Option<&str>,
    page: Page,
) -> Result<(Vec<WillCall>, i64)> {
    let mut base = Query::select()
        .from(Table::WillCallPickups)
        .and_where(Expr::col("branch_id").eq(branch_id))
        .to_owned();
    if let Some(s) = status {
        base.and_where(Expr::col("status").eq(s));
    }
    let (rows, total) = paging::fetch(c, base, "id", page, |q| {
        q.columns(COLUMNS)
            .order_by("created_at", Order::Desc)
            .order_by("id", Order::Desc);
    })
    .await?;
    let items = rows.iter().map(WillCall::from_row).collect();
    Ok((items, total))
}

/// `POST /dispensing/will-call` as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WillCallCreate {
    /// Required, non-blank.
    pub patient_name: Option<String>,
    pub patient_phone: Option<String>,
    /// Default the caller's branch; only an admin may name another.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// A prescription of that branch.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub prescription_id: Option<Uuid>,
    /// A sale of that branch.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub sale_id: Option<Uuid>,
}

/// Longest patient name and phone number on a pickup.
pub const MAX_PATIENT_NAME: usize = 200;
pub const MAX_PHONE: usize = 50;

impl WillCallCreate {
    /// Checks the pickup's fields for `branch_id` (the caller's scope);
    /// the prescription and sale are checked when it is stored.
    pub fn validate(self, branch_id: Uuid, created_by: Uuid) -> Result<NewWillCall> {
        Ok(NewWillCall {
            branch_id,
            prescription_id: self.prescription_id,
            sale_id: self.sale_id,
            patient_name: input::required_text(
                "patient_name",
                self.patient_name.as_deref().unwrap_or_default(),
                MAX_PATIENT_NAME,
            )?,
            patient_phone: input::text(
                "patient_phone",
                self.patient_phone.as_deref().unwrap_or_default(),
                MAX_PHONE,
            )?,
            created_by,
        })
    }
}

pub struct NewWillCall {
    pub branch_id: Uuid,
    pub prescription_id: Option<Uuid>,
    pub sale_id: Option<Uuid>,
    pub patient_name: String,
    pub patient_phone: String,
    pub created_by: Uuid,
}

/// 400 naming `field` unless `id` is a row of `table` in `branch_id`
/// (`live_only` skips soft-deleted rows).
async fn check_in_branch<C: GenericClient + Sync>(
    c: &C,
    field: &str,
    table: &'static str,
    id: Uuid,
    branch_id: Uuid,
    live_only: bool,
) -> Result<()> {
    let mut q = Query::select()
        .column("id")
        .from(table)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("branch_id").eq(branch_id))
        .to_owned();
    if live_only {
        q.and_where(Expr::col("is_deleted").eq(false));
    }
    match db::fetch_opt(c, &q).await? {
        Some(_) => Ok(()),
        None => Err(Error::validation(
            field,
            format!("`{field}` must name a record of this branch."),
        )),
    }
}

pub async fn insert<C: GenericClient + Sync>(c: &C, w: NewWillCall) -> Result<WillCall> {
    if crate::branches::get(c, w.branch_id).await?.is_none() {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    if let Some(id) = w.prescription_id {
        check_in_branch(c, "prescription_id", "prescriptions", id, w.branch_id, true).await?;
    }
    if let Some(id) = w.sale_id {
        check_in_branch(c, "sale_id", "sales", id, w.branch_id, false).await?;
    }
    let q = Query::insert()
        .into_table(Table::WillCallPickups)
        .columns([
            "id",
            "branch_id",
            "prescription_id",
            "sale_id",
            "patient_name",
            "patient_phone",
            "created_by",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            w.branch_id.into(),
            w.prescription_id.into(),
            w.sale_id.into(),
            w.patient_name.into(),
            w.patient_phone.into(),
            w.created_by.into(),
        ])
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    Ok(WillCall::from_row(&db::fetch_one(c, &q).await?))
}

/// A move out of `ready`.
#[derive(Debug, Clone, Copy)]
pub enum Move {
    PickUp { signature_captured: bool },
    Cancel,
}

/// Applies `mv` only while the pickup is `ready`; `None` when it was not.
pub async fn apply<C: GenericClient + Sync>(c: &C, id: Uuid, mv: Move) -> Result<Option<WillCall>> {
    let now = Utc::now();
    let mut q = Query::update()
        .table(Table::WillCallPickups)
        .value("updated_at", now)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("status").eq("ready"))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    match mv {
        Move::PickUp { signature_captured } => {
            q.value("status", "picked_up")
                .value("signature_captured", signature_captured)
                .value("picked_up_at", now);
        }
        Move::Cancel => {
            q.value("status", "cancelled");
        }
    }
    Ok(db::fetch_opt(c, &q).await?.map(|r| WillCall::from_row(&r)))
}
