//! Supplier invoices matched three ways: what was ordered (the order
//! line), what was received (the goods received line) and what is billed
//! (the invoice line).
//!
//! An invoice with `lines` bills goods received lines of its supplier and
//! branch. A line bills at most what its receipt line received less what
//! other invoices already billed: the receipt line's `quantity_invoiced`
//! moves by a conditional update under its row lock in the invoice's
//! transaction, and a CHECK keeps it within `quantity_received`, so twenty
//! invoices at once never bill more than was received. The invoice total
//! must equal its lines plus its charges to the cent.
//!
//! The invoice is `matched`, or `on_hold` when a line's price differs from
//! the receipt's by more than `settings.invoice_price_tolerance_percent`, or
//! a line bills a note not yet posted (billed before it was received). An
//! invoice on hold takes no payment (409 `invoice_on_hold`) until a branch
//! manager or admin other than its creator releases it with a reason.
//!
//! Quantities and prices are in the units the receipt line was received in
//! (packs when it was received by pack), as the supplier bills them.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::buying::received::{Charge, ReceiptChargeRequest};
use crate::db;
use crate::error::{Error, Result};
use crate::{input, wire};

/// Most lines one invoice may bill.
pub const MAX_LINES: usize = 200;
/// Longest release reason.
pub const MAX_REASON: usize = 1000;

/// One billed line, as the supplier's invoice says it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct InvoiceLineRequest {
    /// A line of a goods received note of this supplier and branch.
    #[schema(value_type = String, format = Uuid)]
    pub goods_received_line_id: Uuid,
    /// Units as received (packs when received by pack); whole, above zero.
    #[schema(value_type = f64, minimum = 1)]
    #[serde(deserialize_with = "input::json_number")]
    pub quantity: Decimal,
    /// Price of one unit as received, at most 2 decimals.
    #[schema(value_type = f64, minimum = 0)]
    pub unit_cost: Decimal,
}

/// An invoice's lines and charges, checked for their shape.
#[derive(Debug, Clone, Default)]
pub struct Billing {
    /// `(receipt line, quantity, unit cost)`, in the order sent.
    pub lines: Vec<(Uuid, i32, Decimal)>,
    pub charges: Vec<(String, Decimal)>,
}

impl Billing {
    /// Σ quantity × unit cost (each line to the cent) + Σ charges.
    pub fn total(&self) -> Decimal {
        let lines: Decimal = self.lines.iter().map(|(_, q, c)| line_total(*q, *c)).sum();
        lines + self.charges_total()
    }

    pub fn charges_total(&self) -> Decimal {
        self.charges.iter().map(|(_, a)| *a).sum()
    }
}

fn line_total(quantity: i32, unit_cost: Decimal) -> Decimal {
    wire::two_places(Decimal::from(quantity) * unit_cost)
}

/// Checks the shape of `lines` and `charges` and that `total_amount` is
/// their sum (400 naming the field).
pub fn billing(
    lines: Vec<InvoiceLineRequest>,
    charges: Vec<ReceiptChargeRequest>,
    total_amount: Decimal,
) -> Result<Billing> {
    if lines.is_empty() {
        return Err(Error::validation(
            "lines",
            "`lines` must bill at least one receipt line (leave it out for an unmatched invoice).",
        ));
    }
    if lines.len() > MAX_LINES {
        return Err(Error::validation(
            "lines",
            format!("An invoice may bill at most {MAX_LINES} lines."),
        ));
    }
    let mut b = Billing::default();
    for (i, l) in lines.into_iter().enumerate() {
        let quantity = input::quantity(&format!("lines[{i}].quantity"), l.quantity)?;
        let unit_cost = input::amount(&format!("lines[{i}].unit_cost"), l.unit_cost)?;
        if b.lines
            .iter()
            .any(|(id, _, _)| *id == l.goods_received_line_id)
        {
            return Err(Error::validation(
                format!("lines[{i}].goods_received_line_id"),
                "This receipt line is billed twice; bill its whole quantity once.",
            ));
        }
        b.lines
            .push((l.goods_received_line_id, quantity, unit_cost));
    }
    b.charges = charges
        .into_iter()
        .enumerate()
        .map(|(i, c)| c.validate(i))
        .collect::<Result<_>>()?;
    let expected = b.total();
    if wire::two_places(total_amount) != expected {
        return Err(Error::validation(
            "total_amount",
            format!(
                "`total_amount` is {}, but the lines and charges come to {expected}.",
                wire::two_places(total_amount)
            ),
        ));
    }
    Ok(b)
}

/// A receipt line as locked for billing.
struct Receipt {
    grn_number: String,
    posted: bool,
    supplier_id: Uuid,
    branch_id: Uuid,
    pack_units: i32,
    unit_cost: Decimal,
    left: i32,
    order_line: Option<Uuid>,
}

/// The invoice's parties, for the receipt lines it bills.
pub struct Invoice {
    pub id: Uuid,
    pub supplier_id: Uuid,
    pub branch_id: Uuid,
}

/// Bills `b` for invoice `inv` in `tx`: checks each receipt line, raises
/// what they billed, writes the invoice's lines and charges and answers
/// its match status (`matched` or `on_hold`).
pub async fn bill<C: GenericClient + Sync>(tx: &C, inv: &Invoice, b: &Billing) -> Result<String> {
    let receipts = lock_receipts(tx, b).await?;
    let tolerance = tolerance(tx).await?;
    let mut rows = Vec::with_capacity(b.lines.len());
    for (i, (id, quantity, unit_cost)) in b.lines.iter().enumerate() {
        let r = receipts
            .get(id)
            .filter(|r| r.supplier_id == inv.supplier_id && r.branch_id == inv.branch_id)
            .ok_or_else(|| {
                Error::validation(
                    format!("lines[{i}].goods_received_line_id"),
                    "`goods_received_line_id` names no goods received line of this supplier \
                     and branch.",
                )
            })?;
        let base = quantity.saturating_mul(r.pack_units);
        if base > r.left {
            return Err(Error::validation(
                format!("lines[{i}].quantity"),
                format!(
                    "Receipt line of {} has {} left to bill; this line bills {quantity}.",
                    r.grn_number,
                    r.left / r.pack_units
                ),
            ));
        }
        rows.push(Billed {
            receipt: *id,
            quantity: *quantity,
            base,
            unit_cost: *unit_cost,
            hold: hold_reason(r, *unit_cost, tolerance),
        });
    }
    raise_billed(tx, &receipts, &rows).await?;
    insert_lines(tx, inv.id, &rows, &receipts).await?;
    insert_charges(tx, inv.id, &b.charges).await?;
    let status = if rows.iter().any(|r| r.hold.is_some()) {
        "on_hold"
    } else {
        "matched"
    };
    let (id, charges) = (inv.id, b.charges_total());
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE supplier_invoices SET match_status = {status}, charges_total = {charges}
            WHERE id = {id}"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(status.to_owned())
}

/// A line to write.
struct Billed {
    receipt: Uuid,
    quantity: i32,
    base: i32,
    unit_cost: Decimal,
    hold: Option<String>,
}

/// Why a billed line holds its invoice, if it does.
fn hold_reason(r: &Receipt, unit_cost: Decimal, tolerance: Decimal) -> Option<String> {
    if !r.posted {
        return Some(format!(
            "Billed before it was received: note {} is not posted.",
            r.grn_number
        ));
    }
    let differs = match percent_off(unit_cost, r.unit_cost) {
        Some(p) => p.abs() > tolerance,
        None => unit_cost > Decimal::ZERO,
    };
    differs.then(|| {
        format!(
            "Billed at {} a unit; received at {} (tolerance {tolerance}%).",
            wire::two_places(unit_cost),
            wire::cost_places(r.unit_cost)
        )
    })
}

/// How far `billed` is from `received`, in percent of `received` (2
/// places); `None` when nothing was paid on receipt.
pub fn percent_off(billed: Decimal, received: Decimal) -> Option<Decimal> {
    (!received.is_zero())
        .then(|| wire::two_places((billed - received) * Decimal::ONE_HUNDRED / received))
}

async fn tolerance<C: GenericClient + Sync>(tx: &C) -> Result<Decimal> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT COALESCE((SELECT invoice_price_tolerance_percent FROM settings LIMIT 1), 2)"#
    );
    Ok(db::raw_opt(tx, &q.sql, q.values)
        .await?
        .map_or(Decimal::from(2), |r| r.get(0)))
}

/// Locks the receipt lines billed, in id order, and reads them.
async fn lock_receipts<C: GenericClient + Sync>(
    tx: &C,
    b: &Billing,
) -> Result<HashMap<Uuid, Receipt>> {
    let mut ids: Vec<Uuid> = b.lines.iter().map(|l| l.0).collect();
    ids.sort();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT l.id, n.grn_number, n.status = 'posted', n.supplier_id, n.branch_id,
                  l.pack_units, l.unit_cost, l.quantity_received - l.quantity_invoiced,
                  l.purchase_order_line_id
             FROM goods_received_lines l JOIN goods_received_notes n ON n.id = l.note_id
            WHERE l.id = ANY({ids}) ORDER BY l.id FOR UPDATE OF l"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get(0),
                Receipt {
                    grn_number: r.get(1),
                    posted: r.get(2),
                    supplier_id: r.get(3),
                    branch_id: r.get(4),
                    pack_units: r.get(5),
                    unit_cost: r.get(6),
                    left: r.get(7),
                    order_line: r.get(8),
                },
            )
        })
        .collect())
}

/// Raises what the receipt lines (and, for posted notes, their order
/// lines) have billed: two set-based updates.
async fn raise_billed<C: GenericClient + Sync>(
    tx: &C,
    receipts: &HashMap<Uuid, Receipt>,
    rows: &[Billed],
) -> Result<()> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.receipt).collect();
    let qty: Vec<i32> = rows.iter().map(|r| r.base).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE goods_received_lines l SET quantity_invoiced = l.quantity_invoiced + v.qty
             FROM unnest({ids}::uuid[], {qty}::int[]) AS v(id, qty)
            WHERE l.id = v.id"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    let (orders, order_qty): (Vec<Uuid>, Vec<i32>) = rows
        .iter()
        .filter_map(|r| {
            let receipt = receipts.get(&r.receipt)?;
            let order_line = receipt.order_line.filter(|_| receipt.posted)?;
            Some((order_line, r.base))
        })
        .unzip();
    if !orders.is_empty() {
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"UPDATE purchase_order_lines l SET quantity_invoiced = l.quantity_invoiced + v.qty
                 FROM (SELECT id, sum(qty)::int AS qty
                         FROM unnest({orders}::uuid[], {order_qty}::int[]) AS u(id, qty)
                        GROUP BY id) AS v
                WHERE l.id = v.id"#
        );
        db::raw_all(tx, &q.sql, q.values).await?;
    }
    Ok(())
}

async fn insert_lines<C: GenericClient + Sync>(
    tx: &C,
    invoice_id: Uuid,
    rows: &[Billed],
    receipts: &HashMap<Uuid, Receipt>,
) -> Result<()> {
    let mut q = sea_query::Query::insert()
        .into_table(crate::tables::Table::SupplierInvoiceLines)
        .columns([
            "id",
            "invoice_id",
            "line_no",
            "goods_received_line_id",
            "quantity",
            "base_quantity",
            "unit_cost",
            "line_total",
            "received_unit_cost",
            "received",
            "hold_reason",
        ])
        .to_owned();
    for (i, r) in rows.iter().enumerate() {
        let receipt = receipts
            .get(&r.receipt)
            .ok_or_else(|| Error::internal("a billed receipt line is missing"))?;
        q.values_panic([
            Uuid::now_v7().into(),
            invoice_id.into(),
            (i as i32 + 1).into(),
            r.receipt.into(),
            r.quantity.into(),
            r.base.into(),
            r.unit_cost.into(),
            line_total(r.quantity, r.unit_cost).into(),
            receipt.unit_cost.into(),
            receipt.posted.into(),
            r.hold.clone().into(),
        ]);
    }
    db::execute(tx, &q).await?;
    Ok(())
}

async fn insert_charges<C: GenericClient + Sync>(
    tx: &C,
    invoice_id: Uuid,
    charges: &[(String, Decimal)],
) -> Result<()> {
    if charges.is_empty() {
        return Ok(());
    }
    let mut q = sea_query::Query::insert()
        .into_table(crate::tables::Table::SupplierInvoiceCharges)
        .columns(["id", "invoice_id", "line_no", "kind", "amount"])
        .to_owned();
    for (i, (kind, amount)) in charges.iter().enumerate() {
        q.values_panic([
            Uuid::now_v7().into(),
            invoice_id.into(),
            (i as i32 + 1).into(),
            kind.clone().into(),
            (*amount).into(),
        ]);
    }
    db::execute(tx, &q).await?;
    Ok(())
}

/// A billed line as answered, with its difference from the receipt.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MatchedLine {
    #[schema(value_type = String)]
    pub goods_received_line_id: Uuid,
    #[schema(value_type = String)]
    pub goods_received_note_id: Uuid,
    pub grn_number: String,
    #[schema(value_type = String)]
    pub medicine_id: Uuid,
    pub medicine_name: String,
    /// Units as received (packs when received by pack).
    pub quantity: i32,
    pub base_quantity: i32,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub unit_cost: Decimal,
    #[serde(serialize_with = "wire::money_str")]
    #[schema(value_type = String)]
    pub line_total: Decimal,
    /// The receipt's price of one unit as received.
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub received_unit_cost: Decimal,
    /// `unit_cost − received_unit_cost`.
    #[serde(serialize_with = "wire::cost_str")]
    #[schema(value_type = String)]
    pub price_difference: Decimal,
    /// The difference in percent of the receipt's price (null when the
    /// receipt cost nothing).
    #[serde(serialize_with = "wire::money_str_opt")]
    #[schema(value_type = Option<String>)]
    pub price_difference_percent: Option<Decimal>,
    /// Whether the goods had been received (the note posted) when billed.
    pub received: bool,
    /// Why this line holds the invoice; null when it does not.
    pub hold_reason: Option<String>,
}

/// The billed lines and charges of `invoices`, by invoice (two statements).
pub async fn lines_of<C: GenericClient + Sync>(
    c: &C,
    invoices: &[Uuid],
) -> Result<HashMap<Uuid, (Vec<MatchedLine>, Vec<Charge>)>> {
    let mut by_invoice: HashMap<Uuid, (Vec<MatchedLine>, Vec<Charge>)> = HashMap::new();
    let ids = invoices.to_vec();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT il.*, n.id AS note_id, n.grn_number, l.medicine_id, m.name AS medicine_name
             FROM supplier_invoice_lines il
             JOIN goods_received_lines l ON l.id = il.goods_received_line_id
             JOIN goods_received_notes n ON n.id = l.note_id
             JOIN medicines m ON m.id = l.medicine_id
            WHERE il.invoice_id = ANY({ids}) ORDER BY il.invoice_id, il.line_no"#
    );
    for r in db::raw_all(c, &q.sql, q.values).await? {
        let entry = by_invoice.entry(r.get("invoice_id")).or_default();
        entry.0.push(matched_line(&r));
    }
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT invoice_id, kind, amount FROM supplier_invoice_charges
            WHERE invoice_id = ANY({ids}) ORDER BY invoice_id, line_no"#
    );
    for r in db::raw_all(c, &q.sql, q.values).await? {
        let entry = by_invoice.entry(r.get(0)).or_default();
        entry.1.push(Charge {
            kind: r.get(1),
            amount: r.get(2),
        });
    }
    Ok(by_invoice)
}

fn matched_line(r: &Row) -> MatchedLine {
    let unit_cost: Decimal = r.get("unit_cost");
    let received_unit_cost: Decimal = r.get("received_unit_cost");
    MatchedLine {
        goods_received_line_id: r.get("goods_received_line_id"),
        goods_received_note_id: r.get("note_id"),
        grn_number: r.get("grn_number"),
        medicine_id: r.get("medicine_id"),
        medicine_name: r.get("medicine_name"),
        quantity: r.get("quantity"),
        base_quantity: r.get("base_quantity"),
        unit_cost,
        line_total: r.get("line_total"),
        received_unit_cost,
        price_difference: unit_cost - received_unit_cost,
        price_difference_percent: percent_off(unit_cost, received_unit_cost),
        received: r.get("received"),
        hold_reason: r.get("hold_reason"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn a_price_is_off_by_its_share_of_the_receipts_price() {
        assert_eq!(percent_off(d("2.10"), d("2.00")), Some(d("5.00")));
        assert_eq!(percent_off(d("1.96"), d("2.00")), Some(d("-2.00")));
        assert_eq!(percent_off(d("1.00"), d("3.0000")), Some(d("-66.67")));
        assert_eq!(percent_off(d("1.00"), d("0")), None);
    }
}

/// `POST /supplier-finance/invoices/{id}/release` as a client sends it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ReleaseRequest {
    /// Why the invoice may be paid as billed. Required.
    pub reason: Option<String>,
}

/// Releases an invoice on hold for payment, for `acting` (a branch manager
/// or admin, checked by the caller) who did not record it: 404 for an
/// invoice of another branch, 403 for its creator, 409 unless it is on
/// hold. The release and its reason go to the audit log.
pub async fn release(
    pool: &crate::db::Pool,
    acting: &crate::Acting,
    id: Uuid,
    body: ReleaseRequest,
) -> Result<super::invoices::SupplierInvoice> {
    let reason = input::required_multiline(
        "reason",
        body.reason.as_deref().unwrap_or_default(),
        MAX_REASON,
    )?;
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT branch_id, created_by, match_status FROM supplier_invoices
            WHERE id = {id} FOR UPDATE"#
    );
    let row = db::raw_opt(&tx, &q.sql, q.values)
        .await?
        .filter(|r| acting.can_see_branch(r.get(0)))
        .ok_or_else(|| Error::not_found("Supplier invoice not found"))?;
    let (created_by, status): (Uuid, String) = (row.get(1), row.get(2));
    if status != "on_hold" {
        return Err(Error::conflict(format!(
            "This invoice is {status}; only an invoice on hold is released."
        )));
    }
    if created_by == acting.user_id {
        return Err(Error::forbidden(
            "An invoice on hold is released by someone other than who recorded it.",
        ));
    }
    let user = acting.user_id;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE supplier_invoices
              SET match_status = 'released', released_by = {user}, released_at = now(),
                  release_reason = {reason}, updated_at = now()
            WHERE id = {id}"#
    );
    db::raw_all(&tx, &q.sql, q.values).await?;
    let entry = crate::audit::Entry {
        actor_id: Some(user),
        action: "supplier_invoice.release",
        entity_type: "supplier_invoice",
        entity_id: id.to_string(),
        before: Some(serde_json::json!({"match_status": "on_hold"})),
        after: Some(serde_json::json!({"match_status": "released", "reason": reason})),
    };
    crate::audit::write_for(&tx, Some(row.get(0)), entry).await?;
    let invoice = super::invoices::get(&tx, id)
        .await?
        .ok_or_else(|| Error::internal("the released invoice vanished"))?;
    crate::db::commit(tx).await?;
    Ok(invoice)
}
