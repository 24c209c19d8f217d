//! Filing a return (the sale lines locked, the units held, the refund
//! priced) and issuing its credit note (stock back onto its batches, the
//! credit refund, the counter, the cash session, the register, the change
//! log), or ending a pending one.
//!
//! Lock order: sale lines (by id), then the return, batches (in the order
//! sales lock them), the customer, the credit note counter and the cash
//! session; a decision locks its approval first. Sales lock batches,
//! customers, their invoice counter and the session in that order too, so
//! returns and sales never wait on each other in a circle.

use crate::tables::Table;
use std::collections::HashMap;

use chrono::{DateTime, SubsecRound, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, LockType, Query};
use uuid::Uuid;

use super::model::{credit_note_hash, refund_share, CreditNote, CreditNoteItem, Held, NewReturn};
use super::read::get;
use super::refund::{check_credit, owed_first};
use crate::approvals;
use crate::cash_sessions;
use crate::customers;
use crate::db::{self, Stmt};
use crate::error::{Code, Error, Result};
use crate::stock::{self, Kind, Movement};
use crate::sync::changes::{self, Change, Op};
use crate::wire;

/// A sale as a return needs it.
struct SaleHead {
    id: Uuid,
    branch_id: Uuid,
    payment_method: String,
    customer_id: Option<Uuid>,
}

async fn sale_head<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<Option<SaleHead>> {
    let q = Query::select()
        .columns(["id", "branch_id", "payment_method", "customer_id"])
        .from(Table::Sales)
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    Ok(db::fetch_opt(tx, &q).await?.map(|r| SaleHead {
        id: r.get("id"),
        branch_id: r.get("branch_id"),
        payment_method: r.get("payment_method"),
        customer_id: r.get("customer_id"),
    }))
}

/// A sale line locked for a return, with what it has given back already.
struct LockedLine {
    sale_id: Uuid,
    line_no: i32,
    medicine_id: Uuid,
    batch_id: Uuid,
    /// Base units sold.
    quantity: i32,
    /// Base units per pack sold (1 for loose units).
    pack_units: i32,
    unit_price: Decimal,
    line_total: Decimal,
    vat_rate: Decimal,
    vat_amount: Decimal,
    held: Held,
}

/// Locks the sale lines `ids` in id order (one order for every return, so
/// two returns of one sale queue instead of deadlocking, across server
/// processes too), then reads them with the units and money their returns
/// hold. The read is a statement of its own: under READ COMMITTED it sees
/// every return committed while this one waited for the locks, which the
/// locking statement's own snapshot would not.
async fn lock_lines<C: GenericClient + Sync>(
    tx: &C,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, LockedLine>> {
    let ids = ids.to_vec();
    let lock = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.id FROM sale_items i WHERE i.id = ANY({ids}) ORDER BY i.id FOR UPDATE"#
    );
    db::raw_all(tx, &lock.sql, lock.values).await?;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.id, i.sale_id, i.line_no, i.medicine_id, i.batch_id, i.quantity,
                  i.pack_units, i.returned_quantity, i.unit_price, i.line_total, i.vat_rate, i.vat_amount,
                  coalesce(h.total, 0) AS held_total, coalesce(h.vat, 0) AS held_vat
           FROM sale_items i
           LEFT JOIN (SELECT ri.sale_item_id, sum(ri.line_total) AS total, sum(ri.vat_amount) AS vat
                      FROM sale_return_items ri JOIN sale_returns r ON r.id = ri.return_id
                      WHERE ri.sale_item_id = ANY({ids}) AND r.status <> 'rejected'
                      GROUP BY ri.sale_item_id) h ON h.sale_item_id = i.id
           WHERE i.id = ANY({ids})"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let line = LockedLine {
                sale_id: r.get("sale_id"),
                line_no: r.get("line_no"),
                medicine_id: r.get("medicine_id"),
                batch_id: r.get("batch_id"),
                quantity: r.get("quantity"),
                pack_units: r.get("pack_units"),
                unit_price: r.get("unit_price"),
                line_total: r.get("line_total"),
                vat_rate: r.get("vat_rate"),
                vat_amount: r.get("vat_amount"),
                held: Held {
                    units: r.get("returned_quantity"),
                    total: r.get("held_total"),
                    vat: r.get("held_vat"),
                },
            };
            (r.get("id"), line)
        })
        .collect())
}

/// One priced line of a return being filed.
struct Priced {
    sale_item_id: Uuid,
    medicine_id: Uuid,
    batch_id: Uuid,
    /// Base units.
    quantity: i32,
    pack_units: i32,
    unit_price: Decimal,
    vat_rate: Decimal,
    vat_amount: Decimal,
    line_total: Decimal,
}

/// Files a return in `tx`: checks the sale (404 when it is not the branch's)
/// and every line (400 naming the field), holds the units on the sale lines
/// and writes the return; then issues its credit note at once, or files
/// the approval of kind `refund` it waits for. The caller commits.
pub async fn file<C: GenericClient + Sync>(tx: &C, r: &NewReturn) -> Result<CreditNote> {
    let sale = sale_head(tx, r.sale_id)
        .await?
        .filter(|s| s.branch_id == r.branch_id)
        .ok_or_else(|| Error::not_found("Sale not found"))?;
    let ids: Vec<Uuid> = r.lines.iter().map(|l| l.sale_item_id).collect();
    let locked = lock_lines(tx, &ids).await?;
    let mut priced = Vec::with_capacity(r.lines.len());
    for (i, l) in r.lines.iter().enumerate() {
        let line = locked
            .get(&l.sale_item_id)
            .filter(|x| x.sale_id == sale.id)
            .ok_or_else(|| {
                Error::validation(
                    format!("items[{i}].sale_item_id"),
                    "This is not a line of the sale.",
                )
            })?;
        // A line sold by the pack returns packs; the sums run in base units.
        let units = Ord::max(line.pack_units, 1);
        let wanted = l.quantity.saturating_mul(units);
        let left = line.quantity - line.held.units;
        if wanted > left {
            return Err(Error::rule(
                Code::ReturnExceedsSold,
                format!("items[{i}].quantity"),
                format!(
                    "Line {} of the sale sold {} and has {} returned or awaiting approval: \
                     at most {} can still be returned, not {}.",
                    line.line_no + 1,
                    line.quantity / units,
                    line.held.units / units,
                    left / units,
                    l.quantity
                ),
            ));
        }
        let (line_total, vat_amount) = refund_share(
            line.line_total,
            line.vat_amount,
            line.quantity,
            line.held,
            wanted,
        );
        priced.push(Priced {
            sale_item_id: l.sale_item_id,
            medicine_id: line.medicine_id,
            batch_id: line.batch_id,
            quantity: wanted,
            pack_units: units,
            unit_price: line.unit_price,
            vat_rate: line.vat_rate,
            vat_amount,
            line_total,
        });
    }
    let total: Decimal = wire::two_places(priced.iter().map(|p| p.line_total).sum());
    let vat: Decimal = wire::two_places(priced.iter().map(|p| p.vat_amount).sum());
    let method = r
        .refund_method
        .clone()
        .unwrap_or_else(|| sale.payment_method.clone());
    if method == "credit" {
        check_credit(tx, sale.customer_id, total).await?;
    } else if sale.payment_method == "credit" {
        owed_first(tx, sale.customer_id, total, &method).await?;
    }

    let id = Uuid::now_v7();
    let created_at = Utc::now().trunc_subsecs(6);
    let approval_id = if r.issues_at_once() {
        None
    } else {
        let approval = approvals::insert(
            tx,
            approvals::NewApproval {
                branch_id: sale.branch_id,
                kind: "refund".to_owned(),
                reference_id: Some(id.to_string()),
                reason: r.reason.clone(),
                requested_by: r.user_id,
            },
        )
        .await?;
        Some(approval.id)
    };
    let insert = Query::insert()
        .into_table(Table::SaleReturns)
        .columns([
            "id",
            "sale_id",
            "branch_id",
            "status",
            "refund_method",
            "restock",
            "reason",
            "customer_id",
            "subtotal",
            "vat",
            "total",
            "approval_id",
            "device_id",
            "client_mutation_id",
            "request_digest",
            "created_by",
            "created_at",
        ])
        .values_panic([
            id.into(),
            sale.id.into(),
            sale.branch_id.into(),
            "pending_approval".into(),
            method.clone().into(),
            r.restock.into(),
            r.reason.clone().into(),
            sale.customer_id.into(),
            (total - vat).into(),
            vat.into(),
            total.into(),
            approval_id.into(),
            r.device_id.into(),
            r.client_mutation_id.clone().into(),
            r.digest().into_string().into(),
            r.user_id.into(),
            created_at.into(),
        ])
        .to_owned();
    let mut items = Query::insert()
        .into_table(Table::SaleReturnItems)
        .columns([
            "id",
            "return_id",
            "line_no",
            "sale_item_id",
            "medicine_id",
            "batch_id",
            "quantity",
            "unit_price",
            "vat_rate",
            "vat_amount",
            "line_total",
            "restocked",
            "pack_units",
        ])
        .to_owned();
    for (n, p) in priced.iter().enumerate() {
        items.values_panic([
            Uuid::now_v7().into(),
            id.into(),
            (n as i32).into(),
            p.sale_item_id.into(),
            p.medicine_id.into(),
            p.batch_id.into(),
            p.quantity.into(),
            p.unit_price.into(),
            p.vat_rate.into(),
            p.vat_amount.into(),
            p.line_total.into(),
            r.restock.into(),
            p.pack_units.into(),
        ]);
    }
    // The lines are locked and were checked: every one takes its units.
    // The condition (and the CHECK) stay the last word.
    let qtys: Vec<i32> = priced.iter().map(|p| p.quantity).collect();
    let hold = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE sale_items i SET returned_quantity = i.returned_quantity + d.qty
           FROM unnest({ids}::uuid[], {qtys}::int4[]) AS d(id, qty)
           WHERE i.id = d.id AND i.returned_quantity + d.qty <= i.quantity
           RETURNING i.id"#
    );
    let answers = db::pipeline(
        tx,
        &[
            Stmt::of(&insert),
            Stmt::of(&items),
            Stmt::raw(hold.sql, hold.values),
        ],
    )
    .await?;
    if answers.get(2).map_or(0, Vec::len) != priced.len() {
        return Err(Error::internal(
            "a sale line changed under the return's lock",
        ));
    }
    if approval_id.is_none() {
        return issue(tx, id, r.user_id).await;
    }
    get(tx, id)
        .await?
        .ok_or_else(|| Error::internal("the return just filed vanished"))
}

/// The branch's credit note counter after the bump, the hash it chained
/// to, and the branch's code.
struct Counter {
    seq: i64,
    last_hash: String,
    branch_code: String,
}

/// Takes the branch's next `cn_seq`. The counter row stays locked until the
/// transaction ends, so numbers are issued in commit order with no gap; a
/// rolled-back credit note gives its number back.
async fn bump_counter<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<Counter> {
    let genesis = crate::sales::GENESIS_HASH;
    let ensure = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO credit_note_counters (branch_id, last_cn_seq, last_hash)
           VALUES ({branch_id}, 0, {genesis}) ON CONFLICT (branch_id) DO NOTHING"#
    );
    db::raw_all(tx, &ensure.sql, ensure.values).await?;
    let bump = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE credit_note_counters c SET last_cn_seq = c.last_cn_seq + 1
           FROM branches b
           WHERE c.branch_id = {branch_id} AND b.id = c.branch_id
           RETURNING c.last_cn_seq, c.last_hash, b.code"#
    );
    let row = db::raw_opt(tx, &bump.sql, bump.values)
        .await?
        .ok_or_else(|| Error::internal("the credit note counter row is missing"))?;
    Ok(Counter {
        seq: row.get(0),
        last_hash: row.get(1),
        branch_code: row.get(2),
    })
}

/// Releases the serials the restocked lines had dispensed (the rows stay,
/// as history, with the return that released them).
fn release_serials_stmt(return_id: Uuid, items: &[CreditNoteItem]) -> Stmt {
    let lines: Vec<Uuid> = items.iter().map(|i| i.sale_item_id).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE dispensed_serials SET released_at = now(), released_by = {return_id}
           WHERE sale_item_id = ANY({lines}) AND released_at IS NULL"#
    );
    Stmt::raw(q.sql, q.values)
}

/// Locks a return and checks it still waits (409 otherwise).
async fn lock_pending<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<()> {
    let q = Query::select()
        .column("status")
        .from(Table::SaleReturns)
        .and_where(Expr::col("id").eq(id))
        .lock(LockType::Update)
        .to_owned();
    let status: String = db::fetch_opt(tx, &q)
        .await?
        .map(|r| r.get(0))
        .ok_or_else(|| Error::not_found("Return not found"))?;
    if status != "pending_approval" {
        return Err(Error::conflict(format!(
            "This return is already {status}; only a pending return can be issued or rejected."
        )));
    }
    Ok(())
}

/// Issues the credit note of a pending return in `tx`: the units go back
/// onto their batches (a `RETURN` movement each) unless the return keeps
/// them off the shelf, a credit refund lowers the customer's balance (400
/// when it would go below zero), the branch's next `cn_seq` is taken and
/// chained, the open cash session counts the refund, controlled lines write
/// register rows with a negative quantity, and the credit note joins the
/// change feed. `issuer` is who filed it, or the manager who approved it.
pub async fn issue<C: GenericClient + Sync>(tx: &C, id: Uuid, issuer: Uuid) -> Result<CreditNote> {
    lock_pending(tx, id).await?;
    let mut note = get(tx, id)
        .await?
        .ok_or_else(|| Error::not_found("Return not found"))?;
    if note.restock {
        let mut batch_ids: Vec<Uuid> = note.items.iter().map(|i| i.batch_id).collect();
        batch_ids.sort();
        batch_ids.dedup();
        for batch in stock::lock_by_id(tx, &batch_ids).await? {
            let qty: i32 = note
                .items
                .iter()
                .filter(|i| i.batch_id == batch.batch_id)
                .map(|i| i.base_quantity)
                .sum();
            let back = Movement {
                batch_id: batch.batch_id,
                delta: qty,
                kind: Kind::Return,
                reference: Some(("sale_return", id)),
                user_id: issuer,
            };
            stock::apply(tx, back).await?;
        }
    }
    if note.refund_method != "credit" && note.approval_id.is_some() {
        // Decided later than filed: what is owed may have grown since.
        let sale = sale_head(tx, note.sale_id).await?;
        if sale.is_some_and(|s| s.payment_method == "credit") {
            owed_first(tx, note.customer_id, note.total, &note.refund_method).await?;
        }
    }
    if note.refund_method == "credit" {
        let customer = note.customer_id.ok_or_else(|| {
            Error::validation("refund_method", "This sale names no customer to credit.")
        })?;
        customers::refund(tx, customer, note.total, (id, note.branch_id), issuer).await?;
    }
    let counter = bump_counter(tx, note.branch_id).await?;
    let session = db::run(
        tx,
        &cash_sessions::refund_stmt(note.branch_id, &note.refund_method, note.total),
    )
    .await?;
    let rev = changes::allocate(tx).await?;
    let issued_at = Utc::now().trunc_subsecs(6);
    note.status = "issued".to_owned();
    note.cn_seq = Some(counter.seq);
    note.credit_note_number = Some(format!("{}-CN-{:08}", counter.branch_code, counter.seq));
    note.previous_hash = Some(counter.last_hash);
    note.issued_at = Some(issued_at);
    note.issued_by = Some(issuer);
    note.decided_at = note.approval_id.map(|_| issued_at);
    note.cash_session_id = session.first().map(|r| r.get(0));
    note.rev = rev;
    let hash = credit_note_hash(&note, issued_at);
    note.credit_note_hash = Some(hash.clone());

    let update = Query::update()
        .table(Table::SaleReturns)
        .values([
            ("status", "issued".into()),
            ("cn_seq", note.cn_seq.into()),
            ("credit_note_number", note.credit_note_number.clone().into()),
            ("previous_hash", note.previous_hash.clone().into()),
            ("credit_note_hash", hash.clone().into()),
            ("issued_at", issued_at.into()),
            ("issued_by", issuer.into()),
            ("decided_at", note.decided_at.into()),
            ("cash_session_id", note.cash_session_id.into()),
            ("rev", rev.into()),
        ])
        .and_where(Expr::col("id").eq(id))
        .and_where(Expr::col("status").eq("pending_approval"))
        .returning_col("id")
        .to_owned();
    let branch_id = note.branch_id;
    let last_hash = sea_query::raw_query!(
        PostgresQueryBuilder,
        "UPDATE credit_note_counters SET last_hash = {hash} WHERE branch_id = {branch_id}"
    );
    let mut writes = vec![
        Stmt::of(&update),
        Stmt::raw(last_hash.sql, last_hash.values),
    ];
    writes.extend(
        note.items
            .iter()
            .filter(|i| i.is_controlled)
            .map(|i| register_stmt(&note, i, issuer, issued_at)),
    );
    if note.restock {
        // A pack back on the shelf may be sold again: its serial is free.
        writes.push(release_serials_stmt(id, &note.items));
    }
    let change = Change {
        entity: "credit_note",
        entity_id: id.to_string(),
        op: Op::Create,
        branch_id: Some(note.branch_id),
        payload: serde_json::to_value(&note).map_err(Error::internal)?,
    };
    writes.push(changes::append_unnest_stmt(vec![(rev, change)]));
    // The credit note for the tax authority, in the same round trip.
    writes.push(crate::fiscal::outbox::enqueue_stmt(&[
        crate::fiscal::payload::credit_note(&note),
    ]));
    let answers = db::pipeline(tx, &writes).await?;
    if answers.first().is_none_or(Vec::is_empty) {
        return Err(Error::internal("the return changed under its lock"));
    }
    Ok(note)
}

/// The register row of a controlled line returned: a negative quantity
/// naming the credit note, with the patient and prescriber of the sale's
/// own register row.
fn register_stmt(
    note: &CreditNote,
    item: &CreditNoteItem,
    issuer: Uuid,
    at: DateTime<Utc>,
) -> Stmt {
    let (row_id, sale_id, branch_id, note_id) =
        (Uuid::now_v7(), note.sale_id, note.branch_id, note.id);
    let (medicine_id, quantity) = (item.medicine_id, -item.base_quantity);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO controlled_dispenses (id, sale_id, branch_id, medicine_id, quantity,
                                             patient_national_id, doctor_license, dispensed_by,
                                             dispensed_at, credit_note_id)
           SELECT {row_id}, {sale_id}, {branch_id}, {medicine_id}, {quantity},
                  coalesce(o.patient_national_id, ''), coalesce(o.doctor_license, ''),
                  {issuer}, {at}, {note_id}
           FROM (SELECT 1) one
           LEFT JOIN LATERAL (SELECT d.patient_national_id, d.doctor_license
                              FROM controlled_dispenses d
                              WHERE d.sale_id = {sale_id} AND d.medicine_id = {medicine_id}
                                AND d.credit_note_id IS NULL
                              ORDER BY d.dispensed_at, d.id LIMIT 1) o ON true"#
    );
    Stmt::raw(q.sql, q.values)
}

/// Ends a pending return without a credit note: its units go back to the
/// sale lines' returnable quantity, and nothing else changed.
pub async fn reject<C: GenericClient + Sync>(tx: &C, id: Uuid) -> Result<()> {
    lock_pending(tx, id).await?;
    let lines = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT i.id FROM sale_items i JOIN sale_return_items ri ON ri.sale_item_id = i.id
           WHERE ri.return_id = {id} ORDER BY i.id FOR UPDATE OF i"#
    );
    db::raw_all(tx, &lines.sql, lines.values).await?;
    let release = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE sale_items i SET returned_quantity = i.returned_quantity - ri.quantity
           FROM sale_return_items ri
           WHERE ri.return_id = {id} AND i.id = ri.sale_item_id"#
    );
    let end = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE sale_returns SET status = 'rejected', decided_at = now()
           WHERE id = {id} AND status = 'pending_approval'"#
    );
    db::pipeline(
        tx,
        &[
            Stmt::raw(release.sql, release.values),
            Stmt::raw(end.sql, end.values),
        ],
    )
    .await?;
    Ok(())
}
