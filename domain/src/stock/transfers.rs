//! Stock transfers between branches.
//!
//! - Create (source branch actor): stock leaves the source's sellable batches
//!   first-expiry-first-out as `TRANSFER_OUT` movements, one transfer line
//!   per source batch; the transfer is `in_transit`.
//! - Receive (destination branch actor): each line becomes a new batch at
//!   the destination (same batch number, dates, cost and supplier) by a
//!   `TRANSFER_IN` movement; the transfer is `received`.
//! - Cancel (source branch actor): the stock goes back into the source
//!   batches as `TRANSFER_CANCEL` movements; the transfer is `cancelled`.
//!
//! Receive and cancel run on different actors, so both lock the transfer
//! row first: whichever comes second sees the new status and gets a 409.

use crate::tables::Table;
use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, JoinType, LockType, Order, Query, SelectStatement};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::input;
use crate::stock::{self, cost, Kind, Movement, NewBatch};
use crate::wire;
use actors::runtime::Command;

pub const IN_TRANSIT: &str = "in_transit";
pub const RECEIVED: &str = "received";
pub const CANCELLED: &str = "cancelled";
/// The list is capped, not paged.
pub const LIST_LIMIT: u64 = 100;

/// The spec's stock transfer shape, plus who moved it and when.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Transfer {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    #[schema(value_type = String)]
    pub from_branch_id: Uuid,
    #[schema(value_type = String)]
    pub to_branch_id: Uuid,
    pub qty: i32,
    /// `in_transit`, `received` or `cancelled`.
    pub status: String,
    pub notes: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    pub medicine_name: String,
    /// Name of the source branch.
    pub from_branch: String,
    /// Name of the destination branch.
    pub to_branch: String,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    pub created_by_name: String,
    #[schema(value_type = Option<String>)]
    pub received_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub received_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<String>)]
    pub cancelled_by: Option<Uuid>,
    #[serde(serialize_with = "wire::ts_opt")]
    #[schema(value_type = Option<String>)]
    pub cancelled_at: Option<DateTime<Utc>>,
}

impl Transfer {
    pub fn from_row(r: &Row) -> Self {
        Transfer {
            id: r.get("id"),
            medicine_id: r.get("medicine_id"),
            from_branch_id: r.get("from_branch_id"),
            to_branch_id: r.get("to_branch_id"),
            qty: r.get("qty"),
            status: r.get("status"),
            notes: r.get("notes"),
            created_at: r.get("created_at"),
            medicine_name: r.get("medicine_name"),
            from_branch: r.get("from_branch"),
            to_branch: r.get("to_branch"),
            created_by: r.get("created_by"),
            created_by_name: r.get("created_by_name"),
            received_by: r.get("received_by"),
            received_at: r.get("received_at"),
            cancelled_by: r.get("cancelled_by"),
            cancelled_at: r.get("cancelled_at"),
        }
    }
}

/// Transfers joined with the names the shape carries.
fn select() -> SelectStatement {
    Query::select()
        .columns(
            [
                "id",
                "medicine_id",
                "from_branch_id",
                "to_branch_id",
                "qty",
                "status",
                "notes",
                "created_at",
                "created_by",
                "received_by",
                "received_at",
                "cancelled_by",
                "cancelled_at",
            ]
            .map(|c| ("t", c)),
        )
        .expr_as(Expr::col(("m", "name")), "medicine_name")
        .expr_as(Expr::col(("fb", "name")), "from_branch")
        .expr_as(Expr::col(("tb", "name")), "to_branch")
        .expr_as(Expr::col(("u", "full_name")), "created_by_name")
        .from_as(Table::Transfers, "t")
        .join_as(
            JoinType::InnerJoin,
            Table::Medicines,
            "m",
            Expr::col(("m", "id")).equals(("t", "medicine_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Branches,
            "fb",
            Expr::col(("fb", "id")).equals(("t", "from_branch_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Branches,
            "tb",
            Expr::col(("tb", "id")).equals(("t", "to_branch_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Table::Users,
            "u",
            Expr::col(("u", "id")).equals(("t", "created_by")),
        )
        .to_owned()
}

pub async fn get<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<Option<Transfer>> {
    let q = select().and_where(Expr::col(("t", "id")).eq(id)).to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| Transfer::from_row(&r)))
}

/// What `GET /transfers` filters on. Days are the organisation's calendar days.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Source or destination.
    pub branch_id: Option<Uuid>,
    pub from_date: Option<NaiveDate>,
    pub to_date: Option<NaiveDate>,
}

/// The start of a calendar day in the organisation's time zone.
const DAY_START: &str = "($1::date::timestamp AT TIME ZONE \
     coalesce((SELECT time_zone FROM settings LIMIT 1), 'Africa/Kampala'))";

/// Newest first, at most `LIST_LIMIT`.
pub async fn list<C: GenericClient + Sync>(c: &C, f: &ListFilter) -> Result<Vec<Transfer>> {
    let q = select()
        .apply_if(f.branch_id, |q, b| {
            q.and_where(
                Expr::col(("t", "from_branch_id"))
                    .eq(b)
                    .or(Expr::col(("t", "to_branch_id")).eq(b)),
            );
        })
        .apply_if(f.from_date, |q, d| {
            q.and_where(Expr::col(("t", "created_at")).gte(Expr::cust_with_values(DAY_START, [d])));
        })
        .apply_if(f.to_date.and_then(|d| d.succ_opt()), |q, next| {
            q.and_where(
                Expr::col(("t", "created_at")).lt(Expr::cust_with_values(DAY_START, [next])),
            );
        })
        .order_by(("t", "created_at"), Order::Desc)
        .order_by(("t", "id"), Order::Desc)
        .limit(LIST_LIMIT)
        .to_owned();
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(Transfer::from_row)
        .collect())
}

/// `POST /transfers` as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct TransferCreate {
    #[schema(value_type = String, format = Uuid)]
    pub medicine_id: Uuid,
    /// A non-admin may only send from its own branch.
    #[schema(value_type = String, format = Uuid)]
    pub from_branch_id: Uuid,
    #[schema(value_type = String, format = Uuid)]
    pub to_branch_id: Uuid,
    /// Whole units, more than 0.
    #[schema(value_type = f64, minimum = 1)]
    pub qty: Decimal,
    pub notes: Option<String>,
}

/// Longest note on a transfer.
pub const MAX_NOTES: usize = 1000;

impl TransferCreate {
    /// Checks the shape of the transfer; stock and branches are checked in
    /// the transaction.
    pub fn validate(self, user_id: Uuid) -> Result<CreateTransfer> {
        let qty = input::quantity("qty", self.qty)?;
        let notes = input::multiline("notes", self.notes.as_deref().unwrap_or(""), MAX_NOTES)?;
        if self.from_branch_id == self.to_branch_id {
            return Err(Error::validation(
                "to_branch_id",
                "A transfer must go to a different branch.",
            ));
        }
        Ok(CreateTransfer {
            medicine_id: self.medicine_id,
            from_branch_id: self.from_branch_id,
            to_branch_id: self.to_branch_id,
            qty,
            notes,
            user_id,
        })
    }
}

/// `POST /transfers` through the source branch's actor, validated
/// (`TransferCreate::validate`) except for what needs the database.
pub struct CreateTransfer {
    pub medicine_id: Uuid,
    pub from_branch_id: Uuid,
    pub to_branch_id: Uuid,
    pub qty: i32,
    pub notes: String,
    pub user_id: Uuid,
}

impl Command for CreateTransfer {
    type Error = crate::Error;
    type Output = Transfer;
    const NAME: &'static str = "create_transfer";

    async fn run(self, pool: Pool) -> Result<Transfer> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let id = create(&tx, &self).await?;
        let transfer = read_back(&tx, id).await?;
        crate::db::commit(tx).await?;
        Ok(transfer)
    }
}

async fn create<C: GenericClient + Sync>(tx: &C, t: &CreateTransfer) -> Result<Uuid> {
    if t.from_branch_id == t.to_branch_id {
        return Err(Error::validation(
            "to_branch_id",
            "A transfer must go to a different branch.",
        ));
    }
    for (field, branch) in [
        ("from_branch_id", t.from_branch_id),
        ("to_branch_id", t.to_branch_id),
    ] {
        if !live(tx, "branches", branch, true).await? {
            return Err(Error::validation(
                field,
                format!("`{field}` names no active branch."),
            ));
        }
    }
    if !live(tx, "medicines", t.medicine_id, false).await? {
        return Err(Error::validation(
            "medicine_id",
            "`medicine_id` names no medicine.",
        ));
    }
    let mut lots = stock::lock_sellable(tx, t.from_branch_id, &[t.medicine_id]).await?;
    let available = stock::available(&lots, t.medicine_id);
    let picks = stock::pick(&mut lots, t.medicine_id, t.qty).ok_or_else(|| {
        Error::validation(
            "qty",
            format!(
                "Not enough sellable stock at the source branch: {} requested, {available} available.",
                t.qty
            ),
        )
    })?;
    let id = Uuid::now_v7();
    let insert = Query::insert()
        .into_table(Table::Transfers)
        .columns([
            "id",
            "medicine_id",
            "from_branch_id",
            "to_branch_id",
            "qty",
            "status",
            "notes",
            "created_by",
        ])
        .values_panic([
            id.into(),
            t.medicine_id.into(),
            t.from_branch_id.into(),
            t.to_branch_id.into(),
            t.qty.into(),
            IN_TRANSIT.into(),
            t.notes.clone().into(),
            t.user_id.into(),
        ])
        .to_owned();
    db::execute(tx, &insert).await?;
    let mut lines = Query::insert()
        .into_table(Table::TransferLines)
        .columns(["transfer_id", "source_batch_id", "qty"])
        .to_owned();
    for (lot, qty) in &picks {
        stock::apply(
            tx,
            Movement {
                batch_id: lot.batch_id,
                delta: -qty,
                kind: Kind::TransferOut,
                reference: Some(("transfer", id)),
                user_id: t.user_id,
            },
        )
        .await?;
        lines.values_panic([id.into(), lot.batch_id.into(), (*qty).into()]);
    }
    db::execute(tx, &lines).await?;
    Ok(id)
}

/// Whether a row of `table` exists and is not deleted (and active, if asked).
async fn live<C: GenericClient + Sync>(
    tx: &C,
    table: &'static str,
    id: Uuid,
    active: bool,
) -> Result<bool> {
    let q = Query::select()
        .expr(Expr::cust("1"))
        .from(table)
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(active.then_some(true), |q, a| {
            q.and_where(Expr::col("is_active").eq(a));
        })
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.is_some())
}

async fn read_back<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Transfer> {
    get(tx, id)
        .await?
        .ok_or_else(|| Error::internal(format!("transfer {id} vanished in its own transaction")))
}

/// Locks the transfer row and checks it is still in transit (404 / 409).
async fn lock_in_transit<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<()> {
    let q = Query::select()
        .column("status")
        .from(Table::Transfers)
        .and_where(Expr::col("id").eq(id))
        .lock(LockType::Update)
        .to_owned();
    let status: String = db::fetch_opt(tx, &q)
        .await?
        .ok_or_else(|| Error::not_found("Transfer not found"))?
        .get(0);
    if status != IN_TRANSIT {
        return Err(Error::conflict(format!(
            "This transfer is already {status}; only a transfer in transit can move."
        )));
    }
    Ok(())
}

/// One transfer line with what the destination batch copies from its source.
struct Line {
    source_batch_id: Uuid,
    qty: i32,
    medicine_id: Uuid,
    supplier_id: Option<Uuid>,
    batch_number: String,
    expiry_date: NaiveDate,
    manufacturing_date: Option<NaiveDate>,
    unit_cost: Decimal,
    /// The moved units' share of what the source batch cost.
    value: Decimal,
}

async fn lines<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Vec<Line>> {
    let q = Query::select()
        .columns([("l", "source_batch_id"), ("l", "qty")])
        .columns(
            [
                "medicine_id",
                "supplier_id",
                "batch_number",
                "expiry_date",
                "manufacturing_date",
                "unit_cost",
                "received_total",
                "qty_received",
            ]
            .map(|c| ("b", c)),
        )
        .from_as(Table::TransferLines, "l")
        .join_as(
            JoinType::InnerJoin,
            Table::Batches,
            "b",
            Expr::col(("b", "id")).equals(("l", "source_batch_id")),
        )
        .and_where(Expr::col(("l", "transfer_id")).eq(id))
        .order_by(("l", "source_batch_id"), Order::Asc)
        .to_owned();
    Ok(db::fetch_all(tx, &q)
        .await?
        .iter()
        .map(|r| Line {
            source_batch_id: r.get("source_batch_id"),
            qty: r.get("qty"),
            value: cost::value(
                r.get("qty"),
                r.get("unit_cost"),
                r.get("received_total"),
                r.get("qty_received"),
            ),
            medicine_id: r.get("medicine_id"),
            supplier_id: r.get("supplier_id"),
            batch_number: r.get("batch_number"),
            expiry_date: r.get("expiry_date"),
            manufacturing_date: r.get("manufacturing_date"),
            unit_cost: r.get("unit_cost"),
        })
        .collect())
}

/// `POST /transfers/{id}/receive` through the destination branch's actor.
pub struct ReceiveTransfer {
    pub transfer_id: Uuid,
    pub to_branch_id: Uuid,
    pub user_id: Uuid,
}

impl Command for ReceiveTransfer {
    type Error = crate::Error;
    type Output = Transfer;
    const NAME: &'static str = "receive_transfer";

    async fn run(self, pool: Pool) -> Result<Transfer> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let id = self.transfer_id;
        lock_in_transit(&tx, id).await?;
        for line in lines(&tx, id).await? {
            let batch = stock::receive(
                &tx,
                NewBatch {
                    medicine_id: line.medicine_id,
                    branch_id: self.to_branch_id,
                    supplier_id: line.supplier_id,
                    batch_number: line.batch_number,
                    expiry_date: line.expiry_date,
                    manufacturing_date: line.manufacturing_date,
                    quantity: line.qty,
                    unit_cost: line.unit_cost,
                    received_total: line.value,
                    pack: None,
                    origin: "transfer",
                    notes: format!("Transfer {id}"),
                    user_id: self.user_id,
                },
                Kind::TransferIn,
                Some(("transfer", id)),
            )
            .await?;
            let link = Query::update()
                .table(Table::TransferLines)
                .value("dest_batch_id", batch.id)
                .and_where(Expr::col("transfer_id").eq(id))
                .and_where(Expr::col("source_batch_id").eq(line.source_batch_id))
                .to_owned();
            db::execute(&tx, &link).await?;
        }
        let done = Query::update()
            .table(Table::Transfers)
            .value("status", RECEIVED)
            .value("received_by", self.user_id)
            .value("received_at", Utc::now())
            .and_where(Expr::col("id").eq(id))
            .to_owned();
        db::execute(&tx, &done).await?;
        let transfer = read_back(&tx, id).await?;
        crate::db::commit(tx).await?;
        Ok(transfer)
    }
}

/// `POST /transfers/{id}/cancel` through the source branch's actor.
pub struct CancelTransfer {
    pub transfer_id: Uuid,
    pub user_id: Uuid,
}

impl Command for CancelTransfer {
    type Error = crate::Error;
    type Output = Transfer;
    const NAME: &'static str = "cancel_transfer";

    async fn run(self, pool: Pool) -> Result<Transfer> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let id = self.transfer_id;
        lock_in_transit(&tx, id).await?;
        for line in lines(&tx, id).await? {
            stock::apply(
                &tx,
                Movement {
                    batch_id: line.source_batch_id,
                    delta: line.qty,
                    kind: Kind::TransferCancel,
                    reference: Some(("transfer", id)),
                    user_id: self.user_id,
                },
            )
            .await?;
        }
        let done = Query::update()
            .table(Table::Transfers)
            .value("status", CANCELLED)
            .value("cancelled_by", self.user_id)
            .value("cancelled_at", Utc::now())
            .and_where(Expr::col("id").eq(id))
            .to_owned();
        db::execute(&tx, &done).await?;
        let transfer = read_back(&tx, id).await?;
        crate::db::commit(tx).await?;
        Ok(transfer)
    }
}
