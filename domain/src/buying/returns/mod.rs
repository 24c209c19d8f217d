//! Supplier returns and their debit notes: stock sent back to the supplier
//! it came from (expired, damaged, recalled, the wrong item), valued at
//! batch cost, with a debit note that settles that supplier's invoices.
//!
//! One transaction per return, on the branch's actor, all or nothing: the
//! batches are locked in the order sales lock them (so a return and a sale
//! of the same batches queue instead of deadlocking), every line is checked
//! (the branch's batch, received from this supplier, holding the units; a
//! batch's expiry or regulator status does not matter, so a recalled batch
//! goes back whatever its status), the branch's debit-note counter is
//! bumped (after the batches, as the ledger's lock order wants; a
//! rolled-back return gives its number back, so numbers are gapless), and
//! each line leaves through the stock ledger's conditional update as a
//! `RETURN_TO_SUPPLIER` movement with its change-log row, so tills see it.
//!
//! Where things are: `read` (one return, the list, the register of
//! supplier returns of controlled medicines), `settle` (a supplier payment
//! made with a debit note), `checks` (the debit notes' ledger invariants),
//! and here the request, its validation and the branch actor's command.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::Query;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::db::{self, Pool, Stmt};
use crate::error::{Error, Result};
use crate::stock::{self, Kind, Movement};
use crate::tables::Table;
use crate::wire;
use crate::{fiscal, input};
use actors::runtime::Command;

mod checks;
mod read;
pub mod settle;

pub use checks::invariant_violations;
pub use read::{get, list, register, ListFilter, SupplierReturnRegisterRow, REGISTER_NOTE};

/// Why stock goes back to its supplier.
pub const REASONS: [&str; 5] = ["expired", "damaged", "recalled", "wrong_item", "other"];

/// Most lines one return may carry.
pub const MAX_LINES: usize = 2000;

/// Default page size of the list.
pub const PAGE_SIZE: i64 = 20;

/// A supplier return as a client sends it. Quantities count base units.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct SupplierReturnRequest {
    /// The supplier the stock goes back to. Required.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub supplier_id: Option<Uuid>,
    /// Admins only: another branch (default the caller's).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub branch_id: Option<Uuid>,
    /// `expired`, `damaged`, `recalled`, `wrong_item` or `other`. Required.
    pub reason: Option<String>,
    /// The batches and base units sent back, each batch once.
    pub lines: Vec<SupplierReturnLineRequest>,
    pub notes: Option<String>,
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct SupplierReturnLineRequest {
    #[schema(value_type = String, format = Uuid)]
    pub batch_id: Uuid,
    /// Base units (never packs).
    #[schema(value_type = f64, minimum = 1)]
    #[serde(deserialize_with = "input::json_number")]
    pub quantity: Decimal,
    /// Not taken: a return counts base units, and a line naming a pack is
    /// refused rather than read as units.
    #[serde(default)]
    #[schema(ignore)]
    pub pack_id: Option<serde_json::Value>,
}

/// A validated return to record.
#[derive(Debug, Clone)]
pub struct NewSupplierReturn {
    pub supplier_id: Uuid,
    pub branch_id: Uuid,
    pub reason: String,
    /// `(batch, base units)`, in the order sent.
    pub lines: Vec<(Uuid, i32)>,
    pub notes: String,
    pub user_id: Uuid,
}

impl SupplierReturnRequest {
    /// Checks the shape of the request (400 naming the field); the
    /// supplier, the batches and what they hold are checked in the
    /// transaction.
    pub fn validate(self, branch_id: Uuid, user_id: Uuid) -> Result<NewSupplierReturn> {
        let supplier_id = self.supplier_id.ok_or_else(|| {
            Error::validation("supplier_id", "The field `supplier_id` is required.")
        })?;
        let reason = input::required_text(
            "reason",
            self.reason.as_deref().unwrap_or_default(),
            input::max::LABEL,
        )?
        .to_lowercase();
        if !REASONS.contains(&reason.as_str()) {
            return Err(Error::validation(
                "reason",
                "`reason` must be one of expired, damaged, recalled, wrong_item, other.",
            ));
        }
        if self.lines.is_empty() {
            return Err(Error::validation(
                "lines",
                "A supplier return needs at least one line.",
            ));
        }
        if self.lines.len() > MAX_LINES {
            return Err(Error::validation(
                "lines",
                format!("A supplier return may have at most {MAX_LINES} lines."),
            ));
        }
        let mut lines: Vec<(Uuid, i32)> = Vec::with_capacity(self.lines.len());
        for (i, line) in self.lines.iter().enumerate() {
            if line.pack_id.as_ref().is_some_and(|p| !p.is_null()) {
                return Err(Error::validation(
                    format!("lines[{i}].pack_id"),
                    "A supplier return counts base units: give `quantity` in units, without \
                     `pack_id`.",
                ));
            }
            let quantity = input::quantity(&format!("lines[{i}].quantity"), line.quantity)?;
            if lines.iter().any(|(b, _)| *b == line.batch_id) {
                return Err(Error::validation(
                    format!("lines[{i}].batch_id"),
                    "This batch is listed twice; give its whole quantity once.",
                ));
            }
            lines.push((line.batch_id, quantity));
        }
        let notes = input::multiline(
            "notes",
            self.notes.as_deref().unwrap_or_default(),
            input::max::NOTES,
        )?;
        Ok(NewSupplierReturn {
            supplier_id,
            branch_id,
            reason,
            lines,
            notes,
            user_id,
        })
    }
}

/// A supplier return and its debit note, as answered. Money as decimal
/// strings.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SupplierReturn {
    #[schema(value_type = String)]
    pub id: Uuid,
    /// `<BRANCH CODE>-DN-<8 digits>`, gapless per branch.
    pub debit_note_number: String,
    #[schema(value_type = String)]
    pub branch_id: Uuid,
    #[schema(value_type = String)]
    pub supplier_id: Uuid,
    pub supplier_name: String,
    /// `expired`, `damaged`, `recalled`, `wrong_item` or `other`.
    pub reason: String,
    pub notes: String,
    pub lines: Vec<SupplierReturnLine>,
    /// Σ lines' value: what the debit note is worth.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1250.00")]
    pub total_value: Decimal,
    /// What supplier payments have settled with the note so far.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "0.00")]
    pub used_value: Decimal,
    /// `total_value − used_value`: what the note can still settle.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String, example = "1250.00")]
    pub unused_value: Decimal,
    #[schema(value_type = String)]
    pub created_by: Uuid,
    pub created_by_name: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SupplierReturnLine {
    #[schema(value_type = String)]
    pub batch_id: Uuid,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    pub batch_number: String,
    /// Base units.
    pub quantity: i32,
    /// The batch's cost per base unit (4 places where it has them).
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub unit_cost: Decimal,
    /// The units' share of what the batch cost, to the cent.
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub value: Decimal,
    /// The medicine was controlled when returned (a register row).
    pub is_controlled: bool,
}

crate::stock::left::from_left_line!(SupplierReturnLine);

/// `POST /supplier-returns` through the branch's actor.
pub struct RecordSupplierReturn(pub NewSupplierReturn);

impl Command for RecordSupplierReturn {
    type Error = crate::Error;
    type Output = SupplierReturn;
    const NAME: &'static str = "record_supplier_return";

    async fn run(self, pool: Pool) -> Result<SupplierReturn> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let id = record(&tx, &self.0).await?;
        crate::db::commit(tx).await?;
        get(&client, id)
            .await?
            .ok_or_else(|| Error::internal("the supplier return just recorded vanished"))
    }
}

/// A line checked against its locked batch: the batch, the units and the
/// medicine's control flag and schedule.
struct Checked<'a> {
    batch: &'a stock::LockedBatch,
    quantity: i32,
    controlled: bool,
    schedule: String,
}

/// Records a supplier return in `tx` and returns its id. The caller commits.
pub async fn record<C: GenericClient + Sync>(tx: &C, r: &NewSupplierReturn) -> Result<Uuid> {
    if crate::branches::get(tx, r.branch_id).await?.is_none() {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    let supplier_id = r.supplier_id;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT name FROM suppliers WHERE id = {supplier_id} AND NOT is_deleted"
    );
    let supplier_name: String = db::raw_opt(tx, &q.sql, q.values)
        .await?
        .map(|row| row.get(0))
        .ok_or_else(|| Error::validation("supplier_id", "`supplier_id` names no supplier."))?;
    let ids: Vec<Uuid> = r.lines.iter().map(|(b, _)| *b).collect();
    let locked = stock::lock_by_id(tx, &ids).await?;
    let by_id: HashMap<Uuid, &stock::LockedBatch> =
        locked.iter().map(|b| (b.batch_id, b)).collect();
    let medicine_ids: Vec<Uuid> = locked.iter().map(|b| b.medicine_id).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT id, is_controlled, control_schedule FROM medicines WHERE id = ANY({medicine_ids})"
    );
    let medicines: HashMap<Uuid, (bool, String)> = db::raw_all(tx, &q.sql, q.values)
        .await?
        .iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2))))
        .collect();
    let mut lines: Vec<Checked<'_>> = Vec::with_capacity(r.lines.len());
    for (i, (batch_id, quantity)) in r.lines.iter().enumerate() {
        let batch = by_id
            .get(batch_id)
            .filter(|b| b.branch_id == r.branch_id && !b.is_deleted)
            .ok_or_else(|| {
                Error::validation(
                    format!("lines[{i}].batch_id"),
                    "This names no batch of the branch.",
                )
            })?;
        if batch.supplier_id != Some(supplier_id) {
            return Err(Error::validation(
                format!("lines[{i}].batch_id"),
                format!(
                    "Batch {} was not received from {supplier_name}: only a supplier's own \
                     batches go back to it.",
                    batch.batch_number
                ),
            ));
        }
        if *quantity > batch.remaining {
            return Err(Error::validation(
                format!("lines[{i}].quantity"),
                format!(
                    "Batch {} holds {} units: at most {} can be returned, not {}.",
                    batch.batch_number, batch.remaining, batch.remaining, quantity
                ),
            ));
        }
        let (controlled, schedule) = medicines
            .get(&batch.medicine_id)
            .cloned()
            .unwrap_or_default();
        lines.push(Checked {
            batch,
            quantity: *quantity,
            controlled,
            schedule,
        });
    }
    // A batch's units at cost, as the reports value them (their share of
    // what the batch cost, to the cent).
    let value = |l: &Checked<'_>| {
        let b = l.batch;
        stock::cost::value(l.quantity, b.unit_cost, b.received_total, b.qty_received)
    };
    let total: Decimal = lines.iter().map(value).sum();
    let (seq, code) = bump_counter(tx, r.branch_id).await?;
    let id = Uuid::now_v7();
    let header = Query::insert()
        .into_table(Table::SupplierReturns)
        .columns([
            "id",
            "branch_id",
            "supplier_id",
            "seq",
            "debit_note_number",
            "reason",
            "notes",
            "total_value",
            "created_by",
            "created_at",
        ])
        .values_panic([
            id.into(),
            r.branch_id.into(),
            supplier_id.into(),
            seq.into(),
            debit_note_number(&code, seq).into(),
            r.reason.clone().into(),
            r.notes.clone().into(),
            total.into(),
            r.user_id.into(),
            Utc::now().into(),
        ])
        .to_owned();
    let mut items = Query::insert()
        .into_table(Table::SupplierReturnItems)
        .columns([
            "id",
            "supplier_return_id",
            "line_no",
            "batch_id",
            "medicine_id",
            "quantity",
            "unit_cost",
            "value",
            "is_controlled",
            "control_schedule",
        ])
        .to_owned();
    for (n, l) in lines.iter().enumerate() {
        items.values_panic([
            Uuid::now_v7().into(),
            id.into(),
            (n as i32).into(),
            l.batch.batch_id.into(),
            l.batch.medicine_id.into(),
            l.quantity.into(),
            l.batch.unit_cost.into(),
            value(l).into(),
            l.controlled.into(),
            l.schedule.clone().into(),
        ]);
    }
    db::pipeline(tx, &[Stmt::of(&header), Stmt::of(&items)]).await?;
    // In the batches' lock order: each a conditional update, a movement
    // and the batch's change-log row.
    for b in &locked {
        let Some(l) = lines.iter().find(|l| l.batch.batch_id == b.batch_id) else {
            continue;
        };
        let out = Movement {
            batch_id: b.batch_id,
            delta: -l.quantity,
            kind: Kind::ReturnToSupplier,
            reference: Some(("supplier_return", id)),
            user_id: r.user_id,
        };
        stock::apply(tx, out).await?;
    }
    // The stock decrease for the tax authority, with the return.
    let gone: Vec<fiscal::payload::StockLine> = lines
        .iter()
        .map(|l| fiscal::payload::StockLine {
            medicine_id: l.batch.medicine_id,
            quantity: l.quantity,
            unit_cost: l.batch.unit_cost,
        })
        .collect();
    let remarks = format!("{} to {supplier_name}", debit_note_number(&code, seq));
    let decrease =
        fiscal::payload::stock_decrease(id, r.branch_id, "returned", &remarks, Utc::now(), &gone);
    fiscal::outbox::enqueue(tx, &[decrease]).await?;
    Ok(id)
}

/// `<BRANCH CODE>-DN-<seq, 8 digits>`.
pub fn debit_note_number(branch_code: &str, seq: i64) -> String {
    format!("{branch_code}-DN-{seq:08}")
}

/// Bumps the branch's debit-note counter in `tx` (creating it at 0 first)
/// and answers the new seq and the branch's code. The row stays locked
/// until `tx` ends, so concurrent returns of a branch number one after the
/// other, and a rolled-back return gives its number back.
async fn bump_counter<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<(i64, String)> {
    let ensure = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO debit_note_counters (branch_id, last_seq)
           VALUES ({branch_id}, 0) ON CONFLICT (branch_id) DO NOTHING"#
    );
    db::raw_all(tx, &ensure.sql, ensure.values).await?;
    let bump = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE debit_note_counters c SET last_seq = c.last_seq + 1
           FROM branches b
           WHERE c.branch_id = {branch_id} AND b.id = c.branch_id
           RETURNING c.last_seq, b.code"#
    );
    let row = db::raw_opt(tx, &bump.sql, bump.values)
        .await?
        .ok_or_else(|| Error::internal("the debit note counter row is missing"))?;
    Ok((row.get(0), row.get(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(lines: serde_json::Value) -> SupplierReturnRequest {
        serde_json::from_value(serde_json::json!({
            "supplier_id": Uuid::now_v7(), "reason": "Expired", "lines": lines,
        }))
        .unwrap()
    }

    fn field(e: Error) -> String {
        match e {
            Error::Validation { field, .. } => field.unwrap_or_default(),
            other => panic!("not a validation error: {other}"),
        }
    }

    #[test]
    fn a_debit_note_number_has_eight_digits() {
        assert_eq!(debit_note_number("KLA", 7), "KLA-DN-00000007");
    }

    #[test]
    fn lines_are_whole_base_units_of_distinct_batches() {
        let (branch, user) = (Uuid::now_v7(), Uuid::now_v7());
        let b = Uuid::now_v7();
        let ok = request(serde_json::json!([{"batch_id": b, "quantity": 3}]))
            .validate(branch, user)
            .unwrap();
        assert_eq!(ok.reason, "expired");
        assert_eq!(ok.lines, vec![(b, 3)]);
        let e = request(serde_json::json!([{"batch_id": b, "quantity": 0}]))
            .validate(branch, user)
            .unwrap_err();
        assert_eq!(field(e), "lines[0].quantity");
        let twice =
            serde_json::json!([{"batch_id": b, "quantity": 1}, {"batch_id": b, "quantity": 1}]);
        let e = request(twice).validate(branch, user).unwrap_err();
        assert_eq!(field(e), "lines[1].batch_id");
        let packed = serde_json::json!([{"batch_id": b, "quantity": 1, "pack_id": Uuid::now_v7()}]);
        let e = request(packed).validate(branch, user).unwrap_err();
        assert_eq!(field(e), "lines[0].pack_id");
        let e = request(serde_json::json!([]))
            .validate(branch, user)
            .unwrap_err();
        assert_eq!(field(e), "lines");
    }
}
