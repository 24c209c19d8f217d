//! Writing a planned sale: stock, counter, cash session, customer, register
//! and change log, in pipelined statements.

use crate::tables::Table;
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use sea_query::{Expr, ExprTrait, Query};
use tokio_postgres::Row;
use uuid::Uuid;

use super::chain::GENESIS_HASH;
use super::model::{Sale, SaleItem};
use super::plan::{prepare, Plan};
use super::request::NewSale;
use super::store::{self, Counter, Stored, Taken};
use crate::coupons::{self, Coupon};
use crate::customers;
use crate::db::{self, Stmt, Tx};
use crate::error::{Code, Error, Result};
use crate::fiscal;
use crate::stock;
use crate::sync::changes::{self, Change, Op};

/// Makes the sale in `tx`. The caller commits.
pub async fn create<C: GenericClient + Sync>(tx: &C, sale: &NewSale) -> Result<Sale> {
    let plan = prepare(tx, sale).await?;
    write(tx, plan).await
}

/// `create` inside a transaction shared with other sales (a group commit, a
/// pushed run). The outer error is a fault: the shared transaction must be
/// dropped. The inner one is a refusal, and nothing of the sale was written.
///
/// Only a sale that may still be refused while it writes (a coupon used up
/// meanwhile, a credit limit) gets a savepoint. The others are refused, if
/// at all, before their first write, and skip it. A savepoint is a
/// subtransaction, and a row that one subtransaction updated and the next
/// locks gets a multixact, which concurrent writers then queue on.
pub async fn create_shared(tx: &mut Tx<'_>, sale: &NewSale) -> Result<Result<Sale>> {
    let plan = match prepare(&**tx, sale).await {
        Ok(plan) => plan,
        Err(e) if e.is_refusal() => {
            // A refusal the database raised has aborted the transaction:
            // then the probe fails and the caller starts over.
            let probe = sea_query::raw_query!(PostgresQueryBuilder, "SELECT 1");
            db::run(&**tx, &Stmt::raw(probe.sql, probe.values)).await?;
            return Ok(Err(e));
        }
        Err(fault) => return Err(fault),
    };
    if !plan.may_refuse_while_writing() {
        // A refusal from here on (a branch closed meanwhile) is a fault.
        return write(&**tx, plan).await.map(Ok);
    }
    let sp = tx.savepoint("sale");
    match write(&*sp, plan).await {
        Ok(made) => {
            sp.commit().await?;
            Ok(Ok(made))
        }
        Err(e) if e.is_refusal() => {
            sp.rollback().await?;
            Ok(Err(e))
        }
        Err(fault) => Err(fault),
    }
}

/// Writes a prepared sale: coupon and credit first (they may still refuse),
/// then stock, counter, session, the sale and its feed rows.
pub(super) async fn write<C: GenericClient + Sync>(tx: &C, plan: Plan<'_>) -> Result<Sale> {
    let Plan {
        sale,
        catalogue,
        pieces,
        items,
        coupon,
        dispense,
        overrides,
        seller_name,
        sale_id,
        created_at,
        totals,
    } = plan;
    if let Some(c) = &coupon {
        coupons::redeem(tx, c).await?;
    }
    if let (Some(id), true) = (sale.customer_id, sale.payment_method == "credit") {
        customers::charge(
            tx,
            id,
            totals.total,
            (sale_id, sale.branch_id),
            sale.user_id,
        )
        .await?;
    }

    // Every refusal (coupon used up, credit limit) has happened by now; the
    // batches were locked above, so taking the stock cannot fail. The rest
    // is two pipelined round trips: first the writes whose answers the sale
    // needs (the batches with their revs, the invoice number, the cash
    // session, the sale's rev), in lock order, then the rows that use them.
    let takes = store::per_batch(pieces.iter());
    let answers = db::pipeline(
        tx,
        &[
            stock::take_stmt(&takes),
            counter_stmt(sale.branch_id),
            session_stmt(&sale, totals.total, totals.vat),
            changes::allocate_stmt(),
        ],
    )
    .await?;
    let [taken, counter, session, rev]: [Vec<Row>; 4] = answers
        .try_into()
        .map_err(|_| Error::internal("the sale's pipeline answered short"))?;
    if taken.len() != takes.len() {
        return Err(Error::rule(
            Code::InsufficientStock,
            "items",
            "Not enough stock left in the batch for this change.",
        ));
    }
    let counter = match counter.first() {
        Some(r) => Counter::from_row(r),
        None => bump_counter(tx, sale.branch_id).await?,
    };
    let cash_session_id: Option<Uuid> = session.first().map(|r| r.get(0));
    let rev: i64 = rev
        .first()
        .map(|r| r.get(0))
        .ok_or_else(|| Error::internal("nextval returned no row"))?;
    let made = store::assemble(
        &sale,
        &counter,
        Taken {
            id: sale_id,
            icv: counter.icv,
            items,
            totals,
            coupon_code: coupon.as_ref().map(|c| c.code.clone()),
            cash_session_id,
            seller_name,
            rev,
            created_at,
        },
    );
    // The register names the prescription's patient and prescriber.
    let (patient, licence) = dispense
        .as_ref()
        .map(|d| (d.patient_id.as_str(), d.licence.as_str()))
        .unwrap_or_default();
    let mut feed = Vec::with_capacity(taken.len() + 1);
    for row in &taken {
        let batch = stock::Batch::from_row(row);
        feed.push((batch.rev, stock::change_of(&batch, Op::Update)?));
    }
    feed.push((
        rev,
        Change {
            entity: "sale",
            entity_id: made.id.to_string(),
            op: Op::Create,
            branch_id: Some(made.branch_id),
            payload: serde_json::to_value(&made).map_err(Error::internal)?,
        },
    ));
    // The sale row goes before its items and register rows (foreign keys).
    let mut writes = vec![store::movements_stmt(std::iter::once((&made, &pieces[..])))];
    writes.extend(store_stmts(&made, &sale, coupon.as_ref()));
    // The serials after the lines they name; each is claimed once.
    let serials_at = writes.len();
    let serials = store::serials_stmt(&made);
    let claims = made.items.iter().filter(|i| i.serial.is_some()).count();
    writes.extend(serials);
    writes.extend(
        made.items
            .iter()
            .filter(|i| catalogue[&i.medicine_id].is_controlled)
            .map(|item| controlled_stmt(&made, item, patient, licence)),
    );
    writes.extend(store::overrides_stmt(std::iter::once((
        &made,
        &overrides[..],
    ))));
    // The prescription's updates after the sale row (its `sale_id` names it).
    let rx_from = writes.len();
    if let Some(d) = &dispense {
        writes.extend(d.stmts(&made));
    }
    let rx_to = writes.len();
    writes.push(changes::append_unnest_stmt(feed));
    // The invoice for the tax authority, in the same transaction and round
    // trip: the outbox's worker submits it after the commit.
    writes.push(fiscal::outbox::enqueue_stmt(&[fiscal::payload::invoice(
        &made,
    )]));
    let answers = db::pipeline(tx, &writes).await?;
    // The prescription was locked and checked: every update finds its row.
    // Should one not, the CHECK on the lines has the last word, and the
    // sale fails as a fault.
    let rx_answers = answers.get(rx_from..rx_to).unwrap_or_default();
    if rx_answers.iter().any(Vec::is_empty) {
        return Err(Error::internal(
            "a prescription line changed under the sale's lock",
        ));
    }
    if claims > 0 && answers.get(serials_at).map_or(0, Vec::len) != claims {
        return Err(serial_taken(tx, &made, &sale).await);
    }
    Ok(made)
}

/// The refusal of a sale whose serial another sale holds: names that sale
/// (committed by now: the claim waited for it).
async fn serial_taken<C: GenericClient + Sync>(tx: &C, made: &Sale, sale: &NewSale) -> Error {
    let gtins: Vec<String> = made.items.iter().filter_map(|i| i.gtin.clone()).collect();
    let serials: Vec<String> = made.items.iter().filter_map(|i| i.serial.clone()).collect();
    let sale_id = made.id;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT d.serial, s.invoice_number, s.id FROM dispensed_serials d
           JOIN unnest({gtins}::text[], {serials}::text[]) AS w(gtin, serial)
             ON w.gtin = d.gtin AND w.serial = d.serial
           JOIN sales s ON s.id = d.sale_id
           WHERE d.released_at IS NULL AND d.sale_id <> {sale_id}
           LIMIT 1"#
    );
    let (serial, holder) = match db::raw_opt(tx, &q.sql, q.values).await {
        Ok(Some(r)) => {
            let serial: String = r.get(0);
            let holder = format!(
                "Serial {serial} was already dispensed by sale {} ({}).",
                r.get::<_, String>(1),
                r.get::<_, Uuid>(2)
            );
            (Some(serial), holder)
        }
        Ok(None) => (
            None,
            "A serial of this sale is named twice in it.".to_owned(),
        ),
        Err(e) => return e,
    };
    // The line whose scanned serial it is (the first one, when named twice).
    let line = sale.lines.iter().position(|l| {
        let scanned = l.scanned.as_ref().and_then(|s| s.serial.as_deref());
        scanned.is_some() && (serial.is_none() || scanned == serial.as_deref())
    });
    let field = line.map_or_else(|| "items".to_owned(), |i| format!("items[{i}].scan"));
    Error::coded(Code::SerialAlreadyDispensed, Some(&field), holder)
}

pub(super) async fn user_name<C: GenericClient + Sync>(c: &C, id: Uuid) -> Result<String> {
    let q = Query::select()
        .column("full_name")
        .from(Table::Users)
        .and_where(Expr::col("id").eq(id))
        .to_owned();
    Ok(db::fetch_opt(c, &q)
        .await?
        .map(|r| r.get(0))
        .unwrap_or_default())
}

/// Takes the branch's next invoice number (no row when the branch has no
/// counter yet or cannot sell). The row stays locked until the sale
/// commits, so numbers are issued in commit order with no gap.
pub(super) fn counter_stmt(branch_id: Uuid) -> Stmt {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE invoice_counters c SET last_icv = c.last_icv + 1
           FROM branches b
           WHERE c.branch_id = {branch_id} AND b.id = c.branch_id
             AND b.is_active AND NOT b.is_deleted
           RETURNING c.last_icv, c.last_hash, b.code"#
    );
    Stmt::raw(q.sql, q.values)
}

/// `counter_stmt` for a branch whose counter row may be missing: creates
/// it, then takes the number.
pub(super) async fn bump_counter<C: GenericClient + Sync>(
    tx: &C,
    branch_id: Uuid,
) -> Result<Counter> {
    for _ in 0..2 {
        ensure_counter(tx, branch_id).await?;
        if let Some(r) = db::run(tx, &counter_stmt(branch_id)).await?.first() {
            return Ok(Counter::from_row(r));
        }
    }
    Err(Error::validation(
        "branch_id",
        "This branch is not active, so it cannot sell.",
    ))
}

/// Creates the branch's invoice counter row if it has none.
pub async fn ensure_counter<C: GenericClient + Sync>(tx: &C, branch_id: Uuid) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO invoice_counters (branch_id, last_icv, last_hash)
           VALUES ({branch_id}, 0, {GENESIS_HASH}) ON CONFLICT (branch_id) DO NOTHING"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(())
}

/// Adds the sale to the branch's open cash session, if one is open (one row,
/// the session's id, or none).
pub(super) fn session_stmt(sale: &NewSale, total: Decimal, vat: Decimal) -> Stmt {
    let (branch_id, method) = (sale.branch_id, sale.payment_method.as_str());
    let path = vec![method.to_owned()];
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE cash_sessions SET
             total_sales = total_sales + 1,
             total_revenue = total_revenue + {total},
             total_vat = total_vat + {vat},
             payment_breakdown = jsonb_set(payment_breakdown, {path},
               to_jsonb(coalesce((payment_breakdown ->> {method}::text)::numeric, 0) + {total}))
           WHERE branch_id = {branch_id} AND status = 'open'
           RETURNING id"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The sale row, its items and the counter's new last hash, in that order.
fn store_stmts(s: &Sale, sale: &NewSale, coupon: Option<&Coupon>) -> [Stmt; 3] {
    let row = Stored {
        sale: s,
        digest: sale.digest().into_string(),
        coupon_id: coupon.map(|c| c.id),
    };
    let (branch_id, hash) = (s.branch_id, s.invoice_hash.clone());
    let last_hash = sea_query::raw_query!(
        PostgresQueryBuilder,
        "UPDATE invoice_counters SET last_hash = {hash} WHERE branch_id = {branch_id}"
    );
    [
        store::sales_stmt(&[row]),
        store::items_stmt(&[s]),
        Stmt::raw(last_hash.sql, last_hash.values),
    ]
}

/// The controlled-drugs register row of a sale line.
pub(super) fn controlled_stmt(s: &Sale, item: &SaleItem, patient: &str, licence: &str) -> Stmt {
    let q = Query::insert()
        .into_table(Table::ControlledDispenses)
        .columns([
            "id",
            "sale_id",
            "branch_id",
            "medicine_id",
            "quantity",
            "patient_national_id",
            "doctor_license",
            "dispensed_by",
            "dispensed_at",
        ])
        .values_panic([
            Uuid::now_v7().into(),
            s.id.into(),
            s.branch_id.into(),
            item.medicine_id.into(),
            // The register counts base units, whatever pack was sold.
            item.base_quantity.into(),
            patient.into(),
            licence.into(),
            s.created_by.into(),
            s.created_at.into(),
        ])
        .to_owned();
    Stmt::of(&q)
}
