//! The stock ledger. Every change of stock goes through `apply`: one
//! conditional update of the batch (never below zero, also enforced by a
//! CHECK) and one movement row, in the caller's transaction, plus the
//! batch's sync change. So a batch's `qty_remaining` is always the sum of its
//! movements, and a medicine's stock at a branch the sum over its batches.
//!
//! Lock order, to keep concurrent writers free of deadlocks: batches first
//! (ordered by medicine, expiry, receipt), then coupons, customers, the
//! invoice counter and the cash session.
//!
//! The first-expiry-first-out picks over locked batches are in `pick`.

pub mod cost;
pub mod count;
pub mod left;
mod pick;
pub mod quarantine;
pub mod receiving;
pub mod reorder;
pub mod shelf;
pub mod transfers;

pub use pick::{available, pick, pick_batch, pick_whole, whole_packs, Lot};

use crate::tables::Table;
use chrono::{DateTime, NaiveDate, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Query};
use serde::Serialize;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::db::{self, Stmt};
use crate::error::{Error, Result};
use crate::sync::changes::{self, Change, Op};
use crate::wire;

/// The snapshot Batch shape (numbers as JSON numbers, `is_deleted` 0/1), plus `rev`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Batch {
    #[schema(value_type = String)]
    pub id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = Option<String>)]
    pub supplier_id: Option<Uuid>,
    pub batch_number: String,
    #[schema(value_type = String, format = Date)]
    pub expiry_date: NaiveDate,
    #[schema(value_type = Option<String>, format = Date)]
    pub manufacturing_date: Option<NaiveDate>,
    pub qty_received: i32,
    pub qty_remaining: i32,
    #[serde(serialize_with = "wire::money_num")]
    #[schema(value_type = f64)]
    pub unit_cost: Decimal,
    /// `active`, or `depleted` once nothing remains.
    pub status: String,
    /// `active`, `quarantined` or `recalled`.
    pub regulator_status: String,
    #[serde(serialize_with = "wire::int01")]
    #[schema(value_type = i32, minimum = 0, maximum = 1)]
    pub is_deleted: bool,
    pub rev: i64,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

pub const COLUMNS: [&str; 15] = [
    "id",
    "medicine_id",
    "branch_id",
    "supplier_id",
    "batch_number",
    "expiry_date",
    "manufacturing_date",
    "qty_received",
    "qty_remaining",
    "unit_cost",
    "status",
    "regulator_status",
    "is_deleted",
    "rev",
    "created_at",
];

impl Batch {
    pub fn from_row(r: &Row) -> Self {
        Batch {
            id: r.get("id"),
            medicine_id: r.get("medicine_id"),
            branch_id: r.get("branch_id"),
            supplier_id: r.get("supplier_id"),
            batch_number: r.get("batch_number"),
            expiry_date: r.get("expiry_date"),
            manufacturing_date: r.get("manufacturing_date"),
            qty_received: r.get("qty_received"),
            qty_remaining: r.get("qty_remaining"),
            unit_cost: r.get("unit_cost"),
            status: r.get("status"),
            regulator_status: r.get("regulator_status"),
            is_deleted: r.get("is_deleted"),
            rev: r.get("rev"),
            created_at: r.get("created_at"),
        }
    }
}

/// Why stock moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    In,
    Sale,
    SaleReversal,
    Adjust,
    TransferOut,
    TransferIn,
    TransferCancel,
    /// Units of a sale taken back onto the batch they were sold from.
    Return,
    /// Units destroyed or lost (expired, damaged, recalled, ...).
    WriteOff,
    /// Units sent back to the supplier for a debit note.
    ReturnToSupplier,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::In => "IN",
            Kind::Sale => "SALE",
            Kind::SaleReversal => "SALE_REVERSAL",
            Kind::Adjust => "ADJUST",
            Kind::TransferOut => "TRANSFER_OUT",
            Kind::TransferIn => "TRANSFER_IN",
            Kind::TransferCancel => "TRANSFER_CANCEL",
            Kind::Return => "RETURN",
            Kind::WriteOff => "WRITE_OFF",
            Kind::ReturnToSupplier => "RETURN_TO_SUPPLIER",
        }
    }
}

/// One movement to record against a batch.
#[derive(Debug, Clone, Copy)]
pub struct Movement {
    pub batch_id: Uuid,
    /// Signed: positive adds stock, negative takes it away.
    pub delta: i32,
    pub kind: Kind,
    pub reference: Option<(&'static str, Uuid)>,
    pub user_id: Uuid,
}

/// Applies a movement: the batch moves by `delta` unless that would take it
/// below zero (then 400 and nothing changes), the movement row is written
/// and the batch's sync change appended.
pub async fn apply<C: GenericClient + Sync>(tx: &C, m: Movement) -> Result<Batch> {
    record_movement(tx, m, Op::Update).await
}

/// `apply`, with the op its change travels as (`create` for a new batch).
async fn record_movement<C: GenericClient + Sync>(tx: &C, m: Movement, op: Op) -> Result<Batch> {
    let rev = changes::allocate(tx).await?;
    let remaining = Expr::col("qty_remaining").add(m.delta);
    let status = Expr::case(remaining.clone().gt(0), "active").finally("depleted");
    let q = Query::update()
        .table(Table::Batches)
        .value("qty_remaining", remaining.clone())
        .value("status", status)
        .value("rev", rev)
        .value("updated_at", Utc::now())
        .and_where(Expr::col("id").eq(m.batch_id))
        .and_where(remaining.gte(0))
        .returning(Query::returning().columns(COLUMNS))
        .to_owned();
    let batch = db::fetch_opt(tx, &q)
        .await?
        .map(|r| Batch::from_row(&r))
        .ok_or_else(|| Error::bad_request("Not enough stock left in the batch for this change."))?;
    db::run(
        tx,
        &movements_stmt(&[(m, batch.medicine_id, batch.branch_id)]),
    )
    .await?;
    emit(tx, rev, &batch, op).await?;
    Ok(batch)
}

/// Appends a batch's sync change under `rev`.
pub async fn emit<C: GenericClient + Sync>(tx: &C, rev: i64, b: &Batch, op: Op) -> Result<()> {
    changes::append(tx, rev, change_of(b, op)?).await
}

/// A batch's sync change (its rev is the batch's own).
pub fn change_of(b: &Batch, op: Op) -> Result<Change<'static>> {
    Ok(Change {
        entity: "batch",
        entity_id: b.id.to_string(),
        op,
        branch_id: Some(b.branch_id),
        payload: serde_json::to_value(b).map_err(Error::internal)?,
    })
}

/// One statement taking `qty` from each `(batch, qty)` (distinct batches),
/// each batch getting a fresh rev (drawn with `change_log_next_rev()`, so
/// the transaction has its id before the rev). For a sale, whose batches are locked
/// already: a batch that would go below zero is left out of the answer
/// (and the CHECK backs the rule), so the caller compares counts.
pub fn take_stmt(takes: &[(Uuid, i32)]) -> Stmt {
    let ids: Vec<Uuid> = takes.iter().map(|t| t.0).collect();
    let qtys: Vec<i32> = takes.iter().map(|t| t.1).collect();
    let now = Utc::now();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE batches b SET
             qty_remaining = b.qty_remaining - d.qty,
             status = CASE WHEN b.qty_remaining - d.qty > 0 THEN 'active' ELSE 'depleted' END,
             rev = change_log_next_rev(),
             updated_at = {now}
           FROM unnest({ids}::uuid[], {qtys}::int4[]) AS d(id, qty)
           WHERE b.id = d.id AND b.qty_remaining >= d.qty
           RETURNING b.id, b.medicine_id, b.branch_id, b.supplier_id, b.batch_number,
                     b.expiry_date, b.manufacturing_date, b.qty_received, b.qty_remaining,
                     b.unit_cost, b.status, b.regulator_status, b.is_deleted, b.rev, b.created_at"#
    );
    Stmt::raw(q.sql, q.values)
}

/// One statement writing the movement rows of `movements` (medicine and
/// branch given per row, as the batches are not read back first). Its text
/// is the same for any number of rows (`unnest`), so one prepared
/// statement serves them all.
pub fn movements_stmt(movements: &[(Movement, Uuid, Uuid)]) -> Stmt {
    let n = movements.len();
    let (mut ids, mut batches, mut medicines, mut branches) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut kinds, mut qtys, mut ref_types, mut ref_ids, mut users) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (m, medicine_id, branch_id) in movements {
        let (reference_type, reference_id) = match m.reference {
            Some((t, id)) => (t, id.to_string()),
            None => ("", String::new()),
        };
        ids.push(Uuid::now_v7());
        batches.push(m.batch_id);
        medicines.push(*medicine_id);
        branches.push(*branch_id);
        kinds.push(m.kind.as_str().to_owned());
        qtys.push(m.delta);
        ref_types.push(reference_type.to_owned());
        ref_ids.push(reference_id);
        users.push(m.user_id);
    }
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO stock_movements
             (id, batch_id, medicine_id, branch_id, kind, qty, reference_type, reference_id,
              created_by)
           SELECT m.id, m.batch_id, m.medicine_id, m.branch_id, m.kind, m.qty, m.ref_type,
                  nullif(m.ref_id, '')::uuid, m.created_by
           FROM unnest({ids}::uuid[], {batches}::uuid[], {medicines}::uuid[],
                       {branches}::uuid[], {kinds}::text[], {qtys}::int4[], {ref_types}::text[],
                       {ref_ids}::text[], {users}::uuid[])
             AS m(id, batch_id, medicine_id, branch_id, kind, qty, ref_type, ref_id, created_by)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// A new batch to receive (purchase or transfer arrival).
#[derive(Debug, Clone)]
pub struct NewBatch {
    pub medicine_id: Uuid,
    pub branch_id: Uuid,
    pub supplier_id: Option<Uuid>,
    pub batch_number: String,
    pub expiry_date: NaiveDate,
    pub manufacturing_date: Option<NaiveDate>,
    /// Base units.
    pub quantity: i32,
    /// Per base unit, up to 4 places.
    pub unit_cost: Decimal,
    /// What `quantity` cost in all, to the cent.
    pub received_total: Decimal,
    /// The pack received and its base units; `None` for loose units.
    pub pack: Option<(Uuid, i32)>,
    /// `purchase` or `transfer`.
    pub origin: &'static str,
    pub notes: String,
    pub user_id: Uuid,
}

/// Creates a batch with nothing in it, then records its arrival as a
/// movement, so even the first units are on the ledger.
pub async fn receive<C: GenericClient + Sync>(
    tx: &C,
    b: NewBatch,
    kind: Kind,
    reference: Option<(&'static str, Uuid)>,
) -> Result<Batch> {
    let id = Uuid::now_v7();
    let insert = Query::insert()
        .into_table(Table::Batches)
        .columns([
            "id",
            "medicine_id",
            "branch_id",
            "supplier_id",
            "batch_number",
            "expiry_date",
            "manufacturing_date",
            "qty_received",
            "qty_remaining",
            "unit_cost",
            "received_total",
            "pack_id",
            "pack_units",
            "status",
            "origin",
            "notes",
            "created_by",
        ])
        .values_panic([
            id.into(),
            b.medicine_id.into(),
            b.branch_id.into(),
            b.supplier_id.into(),
            b.batch_number.into(),
            b.expiry_date.into(),
            b.manufacturing_date.into(),
            b.quantity.into(),
            0i32.into(),
            b.unit_cost.into(),
            b.received_total.into(),
            b.pack.map(|p| p.0).into(),
            b.pack.map_or(1, |p| p.1).into(),
            "depleted".into(),
            b.origin.into(),
            b.notes.into(),
            b.user_id.into(),
        ])
        .to_owned();
    db::execute(tx, &insert).await?;
    let arrival = Movement {
        batch_id: id,
        delta: b.quantity,
        kind,
        reference,
        user_id: b.user_id,
    };
    // The batch's first change row: tills learn of it as a `create`.
    record_movement(tx, arrival, Op::Create).await
}

/// Locks the sellable batches (in stock, not expired by the organisation's
/// calendar, not quarantined or recalled) of `medicines` at a branch, in
/// first-expiry-first-out order per medicine. One statement, one lock order.
pub async fn lock_sellable<C: GenericClient + Sync>(
    tx: &C,
    branch_id: Uuid,
    medicines: &[Uuid],
) -> Result<Vec<Lot>> {
    let ids: Vec<Uuid> = medicines.to_vec();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, medicine_id, qty_remaining, unit_cost, expiry_date
           FROM batches
           WHERE branch_id = {branch_id} AND medicine_id = ANY({ids})
             AND qty_remaining > 0 AND regulator_status = 'active' AND NOT is_deleted
             AND expiry_date >= org_today()
           ORDER BY medicine_id, expiry_date, created_at, id
           FOR UPDATE"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    Ok(rows.iter().map(lot).collect())
}

/// A batch locked by id, with what a return or a write-off needs of it.
#[derive(Debug, Clone)]
pub struct LockedBatch {
    pub batch_id: Uuid,
    pub medicine_id: Uuid,
    pub branch_id: Uuid,
    /// Who supplied it (none for stock of unknown origin).
    pub supplier_id: Option<Uuid>,
    pub batch_number: String,
    pub remaining: i32,
    pub unit_cost: Decimal,
    /// What the batch's received quantity cost (`cost::value`).
    pub received_total: Option<Decimal>,
    pub qty_received: i32,
    pub is_deleted: bool,
}

/// Locks the batches `ids` (whatever their status), in the order sales
/// lock them (medicine, expiry, receipt), so a return or a write-off never
/// deadlocks with a sale. The lock is `FOR NO KEY UPDATE` (what the update
/// of `qty_remaining` takes anyway): it does not wait for the key-share
/// locks that foreign-key checks of other open transactions hold on the
/// batch (a return's lines name their batch). Unknown ids are left out of
/// the answer.
pub async fn lock_by_id<C: GenericClient + Sync>(tx: &C, ids: &[Uuid]) -> Result<Vec<LockedBatch>> {
    let ids: Vec<Uuid> = ids.to_vec();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, medicine_id, branch_id, supplier_id, batch_number, qty_remaining, unit_cost,
                  received_total, qty_received, is_deleted
           FROM batches
           WHERE id = ANY({ids})
           ORDER BY medicine_id, expiry_date, created_at, id
           FOR NO KEY UPDATE"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| LockedBatch {
            batch_id: r.get("id"),
            medicine_id: r.get("medicine_id"),
            branch_id: r.get("branch_id"),
            supplier_id: r.get("supplier_id"),
            batch_number: r.get("batch_number"),
            remaining: r.get("qty_remaining"),
            unit_cost: r.get("unit_cost"),
            received_total: r.get("received_total"),
            qty_received: r.get("qty_received"),
            is_deleted: r.get("is_deleted"),
        })
        .collect())
}

/// Locks every batch holding stock of `medicine` at a branch (any status),
/// oldest received first: what a stock count may adjust.
pub async fn lock_all<C: GenericClient + Sync>(
    tx: &C,
    branch_id: Uuid,
    medicine_id: Uuid,
) -> Result<Vec<Lot>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id, medicine_id, qty_remaining, unit_cost, expiry_date
           FROM batches
           WHERE branch_id = {branch_id} AND medicine_id = {medicine_id} AND NOT is_deleted
           ORDER BY created_at, id
           FOR UPDATE"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    Ok(rows.iter().map(lot).collect())
}

fn lot(r: &Row) -> Lot {
    Lot {
        batch_id: r.get("id"),
        medicine_id: r.get("medicine_id"),
        remaining: r.get("qty_remaining"),
        unit_cost: r.get("unit_cost"),
        expiry_date: r.get("expiry_date"),
    }
}

/// Live stock of a medicine: at one branch, or across the chain.
pub async fn on_hand<C: GenericClient + Sync>(
    c: &C,
    medicine_id: Uuid,
    branch_id: Option<Uuid>,
) -> Result<i64> {
    let q = Query::select()
        .expr(Expr::cust("coalesce(sum(qty_remaining), 0)::bigint"))
        .from(Table::Batches)
        .and_where(Expr::col("medicine_id").eq(medicine_id))
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(branch_id, |q, b| {
            q.and_where(Expr::col("branch_id").eq(b));
        })
        .to_owned();
    Ok(db::fetch_one(c, &q).await?.get(0))
}

/// The ledger invariants (stock, invoice counters, balances, returned units
/// within sold per sale line, credit note counters, one sale per accepted
/// pushed mutation); each returned line describes one violation.
/// Used by tests and the benchmark's after-run checks.
pub async fn invariant_violations<C: GenericClient + Sync>(c: &C) -> Result<Vec<String>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT 'batch ' || b.id || ' holds ' || b.qty_remaining || ' but its movements sum to '
                  || coalesce(m.total, 0)
           FROM batches b
           LEFT JOIN (SELECT batch_id, sum(qty)::bigint AS total FROM stock_movements GROUP BY batch_id) m
                  ON m.batch_id = b.id
           WHERE b.qty_remaining <> coalesce(m.total, 0) OR b.qty_remaining < 0
           UNION ALL
           SELECT 'branch ' || branch_id || ' medicine ' || medicine_id || ' has negative stock '
                  || sum(qty)
           FROM stock_movements GROUP BY branch_id, medicine_id HAVING sum(qty) < 0
           UNION ALL
           SELECT 'branch ' || branch_id || ' icv sequence has a gap or repeat: '
                  || count(*) || ' sales, max icv ' || max(icv)
           FROM sales GROUP BY branch_id
           HAVING count(*) <> max(icv) OR count(DISTINCT icv) <> count(*)
           UNION ALL
           SELECT 'branch ' || c.branch_id || ' counter at ' || c.last_icv || ' but last icv is '
                  || coalesce(s.top, 0)
           FROM invoice_counters c
           LEFT JOIN (SELECT branch_id, max(icv) AS top FROM sales GROUP BY branch_id) s
                  ON s.branch_id = c.branch_id
           WHERE c.last_icv <> coalesce(s.top, 0)
           UNION ALL
           SELECT 'customer ' || cu.id || ' balance ' || cu.current_balance
                  || ' differs from its ledger ' || coalesce(l.total, 0)
           FROM customers cu
           LEFT JOIN (SELECT customer_id,
                             sum(CASE WHEN transaction_type IN ('PAYMENT', 'REFUND') THEN -amount
                                      ELSE amount END) AS total
                      FROM customer_ledger GROUP BY customer_id) l ON l.customer_id = cu.id
           WHERE cu.current_balance <> coalesce(l.total, 0) OR cu.current_balance < 0
           UNION ALL
           SELECT 'sale line ' || i.id || ' sold ' || i.quantity || ' for ' || i.line_total
                  || ', has ' || i.returned_quantity || ' returned, but its returns hold '
                  || coalesce(r.held, 0) || ' for ' || coalesce(r.money, 0)
           FROM (SELECT id, quantity, returned_quantity, line_total FROM sale_items
                 WHERE returned_quantity > 0
                 UNION
                 SELECT i.id, i.quantity, i.returned_quantity, i.line_total
                 FROM sale_items i JOIN sale_return_items ri ON ri.sale_item_id = i.id) i
           LEFT JOIN (SELECT ri.sale_item_id, sum(ri.quantity)::bigint AS held,
                             sum(ri.line_total) AS money
                      FROM sale_return_items ri JOIN sale_returns r ON r.id = ri.return_id
                      WHERE r.status <> 'rejected' GROUP BY ri.sale_item_id) r ON r.sale_item_id = i.id
           WHERE i.returned_quantity <> coalesce(r.held, 0) OR i.returned_quantity > i.quantity
              OR coalesce(r.money, 0) > i.line_total
           UNION ALL
           SELECT 'branch ' || branch_id || ' cn_seq has a gap or repeat: '
                  || count(*) || ' credit notes, max cn_seq ' || max(cn_seq)
           FROM sale_returns WHERE status = 'issued' GROUP BY branch_id
           HAVING count(*) <> max(cn_seq) OR count(DISTINCT cn_seq) <> count(*)
           UNION ALL
           SELECT 'branch ' || c.branch_id || ' credit note counter at ' || c.last_cn_seq
                  || ' but last cn_seq is ' || coalesce(r.top, 0)
           FROM credit_note_counters c
           LEFT JOIN (SELECT branch_id, max(cn_seq) AS top FROM sale_returns
                      WHERE status = 'issued' GROUP BY branch_id) r ON r.branch_id = c.branch_id
           WHERE c.last_cn_seq <> coalesce(r.top, 0)
           UNION ALL
           SELECT 'device ' || p.device_id || ' mutation ' || p.client_mutation_id
                  || ' was accepted as a sale but has ' || count(s.id) || ' sales'
           FROM push_mutations p
           LEFT JOIN sales s ON s.device_id = p.device_id
                            AND s.client_mutation_id = p.client_mutation_id
           WHERE p.entity = 'sale' AND p.outcome = 'accepted'
           GROUP BY p.device_id, p.client_mutation_id HAVING count(s.id) <> 1
           UNION ALL
           SELECT 'sale ' || s.id || ' of device ' || s.device_id || ' has no accepted mutation'
           FROM sales s
           WHERE s.device_id IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM push_mutations p
               WHERE p.device_id = s.device_id AND p.client_mutation_id = s.client_mutation_id
                 AND p.outcome = 'accepted')"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    let mut broken: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
    broken.extend(crate::buying::invariant_violations(c).await?);
    broken.extend(crate::reports::summary_violations(c).await?);
    Ok(broken)
}
