//! Posting a goods received note, on its branch's actor, in one
//! transaction: all lines become stock or none do.
//!
//! The note is locked first (a second post waits, then finds it posted:
//! 409), then the orders it receives against and their lines, in id order,
//! so two notes posted at once against one order line queue, and the
//! second sees what the first received. The order lines move by one
//! set-based update; the CHECK of migration 0024 refuses more than was
//! ordered unless the note allowed an over-receipt, whatever the number of
//! server processes.

use std::collections::HashMap;

use chrono::NaiveDate;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, LockType, Query};
use uuid::Uuid;

use super::{read, GoodsReceivedLine, GoodsReceivedNote};
use crate::db::{self, Pool};
use crate::error::{Error, Result};
use crate::fiscal;
use crate::stock::{self, Kind, Movement, NewBatch};
use crate::tables::Table;
use actors::runtime::Command;

/// What the poster allows beyond the rules (each checked against the
/// caller's role before the command is sent).
#[derive(Debug, Clone, Copy, Default)]
pub struct PostOptions {
    /// Receive more than is outstanding on an order line.
    pub allow_over_receipt: bool,
    /// Receive stock closer to expiry than `min_shelf_life_days`.
    pub accept_short_dated: bool,
}

/// Posts note `id` (of the actor's branch) as `user_id`.
pub struct PostNote {
    pub id: Uuid,
    pub options: PostOptions,
    pub user_id: Uuid,
}

/// The stock movements' reference type for a note's batches.
const REFERENCE: &str = "goods_received_note";

impl Command for PostNote {
    type Error = crate::Error;
    type Output = GoodsReceivedNote;
    const NAME: &'static str = "post_goods_received";

    async fn run(self, pool: Pool) -> Result<GoodsReceivedNote> {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let note = lock_draft(&tx, self.id).await?;
        check_dates(&tx, &note, self.options).await?;
        receive_on_orders(&tx, &note, self.options).await?;
        let mut batches = Vec::new();
        for line in note.lines.iter().filter(|l| l.quantity_received > 0) {
            batches.push((line.id, stock_line(&tx, &note, line, self.user_id).await?));
        }
        mark_posted(&tx, &note, &batches, self.options, self.user_id).await?;
        // The stock increase for the tax authority, with the posting.
        let arrived: Vec<fiscal::payload::StockLine> = note
            .lines
            .iter()
            .filter(|l| l.quantity_received > 0)
            .map(|l| fiscal::payload::StockLine {
                medicine_id: l.medicine_id,
                quantity: l.quantity_received,
                unit_cost: l.landed_unit_cost,
            })
            .collect();
        let increase = fiscal::payload::stock_increase(
            note.id,
            note.branch_id,
            &note.supplier_name,
            chrono::Utc::now(),
            &arrived,
        );
        if !arrived.is_empty() {
            fiscal::outbox::enqueue(&tx, &[increase]).await?;
        }
        let posted = read::get(&tx, note.id)
            .await?
            .ok_or_else(|| Error::internal("the note just posted vanished"))?;
        crate::db::commit(tx).await?;
        Ok(posted)
    }
}

/// Locks the note and checks it is a draft (404 / 409).
async fn lock_draft<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<GoodsReceivedNote> {
    let q = Query::select()
        .column("status")
        .from(Table::GoodsReceivedNotes)
        .and_where(Expr::col("id").eq(id))
        .lock(LockType::Update)
        .to_owned();
    let status: String = db::fetch_opt(tx, &q)
        .await?
        .map(|r| r.get(0))
        .ok_or_else(|| Error::not_found("Goods received note not found"))?;
    if status != "draft" {
        return Err(Error::conflict(format!(
            "This note is already {status}; a posted note is never posted or edited again."
        )));
    }
    read::get(tx, id)
        .await?
        .ok_or_else(|| Error::not_found("Goods received note not found"))
}

/// No accepted line is expired, nor closer to expiry than the shelf life
/// the organisation asks for, unless the poster accepted short-dated stock
/// (400 naming the line's `expiry_date`).
async fn check_dates<C: GenericClient + Sync>(
    tx: &C,
    note: &GoodsReceivedNote,
    options: PostOptions,
) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT org_today(), COALESCE((SELECT min_shelf_life_days FROM settings LIMIT 1), 90)"#
    );
    let row = db::raw_opt(tx, &q.sql, q.values)
        .await?
        .ok_or_else(|| Error::internal("org_today answered nothing"))?;
    let (today, min_days): (NaiveDate, i32) = (row.get(0), row.get(1));
    let shortest = today + chrono::Days::new(u64::try_from(min_days).unwrap_or(0));
    for (i, l) in note.lines.iter().enumerate() {
        if l.quantity_received == 0 {
            continue;
        }
        let field = format!("lines[{i}].expiry_date");
        if l.expiry_date < today {
            return Err(Error::validation(
                field,
                format!("Batch {} expired on {}.", l.batch_number, l.expiry_date),
            ));
        }
        if l.expiry_date < shortest && !options.accept_short_dated {
            return Err(Error::validation(
                field,
                format!(
                    "Batch {} expires on {}, within the {min_days} days of shelf life the \
                     organisation asks for; a manager or pharmacist may post it with \
                     `accept_short_dated: true`.",
                    l.batch_number, l.expiry_date
                ),
            ));
        }
    }
    Ok(())
}

/// An order line as locked for receiving.
struct OrderLine {
    order_id: Uuid,
    order_status: String,
    ordered: i32,
    received: i32,
}

/// Moves the received and rejected quantities of the order lines the note
/// names, and their orders' status, after checking each stays within what
/// was ordered (400 naming the line) unless over-receipt is allowed.
async fn receive_on_orders<C: GenericClient + Sync>(
    tx: &C,
    note: &GoodsReceivedNote,
    options: PostOptions,
) -> Result<()> {
    // Received, rejected, and billed already (an invoice may bill a note
    // before it is posted; the order line learns it now).
    let mut moved: HashMap<Uuid, (i32, i32, i32)> = HashMap::new();
    for l in &note.lines {
        if let Some(id) = l.purchase_order_line_id {
            let m = moved.entry(id).or_default();
            m.0 += l.quantity_received;
            m.1 += l.quantity_rejected;
            m.2 += l.quantity_invoiced;
        }
    }
    if moved.is_empty() {
        return Ok(());
    }
    let locked = lock_order_lines(tx, moved.keys().copied().collect()).await?;
    let mut seen: HashMap<Uuid, i32> = HashMap::new();
    for (i, l) in note.lines.iter().enumerate() {
        let Some(id) = l.purchase_order_line_id else {
            continue;
        };
        let o = locked
            .get(&id)
            .ok_or_else(|| Error::internal("a locked order line is missing"))?;
        if o.order_status != "sent" && o.order_status != "partially_received" {
            return Err(Error::conflict(format!(
                "Line {} receives against an order that is now {}; only a sent or partly \
                 received order takes deliveries.",
                i + 1,
                o.order_status
            )));
        }
        let so_far = seen.entry(id).or_insert(o.received);
        *so_far += l.quantity_received;
        if *so_far > o.ordered && !options.allow_over_receipt {
            return Err(Error::validation(
                format!("lines[{i}].quantity_received"),
                format!(
                    "The order line has {} base units outstanding; this note would receive \
                     {}. A branch manager or admin may post it with `allow_over_receipt: true`.",
                    std::cmp::max(o.ordered - o.received, 0),
                    *so_far - o.received
                ),
            ));
        }
    }
    let ids: Vec<Uuid> = moved.keys().copied().collect();
    let received: Vec<i32> = ids.iter().map(|id| moved[id].0).collect();
    let rejected: Vec<i32> = ids.iter().map(|id| moved[id].1).collect();
    let billed: Vec<i32> = ids.iter().map(|id| moved[id].2).collect();
    let update = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE purchase_order_lines l
              SET quantity_received = l.quantity_received + v.received,
                  quantity_rejected = l.quantity_rejected + v.rejected,
                  quantity_invoiced = l.quantity_invoiced + v.billed,
                  over_received = l.over_received
                                  OR l.quantity_received + v.received > l.quantity_ordered
             FROM unnest({ids}::uuid[], {received}::int[], {rejected}::int[], {billed}::int[])
                  AS v(id, received, rejected, billed)
            WHERE l.id = v.id"#
    );
    db::raw_all(tx, &update.sql, update.values).await?;
    let orders: Vec<Uuid> = locked.values().map(|o| o.order_id).collect();
    let status = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE purchase_orders o
              SET status = CASE WHEN EXISTS (
                                 SELECT 1 FROM purchase_order_lines l
                                  WHERE l.purchase_order_id = o.id
                                    AND l.quantity_received < l.quantity_ordered)
                           THEN 'partially_received' ELSE 'received' END,
                  updated_at = now()
            WHERE o.id = ANY({orders})"#
    );
    db::raw_all(tx, &status.sql, status.values).await?;
    Ok(())
}

/// Locks the orders of `ids` and then the lines themselves, both in id
/// order (the order every poster takes), and reads them.
async fn lock_order_lines<C: GenericClient + Sync>(
    tx: &C,
    mut ids: Vec<Uuid>,
) -> Result<HashMap<Uuid, OrderLine>> {
    ids.sort();
    let orders = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT o.id FROM purchase_orders o
            WHERE o.id IN (SELECT purchase_order_id FROM purchase_order_lines
                            WHERE id = ANY({ids}))
            ORDER BY o.id FOR UPDATE"#
    );
    db::raw_all(tx, &orders.sql, orders.values).await?;
    let lines = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT l.id, l.purchase_order_id, o.status, l.quantity_ordered, l.quantity_received
             FROM purchase_order_lines l JOIN purchase_orders o ON o.id = l.purchase_order_id
            WHERE l.id = ANY({ids}) ORDER BY l.id FOR UPDATE OF l"#
    );
    let rows = db::raw_all(tx, &lines.sql, lines.values).await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get(0),
                OrderLine {
                    order_id: r.get(1),
                    order_status: r.get(2),
                    ordered: r.get(3),
                    received: r.get(4),
                },
            )
        })
        .collect())
}

/// Puts a line's accepted units into stock at its landed cost: onto this
/// branch's batch of the same medicine, number, expiry, pack, supplier and
/// cost (so the batch goes back to the supplier it came from) when
/// there is one (a batch keeps one cost for ever, so a valuation of a past
/// day never changes), or as a new batch. Answers the batch's id.
async fn stock_line<C: GenericClient + Sync>(
    tx: &C,
    note: &GoodsReceivedNote,
    l: &GoodsReceivedLine,
    user_id: Uuid,
) -> Result<Uuid> {
    let reference = Some((REFERENCE, note.id));
    let (branch_id, medicine_id, number, expiry, cost, pack) = (
        note.branch_id,
        l.medicine_id,
        l.batch_number.clone(),
        l.expiry_date,
        l.landed_unit_cost,
        l.pack_id,
    );
    let (qty, total, supplier_id) = (l.quantity_received, l.landed_total, note.supplier_id);
    let same = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE batches b
              SET qty_received = b.qty_received + {qty},
                  received_total = COALESCE(b.received_total,
                                            round(b.qty_received * b.unit_cost, 2)) + {total}
            WHERE b.id = (SELECT id FROM batches
                           WHERE branch_id = {branch_id} AND medicine_id = {medicine_id}
                             AND batch_number = {number} AND expiry_date = {expiry}
                             AND unit_cost = {cost} AND pack_id IS NOT DISTINCT FROM {pack}
                             AND supplier_id = {supplier_id}
                             AND origin = 'purchase' AND NOT is_deleted
                           ORDER BY created_at, id LIMIT 1 FOR UPDATE)
            RETURNING b.id"#
    );
    if let Some(row) = db::raw_opt(tx, &same.sql, same.values).await? {
        let batch_id: Uuid = row.get(0);
        let arrival = Movement {
            batch_id,
            delta: qty,
            kind: Kind::In,
            reference,
            user_id,
        };
        stock::apply(tx, arrival).await?;
        return Ok(batch_id);
    }
    let new = NewBatch {
        medicine_id,
        branch_id,
        supplier_id: Some(note.supplier_id),
        batch_number: l.batch_number.clone(),
        expiry_date: l.expiry_date,
        manufacturing_date: l.manufacturing_date,
        quantity: qty,
        unit_cost: cost,
        received_total: total,
        pack: l.pack_id.map(|p| (p, l.pack_units)),
        origin: "purchase",
        notes: format!("{} {}", note.grn_number, note.delivery_reference),
        user_id,
    };
    Ok(stock::receive(tx, new, Kind::In, reference).await?.id)
}

/// Records which batch each line became and marks the note posted.
async fn mark_posted<C: GenericClient + Sync>(
    tx: &C,
    note: &GoodsReceivedNote,
    batches: &[(Uuid, Uuid)],
    options: PostOptions,
    user_id: Uuid,
) -> Result<()> {
    let lines: Vec<Uuid> = batches.iter().map(|b| b.0).collect();
    let ids: Vec<Uuid> = batches.iter().map(|b| b.1).collect();
    let set = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE goods_received_lines l SET batch_id = v.batch_id
             FROM unnest({lines}::uuid[], {ids}::uuid[]) AS v(id, batch_id)
            WHERE l.id = v.id"#
    );
    db::raw_all(tx, &set.sql, set.values).await?;
    let (over, short) = (options.allow_over_receipt, options.accept_short_dated);
    let id = note.id;
    let posted = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE goods_received_notes
              SET status = 'posted', posted_by = {user_id}, posted_at = now(),
                  updated_at = now(), allow_over_receipt = {over},
                  accept_short_dated = {short}
            WHERE id = {id}"#
    );
    db::raw_all(tx, &posted.sql, posted.values).await?;
    Ok(())
}
