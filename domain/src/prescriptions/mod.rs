//! Prescriptions and their lines: reads, creation with a per-branch
//! `rx_number`, and the status moves. Every move is a conditional update
//! (`WHERE status = 'PENDING'`), so concurrent moves cannot both succeed.

use crate::tables::Table;
use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, JoinType, OnConflict, Order, Query, SelectStatement};
use serde::Serialize;
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{db, wire, Error, Result};

use crate::paging::{self, Page};

pub mod moves;
pub mod request;

pub const STATUSES: [&str; 3] = ["PENDING", "DISPENSED", "CANCELLED"];

/// One line of a prescription, joined to its medicine.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PrescriptionItem {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub prescription_id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub quantity: i32,
    /// Units of this line the sales against the prescription gave out
    /// (never above `quantity`).
    pub dispensed_quantity: i32,
    pub dosage_instructions: String,
    pub medicine_name: String,
    /// Decimal string (`"1500.00"`).
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub selling_price: Decimal,
    pub vat_category: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub requires_prescription: bool,
}

/// The prescription read shape.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Prescription {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    /// `RX-<branch code>-<6 digits>`, unique across the chain.
    pub rx_number: String,
    pub patient_name: String,
    pub patient_id_number: String,
    pub prescriber_name: String,
    pub prescriber_license: String,
    /// `PENDING`, `DISPENSED` or `CANCELLED`.
    pub status: String,
    #[schema(value_type = Option<String>)]
    pub sale_id: Option<Uuid>,
    #[schema(value_type = Option<String>)]
    pub dispensed_by: Option<Uuid>,
    pub dispensed_by_name: Option<String>,
    pub notes: String,
    #[schema(value_type = Option<String>)]
    pub created_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub updated_at: DateTime<Utc>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub dispensed_at: Option<DateTime<Utc>>,
    pub items: Vec<PrescriptionItem>,
}

const COLUMNS: [&str; 15] = [
    "id",
    "branch_id",
    "rx_number",
    "patient_name",
    "patient_id_number",
    "prescriber_name",
    "prescriber_license",
    "status",
    "sale_id",
    "dispensed_by",
    "notes",
    "created_by",
    "created_at",
    "updated_at",
    "dispensed_at",
];

impl Prescription {
    fn from_row(r: &Row) -> Self {
        Prescription {
            id: r.get("id"),
            branch_id: r.get("branch_id"),
            rx_number: r.get("rx_number"),
            patient_name: r.get("patient_name"),
            patient_id_number: r.get("patient_id_number"),
            prescriber_name: r.get("prescriber_name"),
            prescriber_license: r.get("prescriber_license"),
            status: r.get("status"),
            sale_id: r.get("sale_id"),
            dispensed_by: r.get("dispensed_by"),
            dispensed_by_name: r.get("dispensed_by_name"),
            notes: r.get("notes"),
            created_by: r.get("created_by"),
            created_at: r.get("created_at"),
            updated_at: r.get("updated_at"),
            dispensed_at: r.get("dispensed_at"),
            items: Vec::new(),
        }
    }
}

impl PrescriptionItem {
    fn from_row(r: &Row) -> Self {
        PrescriptionItem {
            id: r.get("id"),
            prescription_id: r.get("prescription_id"),
            medicine_id: r.get("medicine_id"),
            quantity: r.get("quantity"),
            dispensed_quantity: r.get("dispensed_quantity"),
            dosage_instructions: r.get("dosage_instructions"),
            medicine_name: r.get("medicine_name"),
            selling_price: r.get("selling_price"),
            vat_category: r.get("vat_category"),
            requires_prescription: r.get("requires_prescription"),
        }
    }
}

/// Live prescriptions with the dispenser's name.
fn select() -> SelectStatement {
    Query::select()
        .columns(COLUMNS.map(|c| ("p", c)))
        .expr_as(Expr::col(("u", "full_name")), "dispensed_by_name")
        .from_as(Table::Prescriptions, "p")
        .join_as(
            JoinType::LeftJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("p", "dispensed_by")),
        )
        .and_where(Expr::col(("p", "is_deleted")).eq(false))
        .to_owned()
}

/// The lines of `ids`, grouped by prescription, in the order written.
async fn items_of<C: GenericClient + Sync>(
    c: &C,
    ids: Vec<Uuid>,
) -> Result<HashMap<Uuid, Vec<PrescriptionItem>>> {
    let mut out: HashMap<Uuid, Vec<PrescriptionItem>> = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let q = Query::select()
        .columns(
            [
                "id",
                "prescription_id",
                "medicine_id",
                "quantity",
                "dispensed_quantity",
                "dosage_instructions",
            ]
            .map(|c| ("i", c)),
        )
        .expr_as(Expr::col(("m", "name")), "medicine_name")
        .columns(["selling_price", "vat_category", "requires_prescription"].map(|c| ("m", c)))
        .from_as(Table::PrescriptionItems, "i")
        .join_as(
            JoinType::InnerJoin,
            Table::Medicines,
            "m",
            Expr::col(("m", "id")).equals(("i", "medicine_id")),
        )
        .and_where(Expr::col(("i", "prescription_id")).is_in(ids))
        .order_by(("i", "line_no"), Order::Asc)
        .order_by(("i", "id"), Order::Asc)
        .to_owned();
    for row in db::fetch_all(c, &q).await? {
        let item = PrescriptionItem::from_row(&row);
        out.entry(item.prescription_id).or_default().push(item);
    }
    Ok(out)
}

async fn with_items<C: GenericClient + Sync>(
    c: &C,
    mut list: Vec<Prescription>,
) -> Result<Vec<Prescription>> {
    let mut items = items_of(c, list.iter().map(|p| p.id).collect()).await?;
    for p in &mut list {
        p.items = items.remove(&p.id).unwrap_or_default();
    }
    Ok(list)
}

/// A live prescription with its lines.
pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Prescription>> {
    let q = select().and_where(Expr::col(("p", "id")).eq(id)).to_owned();
    let Some(row) = db::fetch_opt(c, &q).await? else {
        return Ok(None);
    };
    Ok(with_items(c, vec![Prescription::from_row(&row)])
        .await?
        .pop())
}

/// One branch's live prescriptions: pending first, then newest first.
pub async fn list<C: GenericClient + Sync>(
    c: &C,
    branch_id: Uuid,
    status: Option<&str>,
    page: Page,
) -> Result<(Vec<Prescription>, i64)> {
    let mut base = select()
        .and_where(Expr::col(("p", "branch_id")).eq(branch_id))
        .to_owned();
    if let Some(s) = status {
        base.and_where(Expr::col(("p", "status")).eq(s));
    }
    let (rows, total) = paging::fetch(c, base, ("p", "id"), page, |q| {
        q.order_by_expr(Expr::cust("p.status = 'PENDING'"), Order::Desc)
            .order_by(("p", "created_at"), Order::Desc)
            .order_by(("p", "id"), Order::Desc);
    })
    .await?;
    let list = with_items(c, rows.iter().map(Prescription::from_row).collect()).await?;
    Ok((list, total))
}

/// A line to write, already validated.
pub struct NewItem {
    pub medicine_id: Uuid,
    pub quantity: i32,
    pub dosage_instructions: String,
}

pub struct NewPrescription {
    pub branch_id: Uuid,
    pub patient_name: String,
    pub patient_id_number: String,
    pub prescriber_name: String,
    pub prescriber_license: String,
    pub notes: String,
    pub items: Vec<NewItem>,
    pub created_by: Uuid,
}

/// 400 naming the first line whose medicine is unknown, deleted or inactive.
async fn check_medicines<C: GenericClient + Sync>(c: &C, items: &[NewItem]) -> Result<()> {
    let ids: Vec<Uuid> = items.iter().map(|i| i.medicine_id).collect();
    let q = Query::select()
        .column("id")
        .from(Table::Medicines)
        .and_where(Expr::col("id").is_in(ids))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("is_active").eq(true))
        .to_owned();
    let known: HashSet<Uuid> = db::fetch_all(c, &q)
        .await?
        .iter()
        .map(|r| r.get::<_, Uuid>(0))
        .collect();
    match items.iter().position(|i| !known.contains(&i.medicine_id)) {
        Some(i) => Err(Error::validation(
            format!("items[{i}].medicine_id"),
            "This medicine does not exist or is not active.",
        )),
        None => Ok(()),
    }
}

/// The next `rx_number` of a branch. The counter row is keyed by branch
/// code and bumped in the caller's transaction, so numbers never repeat
/// (a reused code continues the old sequence) and a rollback leaves no gap.
async fn next_rx_number<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<String> {
    let q = Query::select()
        .column("code")
        .from(Table::Branches)
        .and_where(Expr::col("id").eq(branch_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .to_owned();
    let code: String = db::fetch_opt(tx, &q)
        .await?
        .ok_or_else(|| Error::validation("branch_id", "`branch_id` names no branch."))?
        .get(0);
    let code = code.to_uppercase();
    let bump = Query::insert()
        .into_table(Table::PrescriptionCounters)
        .columns(["branch_code", "last_number"])
        .values_panic([code.clone().into(), 1i64.into()])
        .on_conflict(
            OnConflict::column("branch_code")
                .value(
                    "last_number",
                    Expr::col(("prescription_counters", "last_number")).add(1i64),
                )
                .to_owned(),
        )
        .returning_col("last_number")
        .to_owned();
    let n: i64 = db::fetch_one(tx, &bump).await?.get(0);
    Ok(format!("RX-{code}-{n:06}"))
}

/// Writes a `PENDING` prescription and its lines in `tx`. The caller commits.
pub async fn insert<C: GenericClient + Sync>(tx: &C, p: NewPrescription) -> Result<Prescription> {
    check_medicines(tx, &p.items).await?;
    let rx_number = next_rx_number(tx, p.branch_id).await?;
    let id = Uuid::now_v7();
    let q = Query::insert()
        .into_table(Table::Prescriptions)
        .columns([
            "id",
            "branch_id",
            "rx_number",
            "patient_name",
            "patient_id_number",
            "prescriber_name",
            "prescriber_license",
            "notes",
            "created_by",
        ])
        .values_panic([
            id.into(),
            p.branch_id.into(),
            rx_number.into(),
            p.patient_name.into(),
            p.patient_id_number.into(),
            p.prescriber_name.into(),
            p.prescriber_license.into(),
            p.notes.into(),
            p.created_by.into(),
        ])
        .to_owned();
    db::execute(tx, &q).await?;
    let mut lines = Query::insert()
        .into_table(Table::PrescriptionItems)
        .columns([
            "id",
            "prescription_id",
            "line_no",
            "medicine_id",
            "quantity",
            "dosage_instructions",
        ])
        .to_owned();
    for (n, item) in p.items.into_iter().enumerate() {
        lines.values_panic([
            Uuid::now_v7().into(),
            id.into(),
            i32::try_from(n).unwrap_or(i32::MAX).into(),
            item.medicine_id.into(),
            item.quantity.into(),
            item.dosage_instructions.into(),
        ]);
    }
    db::execute(tx, &lines).await?;
    get(tx, id)
        .await?
        .ok_or_else(|| Error::internal("prescription vanished after insert"))
}

/// What a dispense needs to know of the sale it links.
pub struct SaleRef {
    pub branch_id: Uuid,
    pub prescription_id: Option<Uuid>,
}

pub async fn sale_ref<C: GenericClient + Sync>(c: &C, sale_id: Uuid) -> Result<Option<SaleRef>> {
    let q = Query::select()
        .columns(["branch_id", "prescription_id"])
        .from(Table::Sales)
        .and_where(Expr::col("id").eq(sale_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| SaleRef {
        branch_id: r.get(0),
        prescription_id: r.get(1),
    }))
}

/// A move of a live prescription.
#[derive(Debug, Clone, Copy)]
pub enum Move {
    Dispense {
        sale_id: Uuid,
        by: Uuid,
    },
    /// Only while nothing was dispensed against it.
    Cancel,
    /// Soft delete. A prescription anything was dispensed against is part
    /// of the prescription book (kept two years for inspection), so it
    /// cannot be deleted.
    Delete,
}

impl Move {
    /// The statuses the move may start from.
    pub fn allowed_from(&self) -> &'static [&'static str] {
        match self {
            Move::Dispense { .. } | Move::Cancel => &["PENDING"],
            Move::Delete => &["PENDING", "CANCELLED"],
        }
    }
}

/// Applies `mv` as one conditional update (live, in an allowed status and,
/// for a cancel or delete, nothing dispensed yet), so of two concurrent
/// moves only one applies, and a sale that dispensed meanwhile (it updates
/// the same row) stops a cancel or delete; true when it applied.
pub async fn apply<C: GenericClient + Sync>(tx: &C, id: Uuid, mv: Move) -> Result<bool> {
    let now = Utc::now();
    let mut q = Query::update()
        .table(Table::Prescriptions)
        .value("updated_at", now)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .and_where(Expr::col("status").is_in(mv.allowed_from().iter().copied()))
        .to_owned();
    match mv {
        Move::Dispense { sale_id, by } => {
            q.value("status", "DISPENSED")
                .value("sale_id", sale_id)
                .value("dispensed_by", by)
                .value("dispensed_at", now);
        }
        Move::Cancel => {
            q.value("status", "CANCELLED")
                .and_where(Expr::col("dispensed_units").eq(0));
        }
        Move::Delete => {
            q.value("is_deleted", true)
                .and_where(Expr::col("dispensed_units").eq(0));
        }
    }
    Ok(db::execute(tx, &q).await? == 1)
}
