//! `seed-large`: a year of trading for the reports benchmark, built with
//! set-based SQL (`INSERT … SELECT generate_series`) in one transaction.
//!
//! On top of the demo chain it adds 17 branches `GEN01`..`GEN17` (20 in all,
//! one user of every role each, demo password), 1,000 medicines, 25
//! suppliers, 200 credit customers and ~1,000,000 sale lines spread over the
//! last 365 days. The data keep every invariant the service keeps:
//!
//! * stock is a ledger: each batch gets an `IN` movement of `qty_received`
//!   and a `SALE` movement per line taken from it, and `qty_remaining` is
//!   what is left (never negative). A line is taken from the batch of its
//!   medicine received most recently before the sale (one batch a month per
//!   branch and medicine), which has not expired;
//! * icv is gapless per branch in time order, the counter row holds the last
//!   icv and the last invoice hash;
//! * the invoice hash chain is computed with the service's own
//!   `domain::sales::invoice_hash`, so `GET /sales/verify-chain` passes;
//! * credit sales write `SALE` ledger rows and customers' balances are the
//!   ledger sums.
//!
//! Generated rows are not written to the sync change log (tills bootstrap
//! from the snapshot), and no cash sessions or controlled medicines are made.

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Pool};
use rust_decimal::Decimal;
use uuid::Uuid;

use crate::auth::passwords;
use crate::seed::{self, demo_email, DEMO_PASSWORD};
use domain::branches::{self, BranchFields};
use domain::sales::{invoice_hash, Sale, SaleItem};
use domain::users::{self, NewUser};
use domain::{db, Result, Role};

/// How big a data set to build.
#[derive(Debug, Clone)]
pub struct LargeSpec {
    /// Sale lines to aim at (each sale has 1 to 4 lines, 2.5 on average).
    pub sale_lines: u64,
    /// Generated branches (the demo chain brings 3 more).
    pub branches: u32,
    pub medicines: i32,
}

impl Default for LargeSpec {
    fn default() -> Self {
        LargeSpec {
            sale_lines: 1_000_000,
            branches: 17,
            medicines: 1_000,
        }
    }
}

/// What was built.
#[derive(Debug)]
pub struct LargeOutcome {
    pub sales: i64,
    pub sale_lines: i64,
    pub batches: i64,
    pub movements: i64,
    pub seconds: f64,
    /// What `domain::stock::invariant_violations` reports afterwards (nothing).
    pub violations: Vec<String>,
}

/// Monthly restock period, in seconds (365 days / 12).
const PERIOD_SECS: f64 = 365.0 * 86_400.0 / 12.0;
const SUPPLIERS: i32 = 25;
const CUSTOMERS: i32 = 200;

/// Builds the data set. `None` when it is already there.
pub async fn seed_large(pool: &Pool, spec: &LargeSpec) -> Result<Option<LargeOutcome>> {
    let started = Instant::now();
    seed::seed_demo(pool).await?;
    let mut client = pool.get().await?;
    if users::credentials(&client, &demo_email(Role::Admin, "GEN01"))
        .await?
        .is_some()
    {
        return Ok(None);
    }
    let hash = passwords::hash_blocking(DEMO_PASSWORD.to_owned()).await?;
    let tx = client.transaction().await?;
    // Bulk statements run for minutes, beyond the service's statement timeout.
    tx.batch_execute(
        "SET LOCAL statement_timeout = 0; SET LOCAL work_mem = '256MB'; SELECT setseed(0.2026);",
    )
    .await?;
    tx.batch_execute(SCRATCH).await?;
    add_branches(&tx, spec, &hash).await?;
    step("catalogue", catalogue(&tx, spec.medicines)).await?;
    let per_branch = (spec.sale_lines as f64 / 2.5 / f64::from(spec.branches.max(1))).ceil() as i64;
    step("sales", sales(&tx, per_branch, spec.medicines)).await?;
    step("batches", batches(&tx)).await?;
    step("invoice hashes", hash_chains(&tx)).await?;
    step("rows", write_rows(&tx)).await?;
    let counts = count(&tx).await?;
    tx.batch_execute("DROP FUNCTION pg_temp.uuid7(timestamptz)")
        .await?;
    domain::db::commit(tx).await?;
    // Index-only scans need the visibility map; fresh statistics for the planner.
    // (A multi-statement string would run in one transaction, which VACUUM refuses.)
    client.batch_execute("SET statement_timeout = 0").await?;
    // The months that are over, rolled up chain-wide as a running service
    // would have done long before (0030).
    client
        .batch_execute("SELECT roll_up_chain_months()")
        .await?;
    client
        .batch_execute(
            "VACUUM (ANALYZE) sales, sale_items, batches, stock_movements, customer_ledger, medicines, \
             sales_days, medicine_days, medicine_months, chain_months, medicine_chain_months",
        )
        .await?;
    // Comparing a year of summaries with the ledger takes longer than the
    // service's statement timeout too.
    let violations = domain::stock::invariant_violations(&client).await?;
    client.batch_execute("RESET statement_timeout").await?;
    Ok(Some(LargeOutcome {
        seconds: started.elapsed().as_secs_f64(),
        violations,
        ..counts
    }))
}

/// Runs one stage and logs how long it took.
async fn step<F>(name: &str, stage: F) -> Result<()>
where
    F: std::future::Future<Output = Result<()>>,
{
    let t = Instant::now();
    stage.await?;
    tracing::info!(
        stage = name,
        seconds = t.elapsed().as_secs_f64(),
        "seed-large"
    );
    Ok(())
}

/// Scratch tables (dropped at commit) and a UUID v7 maker for SQL.
const SCRATCH: &str = r#"
CREATE FUNCTION pg_temp.uuid7(t timestamptz) RETURNS uuid LANGUAGE sql VOLATILE AS $$
    SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 16))::uuid
    FROM (SELECT lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0') AS h,
                 gen_random_uuid()::text AS r) x
$$;
CREATE TEMP TABLE gen_branch (bn int PRIMARY KEY, id uuid NOT NULL, code text NOT NULL,
    manager uuid NOT NULL, sellers uuid[] NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_med (mn int PRIMARY KEY, id uuid NOT NULL, price numeric(14, 2) NOT NULL,
    rate numeric(6, 4) NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_supplier (sn int PRIMARY KEY, id uuid NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_customer (cn int PRIMARY KEY, id uuid NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_sale (id uuid PRIMARY KEY, bn int NOT NULL, icv bigint NOT NULL,
    created_at timestamptz NOT NULL, seller uuid NOT NULL, method text NOT NULL, customer uuid,
    nlines int NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_item (id uuid NOT NULL, sale_id uuid NOT NULL, bn int NOT NULL,
    line_no int NOT NULL, mn int NOT NULL, k int NOT NULL, quantity int NOT NULL,
    created_at timestamptz NOT NULL, seller uuid NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_batch (id uuid NOT NULL, bn int NOT NULL, mn int NOT NULL, k int NOT NULL,
    sn int NOT NULL, created_at timestamptz NOT NULL, expiry date NOT NULL,
    qty_received int NOT NULL, qty_remaining int NOT NULL, unit_cost numeric(14, 2) NOT NULL,
    regulator text NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_line (id uuid NOT NULL, sale_id uuid NOT NULL, bn int NOT NULL,
    line_no int NOT NULL, medicine_id uuid NOT NULL, batch_id uuid NOT NULL, branch_id uuid NOT NULL,
    quantity int NOT NULL, unit_price numeric(14, 2) NOT NULL, line_total numeric(14, 2) NOT NULL,
    vat_rate numeric(6, 4) NOT NULL, vat_amount numeric(14, 2) NOT NULL,
    cost_at_sale numeric(14, 2) NOT NULL, created_at timestamptz NOT NULL, seller uuid NOT NULL)
    ON COMMIT DROP;
CREATE TEMP TABLE gen_total (sale_id uuid PRIMARY KEY, total numeric(14, 2) NOT NULL,
    vat numeric(14, 2) NOT NULL) ON COMMIT DROP;
CREATE TEMP TABLE gen_hash (sale_id uuid PRIMARY KEY, previous text NOT NULL, hash text NOT NULL)
    ON COMMIT DROP;
"#;

/// Branches `GEN01`.. with one user of every role each (demo password).
async fn add_branches<C: GenericClient + Sync>(tx: &C, spec: &LargeSpec, hash: &str) -> Result<()> {
    let org = seed::ensure_organisation(tx, "Demo Pharmacy Chain").await?;
    for n in 1..=spec.branches {
        let code = format!("GEN{n:02}");
        let fields = BranchFields {
            code: Some(code.clone()),
            name: Some(format!("Generated Pharmacy {n:02}")),
            city: Some("Kampala".to_owned()),
            currency_code: Some("UGX".to_owned()),
            ..Default::default()
        };
        let branch = branches::insert(tx, org, fields).await?;
        let mut by_role = HashMap::new();
        for role in Role::ALL {
            let user = NewUser {
                org_id: org,
                branch_id: branch.id,
                email: demo_email(role, &code),
                password_hash: hash.to_owned(),
                full_name: format!("{} {code}", role.as_str().replace('_', " ")),
                phone: String::new(),
                role,
            };
            by_role.insert(role, users::insert(tx, user).await?.id);
        }
        let (bn, id) = (n as i32, branch.id);
        let manager = by_role[&Role::InventoryManager];
        let sellers: Vec<Uuid> = [Role::Pharmacist, Role::Cashier, Role::BranchManager]
            .iter()
            .map(|r| by_role[r])
            .collect();
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            "INSERT INTO gen_branch VALUES ({bn}, {id}, {code}, {manager}, {sellers})"
        );
        db::raw_all(tx, &q.sql, q.values).await?;
    }
    Ok(())
}

/// Categories, medicines (20 % standard-rated, 10 % exempt, the rest
/// zero-rated), suppliers and credit customers.
async fn catalogue<C: GenericClient + Sync>(tx: &C, medicines: i32) -> Result<()> {
    tx.batch_execute(
        r#"INSERT INTO categories (slug, name)
           SELECT 'gen-' || lpad(g::text, 2, '0'), 'Generated category ' || lpad(g::text, 2, '0')
           FROM generate_series(1, 24) g ON CONFLICT (slug) DO NOTHING"#,
    )
    .await?;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO gen_med (mn, id, price, rate)
           SELECT g, pg_temp.uuid7(now() - interval '400 days'), 50 * (4 + floor(random() * 600)),
                  CASE WHEN g % 10 < 2 THEN 0.18 ELSE 0 END
           FROM generate_series(1, {medicines}) g"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    let (suppliers, customers) = (SUPPLIERS, CUSTOMERS);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH s AS (INSERT INTO gen_supplier
                      SELECT g, pg_temp.uuid7(now() - interval '400 days') FROM generate_series(1, {suppliers}) g
                      RETURNING *),
                c AS (INSERT INTO gen_customer
                      SELECT g, pg_temp.uuid7(now() - interval '400 days') FROM generate_series(1, {customers}) g
                      RETURNING *)
           SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM c)"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    tx.batch_execute(CATALOGUE_ROWS).await?;
    Ok(())
}

const CATALOGUE_ROWS: &str = r#"
INSERT INTO medicines (id, name, generic_name, barcode, category, form, strength, unit,
    selling_price, low_stock_threshold, vat_category, regulator_registration_no, created_at, updated_at)
SELECT id, 'Generated medicine ' || lpad(mn::text, 4, '0'), 'generic ' || mn, '8' || lpad(mn::text, 12, '0'),
       'gen-' || lpad((1 + mn % 24)::text, 2, '0'), 'tablet', ((mn % 9 + 1) * 50) || 'mg', 'tablet',
       price, 5 + mn % 46,
       CASE WHEN rate > 0 THEN 'standard' WHEN mn % 10 = 2 THEN 'exempt' ELSE 'zero' END,
       'NDA/GEN/' || lpad(mn::text, 5, '0'), now() - interval '400 days', now() - interval '400 days'
FROM gen_med;
INSERT INTO suppliers (id, name, tax_number, lead_time_days, created_at, updated_at)
SELECT id, 'Generated Supplier ' || lpad(sn::text, 2, '0'), '2000' || lpad(sn::text, 6, '0'), 3 + sn % 12,
       now() - interval '400 days', now() - interval '400 days'
FROM gen_supplier;
INSERT INTO customers (id, name, phone, national_id, is_credit_allowed, credit_limit, created_at, updated_at)
SELECT id, 'Generated Customer ' || lpad(cn::text, 3, '0'), '+25670' || lpad(cn::text, 7, '0'),
       'GN' || lpad(cn::text, 9, '0'), true, 500000000, now() - interval '400 days', now() - interval '400 days'
FROM gen_customer;
"#;

/// Sales spread uniformly over the last 365 days, icv in time order per
/// branch; 1 to 4 lines each, popular medicines sold far more often; each
/// line marked with the month (`k`) of the batch it is taken from: the
/// month of the sale, or the one before when this month's batch (received
/// at a hashed moment in the first half of the month) had not arrived yet.
async fn sales<C: GenericClient + Sync>(tx: &C, per_branch: i64, medicines: i32) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO gen_sale (id, bn, icv, created_at, seller, method, customer, nlines)
           SELECT pg_temp.uuid7(x.t), x.bn, row_number() OVER (PARTITION BY x.bn ORDER BY x.t), x.t,
                  x.seller, x.method, CASE WHEN x.method = 'credit' THEN c.id END, x.nlines
           FROM (SELECT b.bn, now() - random() * interval '365 days' AS t,
                        b.sellers[1 + floor(random() * 3)::int] AS seller,
                        (ARRAY['cash', 'cash', 'cash', 'cash', 'card', 'card', 'mobile_money',
                               'mobile_money', 'mobile_money', 'credit'])[1 + floor(random() * 10)::int] AS method,
                        1 + floor(random() * 200)::int AS cn,
                        1 + floor(random() * 4)::int AS nlines
                 FROM gen_branch b, generate_series(1, {per_branch}::bigint) g) x
           LEFT JOIN gen_customer c ON c.cn = x.cn"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    let period = PERIOD_SECS;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO gen_item (id, sale_id, bn, line_no, mn, k, quantity, created_at, seller)
           SELECT pg_temp.uuid7(y.created_at), y.sale_id, y.bn, y.line_no, y.mn,
                  CASE WHEN y.k0 >= 1 AND y.created_at < now() - interval '365 days'
                            + make_interval(secs => y.k0 * {period}::float8
                                + ((hashtext(y.bn || ':' || y.mn || ':' || y.k0) & 65535) / 65536.0) * {period}::float8 / 2)
                       THEN y.k0 - 1 ELSE y.k0 END,
                  y.quantity, y.created_at, y.seller
           FROM (SELECT s.id AS sale_id, s.bn, l AS line_no, s.created_at, s.seller,
                        1 + floor({medicines}::int * power(random(), 2))::int AS mn,
                        least(11, floor(extract(epoch FROM s.created_at - (now() - interval '365 days')) / {period}::float8))::int AS k0,
                        1 + floor(random() * 3)::int AS quantity
                 FROM gen_sale s CROSS JOIN LATERAL generate_series(0, s.nlines - 1) l) y"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    Ok(())
}

/// One batch per branch, medicine and month it sold in (holding exactly
/// what was sold from it), this month's batch for every medicine holding
/// what is left on the shelf (5 % nothing), and for 6 % of the shelves an
/// older lot with expiry dates from 120 days ago to 180 days ahead (some
/// quarantined or recalled). Then the lines get their batch, price and VAT.
async fn batches<C: GenericClient + Sync>(tx: &C) -> Result<()> {
    let period = PERIOD_SECS;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO gen_batch (id, bn, mn, k, sn, created_at, expiry, qty_received, qty_remaining,
                                  unit_cost, regulator)
           SELECT pg_temp.uuid7(z.r), z.bn, z.mn, z.k, 1 + (z.mn + z.k) % 25, z.r, (z.r + interval '730 days')::date,
                  z.sold + z.left_over, z.left_over,
                  round(m.price * (0.55 + 0.02 * (z.k % 4)), 2), 'active'
           FROM (SELECT w.*,
                        CASE WHEN w.k = 0 THEN now() - interval '366 days'
                             ELSE now() - interval '365 days' + make_interval(secs => w.k * {period}::float8
                                  + ((hashtext(w.bn || ':' || w.mn || ':' || w.k) & 65535) / 65536.0) * {period}::float8 / 2)
                        END AS r,
                        CASE WHEN w.k < 11 OR random() < 0.05 THEN 0 ELSE 5 + floor(random() * 250)::int END AS left_over
                 FROM (SELECT bn, mn, k, sum(quantity)::int AS sold FROM gen_item GROUP BY bn, mn, k
                       UNION ALL
                       SELECT b.bn, m.mn, 11, 0 FROM gen_branch b CROSS JOIN gen_med m
                       WHERE NOT EXISTS (SELECT 1 FROM gen_item i WHERE i.bn = b.bn AND i.mn = m.mn AND i.k = 11)) w) z
           JOIN gen_med m ON m.mn = z.mn
           WHERE z.sold + z.left_over > 0"#
    );
    db::raw_all(tx, &q.sql, q.values).await?;
    tx.batch_execute(OLD_LOTS_AND_LINES).await?;
    Ok(())
}

const OLD_LOTS_AND_LINES: &str = r#"
INSERT INTO gen_batch (id, bn, mn, k, sn, created_at, expiry, qty_received, qty_remaining, unit_cost, regulator)
SELECT pg_temp.uuid7(now() - interval '375 days'), x.bn, x.mn, 100, 1 + x.mn % 25, now() - interval '375 days',
       (now() + make_interval(days => x.days))::date, x.qty, x.qty, round(x.price * 0.6, 2),
       CASE WHEN x.status < 0.05 THEN 'quarantined' WHEN x.status < 0.07 THEN 'recalled' ELSE 'active' END
FROM (SELECT b.bn, m.mn, m.price, random() AS pick, random() AS status,
             floor(random() * 300)::int - 120 AS days, 5 + floor(random() * 46)::int AS qty
      FROM gen_branch b CROSS JOIN gen_med m) x
WHERE x.pick < 0.06;
CREATE INDEX ON gen_batch (bn, mn, k);
INSERT INTO gen_line (id, sale_id, bn, line_no, medicine_id, batch_id, branch_id, quantity, unit_price,
                      line_total, vat_rate, vat_amount, cost_at_sale, created_at, seller)
SELECT i.id, i.sale_id, i.bn, i.line_no, m.id, g.id, b.id, i.quantity, m.price, i.quantity * m.price, m.rate,
       round(i.quantity * m.price * m.rate / (1 + m.rate), 2), g.unit_cost, i.created_at, i.seller
FROM gen_item i
JOIN gen_med m ON m.mn = i.mn
JOIN gen_branch b ON b.bn = i.bn
JOIN gen_batch g ON g.bn = i.bn AND g.mn = i.mn AND g.k = i.k;
INSERT INTO gen_total SELECT sale_id, sum(line_total), sum(vat_amount) FROM gen_line GROUP BY sale_id;
"#;

/// Chains every branch's invoices in icv order with the service's own hash.
async fn hash_chains<C: GenericClient + Sync>(tx: &C) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT bn, id, code FROM gen_branch ORDER BY bn"
    );
    for b in db::raw_all(tx, &q.sql, q.values).await? {
        let (bn, branch_id, code): (i32, Uuid, String) = (b.get(0), b.get(1), b.get(2));
        let mut sales = branch_sales(tx, bn, branch_id, &code).await?;
        let mut previous = domain::sales::GENESIS_HASH.to_owned();
        let (mut ids, mut prevs, mut hashes) = (Vec::new(), Vec::new(), Vec::new());
        for s in &mut sales {
            s.previous_invoice_hash = previous;
            let hash = invoice_hash(s, s.created_at);
            ids.push(s.id);
            prevs.push(std::mem::take(&mut s.previous_invoice_hash));
            hashes.push(hash.clone());
            previous = hash;
        }
        let q = sea_query::raw_query!(
            PostgresQueryBuilder,
            "INSERT INTO gen_hash SELECT * FROM unnest({ids}::uuid[], {prevs}::text[], {hashes}::text[])"
        );
        db::raw_all(tx, &q.sql, q.values).await?;
    }
    Ok(())
}

/// A branch's generated sales with their lines, in icv order: exactly the
/// fields the invoice hash covers.
async fn branch_sales<C: GenericClient + Sync>(
    tx: &C,
    bn: i32,
    branch_id: Uuid,
    code: &str,
) -> Result<Vec<Sale>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT s.id, s.icv, s.created_at, s.method, s.customer, t.total, t.vat, s.seller
           FROM gen_sale s JOIN gen_total t ON t.sale_id = s.id
           WHERE s.bn = {bn} ORDER BY s.icv"#
    );
    let mut sales: Vec<Sale> = db::raw_all(tx, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| {
            let (total, vat): (Decimal, Decimal) = (r.get(5), r.get(6));
            let icv: i64 = r.get(1);
            Sale {
                id: r.get(0),
                branch_id,
                icv,
                invoice_number: format!("{code}-{icv:08}"),
                customer_id: r.get(4),
                prescription_id: None,
                coupon_code: None,
                payment_method: r.get(3),
                discount: Decimal::ZERO,
                subtotal: total - vat,
                vat,
                total,
                cash_session_id: None,
                device_id: None,
                client_mutation_id: None,
                status: "completed".to_owned(),
                previous_invoice_hash: String::new(),
                invoice_hash: String::new(),
                created_by: r.get(7),
                created_by_name: String::new(),
                rev: 0,
                created_at: r.get::<_, DateTime<Utc>>(2),
                items: Vec::new(),
                fiscal: None,
            }
        })
        .collect();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT l.sale_id, l.id, l.medicine_id, l.batch_id, l.quantity, l.unit_price, l.line_total,
                  l.vat_amount, l.cost_at_sale
           FROM gen_line l JOIN gen_sale s ON s.id = l.sale_id
           WHERE l.bn = {bn} ORDER BY s.icv, l.line_no, l.id"#
    );
    let mut at = 0;
    for r in db::raw_all(tx, &q.sql, q.values).await? {
        // Lines arrive grouped by sale, in the sales' order.
        let sale_id: Uuid = r.get(0);
        while at < sales.len() && sales[at].id != sale_id {
            at += 1;
        }
        if let Some(s) = sales.get_mut(at) {
            s.items.push(SaleItem {
                id: r.get(1),
                medicine_id: r.get(2),
                medicine_name: String::new(),
                batch_id: r.get(3),
                quantity: r.get(4),
                pack_id: None,
                pack_units: 1,
                base_quantity: r.get(4),
                serial: None,
                gtin: None,
                unit_price: r.get(5),
                discount: Decimal::ZERO,
                line_total: r.get(6),
                vat_rate: 0,
                vat_amount: r.get(7),
                cost_at_sale: r.get(8),
            });
        }
    }
    Ok(sales)
}

/// Copies the scratch tables into the real ones: batches and their IN
/// movements, sales, lines and their SALE movements, the invoice counters,
/// and the credit ledger with the customers' balances.
async fn write_rows<C: GenericClient + Sync>(tx: &C) -> Result<()> {
    tx.batch_execute(WRITE_ROWS).await?;
    Ok(())
}

const WRITE_ROWS: &str = r#"
INSERT INTO batches (id, medicine_id, branch_id, supplier_id, batch_number, expiry_date, manufacturing_date,
    qty_received, qty_remaining, unit_cost, status, regulator_status, origin, created_by, created_at, updated_at)
SELECT g.id, m.id, b.id, sp.id, 'G' || g.bn || '-' || g.mn || '-' || g.k, g.expiry, g.created_at::date - 30,
       g.qty_received, g.qty_remaining, g.unit_cost,
       CASE WHEN g.qty_remaining > 0 THEN 'active' ELSE 'depleted' END, g.regulator, 'purchase',
       b.manager, g.created_at, g.created_at
FROM gen_batch g
JOIN gen_med m ON m.mn = g.mn
JOIN gen_branch b ON b.bn = g.bn
JOIN gen_supplier sp ON sp.sn = g.sn
ORDER BY g.created_at;
INSERT INTO stock_movements (id, batch_id, medicine_id, branch_id, kind, qty, created_by, created_at)
SELECT pg_temp.uuid7(g.created_at), g.id, m.id, b.id, 'IN', g.qty_received, b.manager, g.created_at
FROM gen_batch g
JOIN gen_med m ON m.mn = g.mn
JOIN gen_branch b ON b.bn = g.bn
ORDER BY g.created_at;
INSERT INTO sales (id, branch_id, icv, invoice_number, customer_id, payment_method, gross, discount,
    subtotal, vat, total, previous_invoice_hash, invoice_hash, created_by, created_at)
SELECT s.id, b.id, s.icv, b.code || '-' || lpad(s.icv::text, 8, '0'), s.customer, s.method, t.total, 0,
       t.total - t.vat, t.vat, t.total, h.previous, h.hash, s.seller, s.created_at
FROM gen_sale s
JOIN gen_branch b ON b.bn = s.bn
JOIN gen_total t ON t.sale_id = s.id
JOIN gen_hash h ON h.sale_id = s.id
ORDER BY s.created_at;
INSERT INTO sale_items (id, sale_id, line_no, medicine_id, batch_id, quantity, unit_price, discount,
    line_total, vat_rate, vat_amount, cost_at_sale)
SELECT id, sale_id, line_no, medicine_id, batch_id, quantity, unit_price, 0, line_total, vat_rate,
       vat_amount, cost_at_sale
FROM gen_line
ORDER BY created_at, sale_id, line_no;
INSERT INTO stock_movements (id, batch_id, medicine_id, branch_id, kind, qty, reference_type, reference_id,
    created_by, created_at)
SELECT pg_temp.uuid7(created_at), batch_id, medicine_id, branch_id, 'SALE', -quantity, 'sale', sale_id,
       seller, created_at
FROM gen_line
ORDER BY created_at;
UPDATE invoice_counters c SET last_icv = x.icv, last_hash = h.hash
FROM (SELECT DISTINCT ON (bn) bn, id, icv FROM gen_sale ORDER BY bn, icv DESC) x
JOIN gen_branch b ON b.bn = x.bn
JOIN gen_hash h ON h.sale_id = x.id
WHERE c.branch_id = b.id;
INSERT INTO customer_ledger (id, customer_id, branch_id, transaction_type, amount, balance_after,
    reference_id, created_by, created_at)
SELECT pg_temp.uuid7(s.created_at), s.customer, b.id, 'SALE', t.total,
       sum(t.total) OVER (PARTITION BY s.customer ORDER BY s.created_at, s.id), s.id, s.seller, s.created_at
FROM gen_sale s
JOIN gen_total t ON t.sale_id = s.id
JOIN gen_branch b ON b.bn = s.bn
WHERE s.method = 'credit';
UPDATE customers c SET current_balance = x.owed
FROM (SELECT s.customer, sum(t.total) AS owed FROM gen_sale s JOIN gen_total t ON t.sale_id = s.id
      WHERE s.method = 'credit' GROUP BY s.customer) x
WHERE c.id = x.customer;
"#;

/// Rows the generator wrote.
async fn count<C: GenericClient + Sync>(tx: &C) -> Result<LargeOutcome> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT (SELECT count(*) FROM gen_sale), (SELECT count(*) FROM gen_line),
                  (SELECT count(*) FROM gen_batch),
                  (SELECT count(*) FROM gen_batch) + (SELECT count(*) FROM gen_line)"#
    );
    let rows = db::raw_all(tx, &q.sql, q.values).await?;
    let r = rows
        .first()
        .ok_or_else(|| domain::Error::internal("count returned no row"))?;
    Ok(LargeOutcome {
        sales: r.get(0),
        sale_lines: r.get(1),
        batches: r.get(2),
        movements: r.get(3),
        seconds: 0.0,
        violations: Vec::new(),
    })
}
