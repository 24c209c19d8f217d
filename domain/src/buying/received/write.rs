//! Drafting a goods received note: the parties, packs and order lines are
//! checked, the line values and the landed cost worked out, and the note
//! numbered from its branch's counter, in one transaction. Nothing moves
//! stock until the note is posted.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use rust_decimal::{Decimal, RoundingStrategy};
use sea_query::Query;
use uuid::Uuid;

use super::landed::{self, Weight};
use super::request::{NewLine, NewNote};
use super::{read, GoodsReceivedNote};
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::stock::{cost, Batch};
use crate::tables::Table;
use crate::{input, wire};

/// Order states a delivery may be received against.
pub const OPEN_ORDER_STATES: [&str; 2] = ["sent", "partially_received"];

/// Records `note` as a draft and answers it.
pub async fn create(pool: &Pool, note: NewNote) -> Result<GoodsReceivedNote> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    check_parties(&tx, &note).await?;
    let units = pack_units(&tx, &note.lines).await?;
    check_order_lines(&tx, &note).await?;
    let priced = price(&note, &units)?;
    let (seq, code) = next_number(&tx, note.branch_id).await?;
    let id = Uuid::now_v7();
    insert(
        &tx,
        id,
        seq,
        &format!("{code}-GRN-{seq:06}"),
        &note,
        &priced,
    )
    .await?;
    let answer = read::get(&tx, id)
        .await?
        .ok_or_else(|| Error::internal("the note just drafted vanished"))?;
    crate::db::commit(tx).await?;
    Ok(answer)
}

/// The supplier, the branch and the order the note names exist (400 naming
/// the field otherwise).
async fn check_parties<C: GenericClient + Sync>(tx: &C, note: &NewNote) -> Result<()> {
    let (supplier_id, branch_id, order_id) =
        (note.supplier_id, note.branch_id, note.purchase_order_id);
    let open = OPEN_ORDER_STATES.map(str::to_owned).to_vec();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT EXISTS (SELECT 1 FROM suppliers WHERE id = {supplier_id} AND NOT is_deleted),
                  EXISTS (SELECT 1 FROM branches WHERE id = {branch_id} AND NOT is_deleted),
                  (SELECT o.supplier_id = {supplier_id} AND o.branch_id = {branch_id}
                          AND o.status = ANY({open})
                     FROM purchase_orders o WHERE o.id = {order_id})"#
    );
    let row = db::raw_opt(tx, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::internal("the parties query answered nothing"))?;
    if !row.get::<_, bool>(0) {
        return Err(Error::validation(
            "supplier_id",
            "`supplier_id` names no supplier.",
        ));
    }
    if !row.get::<_, bool>(1) {
        return Err(Error::validation(
            "branch_id",
            "`branch_id` names no branch.",
        ));
    }
    if order_id.is_some() && row.get::<_, Option<bool>>(2) != Some(true) {
        return Err(Error::validation(
            "purchase_order_id",
            "`purchase_order_id` names no open order (sent or partly received) of this \
             supplier and branch.",
        ));
    }
    Ok(())
}

/// Each line's base units per pack, checking its medicine and pack (400
/// naming the line's field).
async fn pack_units<C: GenericClient + Sync>(tx: &C, lines: &[NewLine]) -> Result<Vec<i32>> {
    let medicines: Vec<Uuid> = lines.iter().map(|l| l.medicine_id).collect();
    let packs: Vec<Uuid> = lines.iter().filter_map(|l| l.pack_id).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT 'm' AS what, id, id AS medicine_id, 1 AS units FROM medicines
            WHERE id = ANY({medicines}) AND NOT is_deleted
           UNION ALL
           SELECT 'p', id, medicine_id, units FROM medicine_packs
            WHERE id = ANY({packs}) AND is_active"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    let mut known_medicines = Vec::new();
    let mut known_packs: HashMap<Uuid, (Uuid, i32)> = HashMap::new();
    for r in &rows {
        if r.get::<_, &str>(0) == "m" {
            known_medicines.push(r.get::<_, Uuid>(1));
        } else {
            known_packs.insert(r.get(1), (r.get(2), r.get(3)));
        }
    }
    let mut units = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        if !known_medicines.contains(&l.medicine_id) {
            return Err(Error::validation(
                format!("lines[{i}].medicine_id"),
                "`medicine_id` names no medicine.",
            ));
        }
        units.push(match l.pack_id {
            None => 1,
            Some(p) => match known_packs.get(&p) {
                Some((m, n)) if *m == l.medicine_id => *n,
                _ => {
                    return Err(Error::validation(
                        format!("lines[{i}].pack_id"),
                        "`pack_id` names no active pack of the line's medicine.",
                    ))
                }
            },
        });
    }
    Ok(units)
}

/// Each line's order line belongs to an open order of the note's supplier
/// and branch, for the same medicine (400 naming it otherwise).
async fn check_order_lines<C: GenericClient + Sync>(tx: &C, note: &NewNote) -> Result<()> {
    let ids: Vec<Uuid> = note
        .lines
        .iter()
        .filter_map(|l| l.purchase_order_line_id)
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let (supplier_id, branch_id) = (note.supplier_id, note.branch_id);
    let open = OPEN_ORDER_STATES.map(str::to_owned).to_vec();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT l.id, l.medicine_id FROM purchase_order_lines l
             JOIN purchase_orders o ON o.id = l.purchase_order_id
            WHERE l.id = ANY({ids}) AND o.supplier_id = {supplier_id}
              AND o.branch_id = {branch_id} AND o.status = ANY({open})"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    let found: HashMap<Uuid, Uuid> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    for (i, l) in note.lines.iter().enumerate() {
        let Some(line_id) = l.purchase_order_line_id else {
            continue;
        };
        match found.get(&line_id) {
            Some(m) if *m == l.medicine_id => {}
            Some(_) => {
                return Err(Error::validation(
                    format!("lines[{i}].medicine_id"),
                    "The order line is for another medicine.",
                ))
            }
            None => {
                return Err(Error::validation(
                    format!("lines[{i}].purchase_order_line_id"),
                    "`purchase_order_line_id` names no line of an open order (sent or partly \
                     received) of this supplier and branch.",
                ))
            }
        }
    }
    Ok(())
}

/// A line with its base units and money worked out.
pub(super) struct Priced {
    pub units: i32,
    pub received: i32,
    pub rejected: i32,
    pub line_value: Decimal,
    pub charge_share: Decimal,
    pub landed_unit_cost: Decimal,
}

/// Base units, line values, charge shares and landed unit costs.
fn price(note: &NewNote, units: &[i32]) -> Result<Vec<Priced>> {
    let mut priced = Vec::with_capacity(note.lines.len());
    for (i, (l, n)) in note.lines.iter().zip(units).enumerate() {
        let base = |q: i32, name: &str| -> Result<i32> {
            let b = i64::from(q) * i64::from(*n);
            i32::try_from(b)
                .ok()
                .filter(|b| i64::from(*b) <= input::MAX_QUANTITY)
                .ok_or_else(|| {
                    Error::validation(
                        format!("lines[{i}].{name}"),
                        format!("{q} packs of {n} exceed what one line takes."),
                    )
                })
        };
        let line_value = wire::two_places(Decimal::from(l.received) * l.unit_cost);
        if line_value >= Decimal::from(input::MAX_AMOUNT) {
            return Err(Error::validation(
                format!("lines[{i}].unit_cost"),
                "The line's value is beyond what one line takes.",
            ));
        }
        priced.push(Priced {
            units: *n,
            received: base(l.received, "quantity_received")?,
            rejected: base(l.rejected, "quantity_rejected")?,
            line_value,
            charge_share: Decimal::ZERO,
            landed_unit_cost: Decimal::ZERO,
        });
    }
    let charges: Decimal = note.charges.iter().map(|(_, a)| *a).sum();
    let weights: Vec<Weight> = priced
        .iter()
        .map(|p| Weight {
            value: p.line_value,
            units: p.received,
        })
        .collect();
    let shares = landed::spread(charges, &weights);
    for ((p, share), l) in priced.iter_mut().zip(shares).zip(&note.lines) {
        p.charge_share = wire::two_places(share);
        p.landed_unit_cost = landed_unit_cost(p, l.unit_cost);
    }
    Ok(priced)
}

/// The landed cost per base unit, 4 places: the landed total over the base
/// units accepted (the pack cost spread over its units when none were).
fn landed_unit_cost(p: &Priced, unit_cost: Decimal) -> Decimal {
    if p.received == 0 {
        return cost::per_unit(unit_cost, p.units);
    }
    let mut c = ((p.line_value + p.charge_share) / Decimal::from(p.received))
        .round_dp_with_strategy(cost::PLACES, RoundingStrategy::MidpointAwayFromZero);
    c.rescale(cost::PLACES);
    c
}

/// Takes the branch's next note number; the counter row stays locked until
/// the transaction ends, so concurrent notes queue for distinct numbers.
async fn next_number<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<(i64, String)> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH bumped AS (
             INSERT INTO goods_received_counters AS c (branch_id, last_seq)
             VALUES ({branch_id}, 1)
             ON CONFLICT (branch_id) DO UPDATE SET last_seq = c.last_seq + 1
             RETURNING last_seq)
           SELECT bumped.last_seq, b.code FROM bumped, branches b WHERE b.id = {branch_id}"#
    );
    let row = db::raw_opt(tx, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::internal("the note counter answered nothing"))?;
    Ok((row.get(0), row.get(1)))
}

async fn insert<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    seq: i64,
    number: &str,
    note: &NewNote,
    priced: &[Priced],
) -> Result<()> {
    let lines_total: Decimal = priced.iter().map(|p| p.line_value).sum();
    let charges_total: Decimal = note.charges.iter().map(|(_, a)| *a).sum();
    let header = Query::insert()
        .into_table(Table::GoodsReceivedNotes)
        .columns([
            "id",
            "branch_id",
            "supplier_id",
            "purchase_order_id",
            "seq",
            "grn_number",
            "delivery_reference",
            "lines_total",
            "charges_total",
            "total",
            "created_by",
        ])
        .values_panic([
            id.into(),
            note.branch_id.into(),
            note.supplier_id.into(),
            note.purchase_order_id.into(),
            seq.into(),
            number.into(),
            note.delivery_reference.clone().into(),
            lines_total.into(),
            charges_total.into(),
            (lines_total + charges_total).into(),
            note.user_id.into(),
        ])
        .to_owned();
    db::execute(tx, &header).await?;
    insert_body(tx, id, note, priced).await
}

/// Writes a note's lines and charges (one statement each).
async fn insert_body<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    note: &NewNote,
    priced: &[Priced],
) -> Result<()> {
    db::execute(tx, &lines_stmt(id, note, priced)).await?;
    if !note.charges.is_empty() {
        let mut charges = Query::insert()
            .into_table(Table::GoodsReceivedCharges)
            .columns(["id", "note_id", "line_no", "kind", "amount"])
            .to_owned();
        for (i, (kind, amount)) in note.charges.iter().enumerate() {
            charges.values_panic([
                Uuid::now_v7().into(),
                id.into(),
                (i as i32 + 1).into(),
                kind.clone().into(),
                (*amount).into(),
            ]);
        }
        db::execute(tx, &charges).await?;
    }
    Ok(())
}

/// Replaces draft `id` (of `note.branch_id`) with `note`, keeping its
/// number: 404 for a note of another branch, 409 for a posted note or a
/// draft an invoice already bills.
pub async fn replace(pool: &Pool, id: Uuid, note: NewNote) -> Result<GoodsReceivedNote> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    lock_unbilled_draft(&tx, id, note.branch_id).await?;
    check_parties(&tx, &note).await?;
    let units = pack_units(&tx, &note.lines).await?;
    check_order_lines(&tx, &note).await?;
    let priced = price(&note, &units)?;
    clear_body(&tx, id).await?;
    let lines_total: Decimal = priced.iter().map(|p| p.line_value).sum();
    let charges_total: Decimal = note.charges.iter().map(|(_, a)| *a).sum();
    let total = lines_total + charges_total;
    let (supplier_id, order_id, reference) = (
        note.supplier_id,
        note.purchase_order_id,
        note.delivery_reference.clone(),
    );
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE goods_received_notes
              SET supplier_id = {supplier_id}, purchase_order_id = {order_id},
                  delivery_reference = {reference}, lines_total = {lines_total},
                  charges_total = {charges_total}, total = {total}, updated_at = now()
            WHERE id = {id}"#
    );
    db::raw_all(&tx, &q.sql, q.values).await?;
    insert_body(&tx, id, &note, &priced).await?;
    let answer = read::get(&tx, id)
        .await?
        .ok_or_else(|| Error::internal("the note just replaced vanished"))?;
    crate::db::commit(tx).await?;
    Ok(answer)
}

/// Discards draft `id` of `branch_id` (404 / 409 as [`replace`]).
pub async fn discard(pool: &Pool, id: Uuid, branch_id: Uuid) -> Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    lock_unbilled_draft(&tx, id, branch_id).await?;
    clear_body(&tx, id).await?;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"DELETE FROM goods_received_notes WHERE id = {id}"#
    );
    db::raw_all(&tx, &q.sql, q.values).await?;
    crate::db::commit(tx).await?;
    Ok(())
}

/// Locks a draft of `branch_id` that no invoice bills yet.
async fn lock_unbilled_draft<C: GenericClient + Sync>(
    tx: &C,
    id: Uuid,
    branch_id: Uuid,
) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT n.status,
                  EXISTS (SELECT 1 FROM goods_received_lines l
                           WHERE l.note_id = n.id AND l.quantity_invoiced > 0)
             FROM goods_received_notes n
            WHERE n.id = {id} AND n.branch_id = {branch_id} FOR UPDATE"#
    );
    let row = db::raw_opt(tx, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::not_found("Goods received note not found"))?;
    let (status, billed): (String, bool) = (row.get(0), row.get(1));
    if status != "draft" {
        return Err(Error::conflict(format!(
            "This note is {status}; a posted note is never edited or discarded."
        )));
    }
    if billed {
        return Err(Error::conflict(
            "A supplier invoice already bills this draft; it is posted as it is.",
        ));
    }
    Ok(())
}

async fn clear_body<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH charges AS (DELETE FROM goods_received_charges WHERE note_id = {id})
           DELETE FROM goods_received_lines WHERE note_id = {id}"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(())
}

fn lines_stmt(note_id: Uuid, note: &NewNote, priced: &[Priced]) -> sea_query::InsertStatement {
    let mut q = Query::insert()
        .into_table(Table::GoodsReceivedLines)
        .columns([
            "id",
            "note_id",
            "line_no",
            "purchase_order_line_id",
            "medicine_id",
            "pack_id",
            "pack_units",
            "batch_number",
            "expiry_date",
            "manufacturing_date",
            "quantity_received",
            "quantity_rejected",
            "rejection_reason",
            "unit_cost",
            "line_value",
            "charge_share",
            "landed_total",
            "landed_unit_cost",
        ])
        .to_owned();
    for (i, (l, p)) in note.lines.iter().zip(priced).enumerate() {
        q.values_panic([
            Uuid::now_v7().into(),
            note_id.into(),
            (i as i32 + 1).into(),
            l.purchase_order_line_id.into(),
            l.medicine_id.into(),
            l.pack_id.into(),
            p.units.into(),
            l.batch_number.clone().into(),
            l.expiry_date.into(),
            l.manufacturing_date.into(),
            p.received.into(),
            p.rejected.into(),
            l.rejection_reason.clone().into(),
            l.unit_cost.into(),
            p.line_value.into(),
            p.charge_share.into(),
            (p.line_value + p.charge_share).into(),
            p.landed_unit_cost.into(),
        ]);
    }
    q
}

/// What `POST /purchases` received, for its note.
pub struct Purchase<'a> {
    pub batch: &'a Batch,
    /// The pack received and its units, if by pack.
    pub pack: Option<(Uuid, i32)>,
    /// As sent: the cost of one pack (or base unit).
    pub unit_cost: Decimal,
    pub received_total: Decimal,
    pub user_id: Uuid,
}

/// Records a `POST /purchases` receipt as a one-line note posted at once
/// (origin `purchase`), in the receipt's transaction: the purchases report,
/// invoice matching and the note list see every receipt the same way.
pub async fn record_purchase<C: GenericClient + Sync>(tx: &C, p: Purchase<'_>) -> Result<()> {
    let b = p.batch;
    let supplier_id = b
        .supplier_id
        .ok_or_else(|| Error::internal("a purchased batch has no supplier"))?;
    let (seq, code) = next_number(tx, b.branch_id).await?;
    let (id, line_id) = (Uuid::now_v7(), Uuid::now_v7());
    let number = format!("{code}-GRN-{seq:06}");
    let (branch_id, user_id, total) = (b.branch_id, p.user_id, p.received_total);
    let reference = format!("purchase {}", b.batch_number);
    let note = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO goods_received_notes
             (id, branch_id, supplier_id, seq, grn_number, delivery_reference, status, origin,
              lines_total, charges_total, total, created_by, posted_by, posted_at)
           VALUES ({id}, {branch_id}, {supplier_id}, {seq}, {number}, {reference}, 'posted',
                   'purchase', {total}, 0, {total}, {user_id}, {user_id}, now())"#
    );
    db::raw_all(tx, &note.sql, note.values).await?;
    let (medicine_id, batch_number, expiry, made) = (
        b.medicine_id,
        b.batch_number.clone(),
        b.expiry_date,
        b.manufacturing_date,
    );
    let (pack_id, units) = (p.pack.map(|x| x.0), p.pack.map_or(1, |x| x.1));
    let (quantity, unit_cost, landed_cost, batch_id) =
        (b.qty_received, p.unit_cost, b.unit_cost, b.id);
    let line = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO goods_received_lines
             (id, note_id, line_no, medicine_id, pack_id, pack_units, batch_number, expiry_date,
              manufacturing_date, quantity_received, unit_cost, line_value, landed_total,
              landed_unit_cost, batch_id)
           VALUES ({line_id}, {id}, 1, {medicine_id}, {pack_id}, {units}, {batch_number}, {expiry},
                   {made}, {quantity}, {unit_cost}, {total}, {total}, {landed_cost}, {batch_id})"#
    );
    db::raw_all(tx, &line.sql, line.values).await?;
    Ok(())
}
