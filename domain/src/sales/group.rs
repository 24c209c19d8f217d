//! The set-based group writer: a run of a branch's plain sales (no coupon,
//! no credit, no prescription) made in a constant number of round trips,
//! however many sales the run holds.
//!
//! 1. One pipelined round trip reads and locks everything the run needs:
//!    the catalogue rows, the sellable batches (`FOR UPDATE`, one order),
//!    the invoice counter and the open cash session (`FOR UPDATE`), the
//!    customers named, the sellers' names, and a rev per sale.
//! 2. Planning in Rust with sequential semantics: sale k sees the stock
//!    sales 1..k−1 took, takes icv last+1 and chains its hash to sale k−1's.
//!    A sale the plan refuses gets its refusal and leaves the run; the
//!    others go on.
//! 3. Two pipelined round trips of statements with constant text
//!    (`unnest` arrays): every batch updated once with its net quantity
//!    (each gets its rev), the movements in one statement, the counter
//!    advanced once by compare-and-set (`WHERE last_icv = expected`), the
//!    cash session once, and the sales' revs; then the sales, their lines,
//!    the price-override audit rows and the change-log rows, each in one
//!    statement. The sales' revs come after their batches', so a till
//!    reading the feed in order meets the stock before the sale.
//!
//! The database still has the last word: every update's row count is
//! checked, `qty_remaining >= 0` and `UNIQUE (branch_id, icv)` hold, and a
//! mismatch is a fault, on which the caller drops the transaction and makes
//! the sales one at a time.

use std::collections::{HashMap, HashSet};

use chrono::{SubsecRound, Utc};
use deadpool_postgres::GenericClient;
use rust_decimal::Decimal;
use uuid::Uuid;

use super::model::Sale;
use super::plan::{
    check_catalogue, line_items, needs_prescription, pick_pieces, prescription_required,
    price_overrides, products, standard_rate, totals, Override, Piece, Product,
};
use super::request::NewSale;
use super::store::{self, Counter, Stored, Taken};
use crate::db::{self, Stmt};
use crate::error::{Error, Result};
use crate::fiscal;
use crate::stock;
use crate::sync::changes::{self, Change, Op};

/// What the run shares: read and locked in the first round trip.
struct Locked {
    catalogue: HashMap<Uuid, Product>,
    standard: Decimal,
    sellers: HashMap<Uuid, String>,
    customers: HashSet<Uuid>,
    lots: Vec<stock::Lot>,
    counter: Option<Counter>,
    session: Option<Uuid>,
}

/// Whether the group writer can plan this sale on its own: anything that
/// may still be refused while writing (a coupon, credit, a scanned serial),
/// that locks a prescription or that must read a scanned code first goes
/// through the one-sale path.
pub(crate) fn is_plain(sale: &NewSale) -> bool {
    sale.coupon_code.is_none()
        && sale.prescription_id.is_none()
        && sale.payment_method != "credit"
        && sale.lines.iter().all(|l| l.scan.is_none())
}

/// Makes a run of plain sales of one branch inside `tx`. The outer error
/// is a fault (drop the transaction); the inner ones are each sale's
/// refusal or the sale made.
pub(crate) async fn make_run<C: GenericClient + Sync>(
    tx: &C,
    sales: &[&NewSale],
) -> Result<Vec<Result<Sale>>> {
    let Some(first) = sales.first() else {
        return Ok(Vec::new());
    };
    let branch_id = first.branch_id;
    let mut locked = lock(tx, branch_id, sales).await?;
    let Some(mut counter) = locked.counter.take() else {
        // No counter row yet, or a branch that cannot sell: the one-sale
        // path creates the row or gives the refusal.
        return Err(Error::busy("the branch's counter is not ready"));
    };
    let expected_icv = counter.icv;
    let mut planned: Vec<Planned> = Vec::with_capacity(sales.len());
    let mut outcomes: Vec<Result<usize>> = Vec::with_capacity(sales.len());
    for sale in sales {
        match plan_one(sale, &mut locked, &mut counter) {
            Ok(p) => {
                outcomes.push(Ok(planned.len()));
                planned.push(p);
            }
            Err(refusal) => outcomes.push(Err(refusal)),
        }
    }
    if !planned.is_empty() {
        write_run(tx, branch_id, &mut planned, &locked, expected_icv, &counter).await?;
    }
    let mut made: Vec<Option<Sale>> = planned.into_iter().map(|p| Some(p.sale)).collect();
    Ok(outcomes
        .into_iter()
        .map(|o| {
            o.and_then(|i| {
                made.get_mut(i)
                    .and_then(Option::take)
                    .ok_or_else(|| Error::internal("a planned sale went missing"))
            })
        })
        .collect())
}

/// The first round trip: everything the run reads, and its locks, in the
/// lock order of the one-sale path (batches, then the counter, then the
/// cash session).
async fn lock<C: GenericClient + Sync>(
    tx: &C,
    branch_id: Uuid,
    sales: &[&NewSale],
) -> Result<Locked> {
    let mut ids: Vec<Uuid> = sales
        .iter()
        .flat_map(|s| s.lines.iter().map(|l| l.medicine_id))
        .collect();
    ids.sort();
    ids.dedup();
    let mut sellers: Vec<Uuid> = sales.iter().map(|s| s.user_id).collect();
    sellers.sort();
    sellers.dedup();
    let mut customers: Vec<Uuid> = sales.iter().filter_map(|s| s.customer_id).collect();
    customers.sort();
    customers.dedup();
    let (catalogue, standard, names, known, lots, counter, session) = futures_util::try_join!(
        products(tx, &ids),
        standard_rate(tx),
        seller_names(tx, sellers),
        existing_customers(tx, customers),
        stock::lock_sellable(tx, branch_id, &ids),
        lock_counter(tx, branch_id),
        lock_session(tx, branch_id),
    )?;
    Ok(Locked {
        catalogue,
        standard,
        sellers: names,
        customers: known,
        lots,
        counter,
        session,
    })
}

async fn seller_names<C: GenericClient + Sync>(
    c: &C,
    ids: Vec<Uuid>,
) -> Result<HashMap<Uuid, String>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT id, full_name FROM users WHERE id = ANY({ids})"
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

async fn existing_customers<C: GenericClient + Sync>(
    c: &C,
    ids: Vec<Uuid>,
) -> Result<HashSet<Uuid>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT id FROM customers WHERE id = ANY({ids}) AND NOT is_deleted"
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The branch's counter, locked, when the branch may sell.
async fn lock_counter<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<Option<Counter>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT c.last_icv, c.last_hash, b.code
           FROM invoice_counters c JOIN branches b ON b.id = c.branch_id
           WHERE c.branch_id = {branch_id} AND b.is_active AND NOT b.is_deleted
           FOR UPDATE OF c"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| Counter::from_row(&r)))
}

/// The branch's open cash session, locked.
async fn lock_session<C: GenericClient + Sync>(c: &C, branch_id: Uuid) -> Result<Option<Uuid>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT id FROM cash_sessions
           WHERE branch_id = {branch_id} AND status = 'open' FOR UPDATE"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values).await?.map(|r| r.get(0)))
}

/// A sale the plan accepted, with what it takes from each batch.
struct Planned {
    sale: Sale,
    pieces: Vec<Piece>,
    overrides: Vec<Override>,
    digest: String,
}

/// Plans one sale against what the run's earlier sales left, refusing it
/// in the same order and words as the one-sale path. Nothing of the run's
/// state changes when it is refused.
fn plan_one(sale: &NewSale, locked: &mut Locked, counter: &mut Counter) -> Result<Planned> {
    check_catalogue(sale, &locked.catalogue)?;
    let overrides = price_overrides(sale, &locked.catalogue)?;
    if let Some(why) = needs_prescription(sale, &locked.catalogue) {
        return Err(prescription_required(why));
    }
    let mut lots = locked.lots.clone();
    let pieces = pick_pieces(sale, &locked.catalogue, &mut lots, locked.standard)?;
    let items = line_items(
        &pieces,
        &vec![Decimal::ZERO; pieces.len()],
        &locked.catalogue,
    );
    let totals = totals(&items);
    if let Some(id) = sale.customer_id {
        if !locked.customers.contains(&id) {
            return Err(Error::validation(
                "customer_id",
                "`customer_id` names no customer.",
            ));
        }
    }
    locked.lots = lots;
    let made = store::assemble(
        sale,
        counter,
        Taken {
            id: Uuid::now_v7(),
            icv: counter.icv + 1,
            items,
            totals,
            coupon_code: None,
            cash_session_id: locked.session,
            seller_name: locked
                .sellers
                .get(&sale.user_id)
                .cloned()
                .unwrap_or_default(),
            // Allocated when written, after the batches' revs.
            rev: 0,
            created_at: sale.occurred_at.unwrap_or_else(Utc::now).trunc_subsecs(6),
        },
    );
    counter.icv = made.icv;
    counter.previous_hash = made.invoice_hash.clone();
    Ok(Planned {
        sale: made,
        pieces,
        overrides,
        digest: sale.digest().into_string(),
    })
}

/// The second and third round trips: the stock, counter and session
/// updates with the sales' revs, then the sales, their lines, the audit
/// rows and the change log.
async fn write_run<C: GenericClient + Sync>(
    tx: &C,
    branch_id: Uuid,
    planned: &mut [Planned],
    locked: &Locked,
    expected_icv: i64,
    counter: &Counter,
) -> Result<()> {
    let takes = store::per_batch(planned.iter().flat_map(|p| p.pieces.iter()));
    let mut first = vec![
        stock::take_stmt(&takes),
        store::movements_stmt(planned.iter().map(|p| (&p.sale, &p.pieces[..]))),
        counter_cas_stmt(branch_id, expected_icv, counter),
        changes::allocate_many_stmt(planned.len())?,
    ];
    if let Some(id) = locked.session {
        first.push(session_totals_stmt(id, planned));
    }
    let answers = db::pipeline(tx, &first).await?;
    let [taken, _, counted, revs, session @ ..] = answers.as_slice() else {
        return Err(Error::internal("the sale run's pipeline answered short"));
    };
    let session_ok = locked.session.is_none() || session.first().is_some_and(|r| r.len() == 1);
    let revs = changes::revs_of(revs);
    if taken.len() != takes.len()
        || counted.len() != 1
        || !session_ok
        || revs.len() != planned.len()
    {
        // Another process changed what this run locked: a fault.
        return Err(Error::busy(
            "the sale run lost a race; making its sales one by one",
        ));
    }
    let mut feed = Vec::with_capacity(taken.len() + planned.len());
    for row in taken {
        let batch = stock::Batch::from_row(row);
        feed.push((batch.rev, stock::change_of(&batch, Op::Update)?));
    }
    for (p, rev) in planned.iter_mut().zip(revs) {
        p.sale.rev = rev;
        feed.push((
            rev,
            Change {
                entity: "sale",
                entity_id: p.sale.id.to_string(),
                op: Op::Create,
                branch_id: Some(p.sale.branch_id),
                payload: serde_json::to_value(&p.sale).map_err(Error::internal)?,
            },
        ));
    }
    // The sales before their lines (foreign key).
    let made: Vec<&Sale> = planned.iter().map(|p| &p.sale).collect();
    let rows: Vec<Stored<'_>> = planned
        .iter()
        .map(|p| Stored {
            sale: &p.sale,
            digest: p.digest.clone(),
            coupon_id: None,
        })
        .collect();
    let mut second = vec![store::sales_stmt(&rows), store::items_stmt(&made)];
    second.extend(store::overrides_stmt(
        planned.iter().map(|p| (&p.sale, &p.overrides[..])),
    ));
    second.push(changes::append_unnest_stmt(feed));
    // The run's invoices for the tax authority: one statement for all.
    let invoices: Vec<_> = made.iter().map(|s| fiscal::payload::invoice(s)).collect();
    second.push(fiscal::outbox::enqueue_stmt(&invoices));
    db::pipeline(tx, &second).await?;
    Ok(())
}

/// Advances the counter past the run by compare-and-set: no row when
/// another writer moved it since it was read.
fn counter_cas_stmt(branch_id: Uuid, expected: i64, counter: &Counter) -> Stmt {
    let (last, hash) = (counter.icv, counter.previous_hash.clone());
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE invoice_counters SET last_icv = {last}, last_hash = {hash}
           WHERE branch_id = {branch_id} AND last_icv = {expected}
           RETURNING last_icv"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The run's sales added to the open cash session once: the counts and
/// sums, and each payment method's figure of the breakdown.
fn session_totals_stmt(id: Uuid, planned: &[Planned]) -> Stmt {
    let count = planned.len() as i32;
    let revenue: Decimal = planned.iter().map(|p| p.sale.total).sum();
    let vat: Decimal = planned.iter().map(|p| p.sale.vat).sum();
    let mut by_method: Vec<(String, Decimal)> = Vec::new();
    for p in planned {
        match by_method
            .iter_mut()
            .find(|(m, _)| *m == p.sale.payment_method)
        {
            Some((_, sum)) => *sum += p.sale.total,
            None => by_method.push((p.sale.payment_method.clone(), p.sale.total)),
        }
    }
    let methods: Vec<String> = by_method.iter().map(|m| m.0.clone()).collect();
    let amounts: Vec<String> = by_method.iter().map(|m| m.1.to_string()).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE cash_sessions SET
             total_sales = total_sales + {count},
             total_revenue = total_revenue + {revenue},
             total_vat = total_vat + {vat},
             payment_breakdown = payment_breakdown || (
               SELECT jsonb_object_agg(m.method,
                        coalesce((payment_breakdown ->> m.method)::numeric, 0) + m.amount::numeric)
               FROM unnest({methods}::text[], {amounts}::text[]) AS m(method, amount))
           WHERE id = {id} AND status = 'open'
           RETURNING id"#
    );
    Stmt::raw(q.sql, q.values)
}
