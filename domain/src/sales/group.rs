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

use super::*;

/// What the run shares: read and locked in the first round trip.
struct Locked {
    catalogue: HashMap<Uuid, Product>,
    standard: Decimal,
    sellers: HashMap<Uuid, String>,
    customers: std::collections::HashSet<Uuid>,
    lots: Vec<stock::Lot>,
    counter: Option<Counter>,
    session: Option<Uuid>,
}

/// Whether the group writer can plan this sale on its own: anything that
/// may still be refused while writing (a coupon, credit) or that locks a
/// prescription goes through the one-sale path.
pub(crate) fn is_plain(sale: &NewSale) -> bool {
    sale.coupon_code.is_none() && sale.prescription_id.is_none() && sale.payment_method != "credit"
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
) -> Result<std::collections::HashSet<Uuid>> {
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
    let icv = counter.icv + 1;
    let created_at = sale.occurred_at.unwrap_or_else(Utc::now).trunc_subsecs(6);
    let mut made = Sale {
        id: Uuid::now_v7(),
        branch_id: sale.branch_id,
        icv,
        invoice_number: format!("{}-{:08}", counter.branch_code, icv),
        customer_id: sale.customer_id,
        prescription_id: None,
        coupon_code: None,
        payment_method: sale.payment_method.clone(),
        discount: totals.discount,
        subtotal: totals.subtotal,
        vat: totals.vat,
        total: totals.total,
        cash_session_id: locked.session,
        device_id: sale.device_id,
        client_mutation_id: sale.client_mutation_id.clone(),
        status: "completed".to_owned(),
        previous_invoice_hash: counter.previous_hash.clone(),
        invoice_hash: String::new(),
        created_by: sale.user_id,
        created_by_name: locked
            .sellers
            .get(&sale.user_id)
            .cloned()
            .unwrap_or_default(),
        // Allocated when written, after the batches' revs.
        rev: 0,
        created_at,
        items,
    };
    made.invoice_hash = invoice_hash(&made, created_at);
    counter.icv = icv;
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
    let mut takes: Vec<(Uuid, i32)> = Vec::new();
    for p in planned.iter() {
        for (batch, qty) in per_batch(&p.pieces) {
            match takes.iter_mut().find(|(b, _)| *b == batch) {
                Some((_, q)) => *q += qty,
                None => takes.push((batch, qty)),
            }
        }
    }
    let mut first = vec![
        stock::take_stmt(&takes),
        movements_stmt(branch_id, planned),
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
    let mut second = vec![sales_stmt(planned), items_stmt(&made)];
    if planned.iter().any(|p| !p.overrides.is_empty()) {
        second.push(overrides_stmt(planned));
    }
    second.push(changes::append_unnest_stmt(feed));
    db::pipeline(tx, &second).await?;
    Ok(())
}

fn movements_stmt(branch_id: Uuid, planned: &[Planned]) -> Stmt {
    let (mut ids, mut batches, mut medicines, mut qtys, mut sales, mut users) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for p in planned {
        for piece in &p.pieces {
            ids.push(Uuid::now_v7());
            batches.push(piece.batch_id);
            medicines.push(piece.medicine_id);
            qtys.push(-piece.quantity);
            sales.push(p.sale.id);
            users.push(p.sale.created_by);
        }
    }
    let kind = Kind::Sale.as_str();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO stock_movements
             (id, batch_id, medicine_id, branch_id, kind, qty, reference_type, reference_id, created_by)
           SELECT m.id, m.batch_id, m.medicine_id, {branch_id}, {kind}, m.qty, 'sale', m.sale_id,
                  m.user_id
           FROM unnest({ids}::uuid[], {batches}::uuid[], {medicines}::uuid[], {qtys}::int4[],
                       {sales}::uuid[], {users}::uuid[])
             AS m(id, batch_id, medicine_id, qty, sale_id, user_id)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// Text for an optional value in a text array ('' for none).
fn opt_text(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn sales_stmt(planned: &[Planned]) -> Stmt {
    let s = |f: &dyn Fn(&Planned) -> String| planned.iter().map(f).collect::<Vec<String>>();
    let ids: Vec<Uuid> = planned.iter().map(|p| p.sale.id).collect();
    let branches: Vec<Uuid> = planned.iter().map(|p| p.sale.branch_id).collect();
    let icvs: Vec<i64> = planned.iter().map(|p| p.sale.icv).collect();
    let numbers = s(&|p| p.sale.invoice_number.clone());
    let customers = s(&|p| opt_text(p.sale.customer_id));
    let methods = s(&|p| p.sale.payment_method.clone());
    let gross = s(&|p| (p.sale.total + p.sale.discount).to_string());
    let discount = s(&|p| p.sale.discount.to_string());
    let subtotal = s(&|p| p.sale.subtotal.to_string());
    let vat = s(&|p| p.sale.vat.to_string());
    let total = s(&|p| p.sale.total.to_string());
    let sessions = s(&|p| opt_text(p.sale.cash_session_id));
    let devices = s(&|p| opt_text(p.sale.device_id));
    let cmids: Vec<String> = s(&|p| p.sale.client_mutation_id.clone().unwrap_or_default());
    let has_cmid: Vec<bool> = planned
        .iter()
        .map(|p| p.sale.client_mutation_id.is_some())
        .collect();
    let digests = s(&|p| p.digest.clone());
    let previous = s(&|p| p.sale.previous_invoice_hash.clone());
    let hashes = s(&|p| p.sale.invoice_hash.clone());
    let creators: Vec<Uuid> = planned.iter().map(|p| p.sale.created_by).collect();
    let revs: Vec<i64> = planned.iter().map(|p| p.sale.rev).collect();
    let created = s(&|p| p.sale.created_at.to_rfc3339());
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO sales
             (id, branch_id, icv, invoice_number, customer_id, payment_method, gross, discount,
              subtotal, vat, total, cash_session_id, device_id, client_mutation_id,
              request_digest, previous_invoice_hash, invoice_hash, created_by, rev, created_at)
           SELECT s.id, s.branch_id, s.icv, s.number, nullif(s.customer, '')::uuid, s.method,
                  s.gross::numeric, s.discount::numeric, s.subtotal::numeric, s.vat::numeric,
                  s.total::numeric, nullif(s.session, '')::uuid, nullif(s.device, '')::uuid,
                  CASE WHEN s.has_cmid THEN s.cmid END, s.digest, s.previous, s.hash,
                  s.created_by, s.rev, s.created_at::timestamptz
           FROM unnest({ids}::uuid[], {branches}::uuid[], {icvs}::int8[], {numbers}::text[],
                       {customers}::text[], {methods}::text[], {gross}::text[],
                       {discount}::text[], {subtotal}::text[], {vat}::text[], {total}::text[],
                       {sessions}::text[], {devices}::text[], {cmids}::text[],
                       {has_cmid}::bool[], {digests}::text[], {previous}::text[],
                       {hashes}::text[], {creators}::uuid[], {revs}::int8[], {created}::text[])
             AS s(id, branch_id, icv, number, customer, method, gross, discount, subtotal, vat,
                  total, session, device, cmid, has_cmid, digest, previous, hash, created_by,
                  rev, created_at)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// The lines of `sales` in one statement of constant text.
pub(super) fn items_stmt(sales: &[&Sale]) -> Stmt {
    let lines = || {
        sales
            .iter()
            .flat_map(|s| s.items.iter().map(move |i| (*s, i)))
    };
    let ids: Vec<Uuid> = lines().map(|(_, i)| i.id).collect();
    let sale_ids: Vec<Uuid> = lines().map(|(s, _)| s.id).collect();
    let numbers: Vec<i32> = sales
        .iter()
        .flat_map(|s| (0..s.items.len()).map(|n| n as i32))
        .collect();
    let medicines: Vec<Uuid> = lines().map(|(_, i)| i.medicine_id).collect();
    let batches: Vec<Uuid> = lines().map(|(_, i)| i.batch_id).collect();
    let qtys: Vec<i32> = lines().map(|(_, i)| i.quantity).collect();
    let t = |f: &dyn Fn(&SaleItem) -> Decimal| {
        lines()
            .map(|(_, i)| f(i).to_string())
            .collect::<Vec<String>>()
    };
    let prices = t(&|i| i.unit_price);
    let discounts = t(&|i| i.discount);
    let totals = t(&|i| i.line_total);
    let rates = t(&|i| Decimal::from(i.vat_rate) / Decimal::ONE_HUNDRED);
    let vats = t(&|i| i.vat_amount);
    let costs = t(&|i| i.cost_at_sale);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO sale_items
             (id, sale_id, line_no, medicine_id, batch_id, quantity, unit_price, discount,
              line_total, vat_rate, vat_amount, cost_at_sale)
           SELECT i.id, i.sale_id, i.line_no, i.medicine_id, i.batch_id, i.quantity,
                  i.price::numeric, i.discount::numeric, i.total::numeric, i.rate::numeric,
                  i.vat::numeric, i.cost::numeric
           FROM unnest({ids}::uuid[], {sale_ids}::uuid[], {numbers}::int4[], {medicines}::uuid[],
                       {batches}::uuid[], {qtys}::int4[], {prices}::text[], {discounts}::text[],
                       {totals}::text[], {rates}::text[], {vats}::text[], {costs}::text[])
             AS i(id, sale_id, line_no, medicine_id, batch_id, quantity, price, discount, total,
                  rate, vat, cost)"#
    );
    Stmt::raw(q.sql, q.values)
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

/// The audit-log entries of the run's price overrides, in one statement.
fn overrides_stmt(planned: &[Planned]) -> Stmt {
    let mut entries = Vec::new();
    for p in planned {
        for o in &p.overrides {
            let (before, after) = override_images(&p.sale, o);
            entries.push((
                p.sale.created_by,
                p.sale.id,
                before,
                after,
                p.sale.branch_id,
            ));
        }
    }
    let ids: Vec<Uuid> = entries.iter().map(|_| Uuid::now_v7()).collect();
    let actors: Vec<Uuid> = entries.iter().map(|e| e.0).collect();
    let sales: Vec<String> = entries.iter().map(|e| e.1.to_string()).collect();
    let befores: Vec<String> = entries.iter().map(|e| e.2.to_string()).collect();
    let afters: Vec<String> = entries.iter().map(|e| e.3.to_string()).collect();
    let branches: Vec<Uuid> = entries.iter().map(|e| e.4).collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO audit_log (id, actor_id, action, entity_type, entity_id, before, after, branch_id)
           SELECT a.id, a.actor, 'price_override', 'sale', a.sale, a.before::jsonb,
                  a.after::jsonb, a.branch
           FROM unnest({ids}::uuid[], {actors}::uuid[], {sales}::text[], {befores}::text[],
                       {afters}::text[], {branches}::uuid[])
             AS a(id, actor, sale, before, after, branch)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// Makes `sales` in order inside `tx`: each run of consecutive plain sales
/// through the set-based writer, any other sale on its own (it may lock a
/// prescription or still be refused while writing; see `create_shared`).
/// The outer error is a fault: the caller drops `tx` and makes the sales
/// one at a time.
pub(crate) async fn make_all(tx: &mut Tx<'_>, sales: &[&NewSale]) -> Result<Vec<Result<Sale>>> {
    let mut made = Vec::with_capacity(sales.len());
    let mut rest = sales;
    while let Some(first) = rest.first() {
        let plain = rest.iter().take_while(|s| is_plain(s)).count();
        if plain > 0 {
            let (run, after) = rest.split_at(plain);
            made.extend(make_run(&**tx, run).await?);
            rest = after;
        } else {
            made.push(create_shared(tx, first).await?);
            rest = rest.get(1..).unwrap_or_default();
        }
    }
    Ok(made)
}
