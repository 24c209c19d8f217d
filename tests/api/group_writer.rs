//! The set-based group writer against the one-sale path: random sequences
//! of sales and payments run once through the group writer (the sale
//! desk's shared transaction) and once one at a time, on two copies of one
//! database, must give identical answers, rows, stock, invoice numbers,
//! hashes and balances.

use domain::customers::{Payments, RecordPayment};
use domain::group_commit::Group;
use domain::sales::{desk, CreateSale, Line, NewSale};
use domain::{Command, Role};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{admin_client, admin_conninfo, with_dbname, TestApp};

/// What the sequences draw from, set up once through the API.
struct World {
    branch: Uuid,
    cashier: Uuid,
    pharmacist: Uuid,
    medicines: Vec<Uuid>,
    /// Controlled, with a pending prescription for it.
    controlled: Uuid,
    prescription: Uuid,
    customers: Vec<Uuid>,
}

async fn set_up(app: &TestApp) -> World {
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let cashier = app.user(branch, Role::Cashier).await.id;
    let pharmacist = app.user(branch, Role::Pharmacist).await.id;
    let mut medicines = Vec::new();
    for (i, (price, vat, max)) in [
        (1000, "standard", 0),
        (250, "exempt", 300),
        (75, "standard", 0),
    ]
    .iter()
    .enumerate()
    {
        let m = app
            .medicine(
                &admin,
                json!({"name": format!("Medicine {i}"), "selling_price": price,
                       "vat_category": vat, "max_public_price": max}),
            )
            .await;
        // Two batches each, small enough that stock runs out.
        for expiry in ["2030-06-30", "2031-06-30"] {
            app.receive(&admin, &m["id"], branch, 6, expiry).await;
        }
        medicines.push(id(&m));
    }
    let c = app
        .medicine(
            &admin,
            json!({"name": "Morphine", "selling_price": 500, "is_controlled": true}),
        )
        .await;
    app.receive(&admin, &c["id"], branch, 10, "2030-06-30")
        .await;
    let (_, rx) = app
        .post(
            "/prescriptions",
            &admin,
            json!({"patient_name": "A Patient", "prescriber_name": "Dr Okello",
                   "items": [{"medicine_id": c["id"], "quantity": 3}]}),
        )
        .await;
    let mut customers = Vec::new();
    for limit in [3000, 0] {
        let (_, cu) = app
            .post(
                "/customers",
                &admin,
                json!({"name": format!("Customer {limit}"), "phone": format!("+25670000{limit:04}"),
                       "credit_limit": limit, "is_credit_allowed": limit > 0}),
            )
            .await;
        customers.push(id(&cu));
    }
    let (_, coupon) = app
        .post(
            "/coupons",
            &admin,
            json!({"code": "TWICE", "discount_type": "percentage", "discount_value": 10,
                   "valid_from": null, "valid_until": null, "max_uses": 2}),
        )
        .await;
    assert!(coupon["id"].is_string(), "{coupon}");
    let (status, session) = app
        .post("/sessions/open", &admin, json!({"opening_float": 100}))
        .await;
    assert!(status.is_success(), "{session}");
    World {
        branch,
        cashier,
        pharmacist,
        medicines,
        controlled: id(&c),
        prescription: id(&rx),
        customers,
    }
}

fn id(v: &Value) -> Uuid {
    v["id"].as_str().unwrap().parse().unwrap()
}

#[allow(
    clippy::large_enum_variant,
    reason = "a short-lived list of test operations"
)]
enum Op {
    Sale(NewSale),
    Payment(Uuid, Decimal),
}

/// A random sale or payment; fixed times so both runs hash alike.
fn random_op(rng: &mut StdRng, w: &World, n: usize) -> Op {
    if rng.gen_ratio(1, 4) {
        let customer = w.customers[rng.gen_range(0..w.customers.len())];
        return Op::Payment(customer, Decimal::from(rng.gen_range(1..2500)));
    }
    let mut lines: Vec<Line> = (0..rng.gen_range(1..=3))
        .map(|_| {
            Line::loose(
                w.medicines[rng.gen_range(0..w.medicines.len())],
                rng.gen_range(1..=4),
                // Sometimes below the selling price (an override).
                rng.gen_ratio(1, 6)
                    .then(|| Decimal::from(rng.gen_range(50..300))),
            )
        })
        .collect();
    let mut sale = NewSale {
        branch_id: w.branch,
        user_id: w.cashier,
        role: Role::Cashier,
        lines: Vec::new(),
        payment_method: ["cash", "card", "mobile_money"][rng.gen_range(0..3)].to_owned(),
        customer_id: None,
        prescription_id: None,
        coupon_code: None,
        device_id: None,
        client_mutation_id: rng.gen_ratio(1, 3).then(|| format!("m-{}", n % 7)),
        occurred_at: Some(
            "2026-03-14T09:00:00Z"
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
                + chrono::Duration::seconds(n as i64),
        ),
        signer: None,
    };
    if rng.gen_ratio(1, 3) {
        sale.user_id = w.pharmacist;
        sale.role = Role::Pharmacist;
    }
    match rng.gen_range(0..10) {
        0 => sale.coupon_code = Some("TWICE".to_owned()),
        1 => {
            sale.customer_id = Some(w.customers[rng.gen_range(0..w.customers.len())]);
            sale.payment_method = "credit".to_owned();
        }
        2 => sale.customer_id = Some(w.customers[0]),
        3 => sale.customer_id = Some(Uuid::now_v7()),
        4 => {
            lines = vec![Line::loose(w.controlled, rng.gen_range(1..=2), None)];
            if rng.gen_ratio(2, 3) {
                sale.prescription_id = Some(w.prescription);
            }
        }
        _ => {}
    }
    sale.lines = lines;
    Op::Sale(sale)
}

/// One answer, as comparable text: the sale (its fresh ids left out) or
/// the refusal.
fn answer<T: serde::Serialize>(r: Result<T, &domain::Error>) -> Value {
    match r {
        Ok(made) => {
            let mut v = serde_json::to_value(made).unwrap();
            strip_ids(&mut v);
            v
        }
        Err(e) => json!({"refused": format!("{e:?}")}),
    }
}

/// Removes what is fresh per run (ids made now, revs): the rest must match.
fn strip_ids(v: &mut Value) {
    if let Some(map) = v.as_object_mut() {
        // Fresh ids and revs, and the times of payments (taken now).
        map.retain(|k, _| {
            !matches!(
                k.as_str(),
                "id" | "rev" | "sale_id" | "reference_id" | "ledger_id"
            ) && !k.ends_with("_at")
        });
        for (_, child) in map.iter_mut() {
            strip_ids(child);
        }
    } else if let Some(list) = v.as_array_mut() {
        list.iter_mut().for_each(strip_ids);
    }
}

/// Clones `source` (no one connected) into a new database and returns its URL.
async fn copy_of(source: &str) -> String {
    let name = format!("pharmacy_copy_{}", Uuid::now_v7().simple());
    let admin = admin_client().await;
    admin
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
            &[&source],
        )
        .await
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {source}"))
        .await
        .unwrap();
    with_dbname(admin_conninfo(), &name)
}

fn pool(url: &str) -> domain::db::Pool {
    pharmacy::db::pool(url, &crate::common::test_config().database).unwrap()
}

/// Everything the two runs must agree on once done.
async fn state(pool: &domain::db::Pool, branch: Uuid) -> Value {
    let c = pool.get().await.unwrap();
    let rows = |sql: &'static str| {
        let c = &c;
        async move {
            c.query(sql, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<String>>()
        }
    };
    let chain = domain::sales::verify_chain(&c, branch).await.unwrap();
    json!({
        "batches": rows("SELECT id || ':' || qty_remaining || ':' || status FROM batches ORDER BY id").await,
        "sales": rows("SELECT icv || ':' || invoice_number || ':' || total || ':' || vat || ':' || discount
                       || ':' || payment_method || ':' || coalesce(customer_id::text, '-')
                       || ':' || invoice_hash || ':' || previous_invoice_hash
                       || ':' || coalesce(client_mutation_id, '-') FROM sales ORDER BY icv").await,
        "items": rows("SELECT s.icv || ':' || i.line_no || ':' || i.batch_id || ':' || i.quantity || ':'
                       || i.unit_price || ':' || i.discount || ':' || i.vat_amount
                       FROM sale_items i JOIN sales s ON s.id = i.sale_id ORDER BY s.icv, i.line_no").await,
        "movements": rows("SELECT batch_id || ':' || kind || ':' || sum(qty) FROM stock_movements
                           GROUP BY batch_id, kind ORDER BY 1").await,
        "customers": rows("SELECT id || ':' || current_balance FROM customers ORDER BY id").await,
        "ledger": rows("SELECT customer_id || ':' || transaction_type || ':' || amount || ':' || balance_after
                        FROM customer_ledger ORDER BY customer_id, rev").await,
        "coupons": rows("SELECT code || ':' || usage_count FROM coupons ORDER BY code").await,
        "sessions": rows("SELECT total_sales || ':' || total_revenue || ':' || total_vat || ':'
                          || payment_breakdown::text FROM cash_sessions").await,
        "prescriptions": rows("SELECT p.status || ':' || (p.sale_id IS NOT NULL) || ':'
                               || i.dispensed_quantity
                               FROM prescriptions p JOIN prescription_items i ON i.prescription_id = p.id").await,
        "register": rows("SELECT medicine_id || ':' || quantity FROM controlled_dispenses
                          ORDER BY dispensed_at, quantity").await,
        "audit": rows("SELECT action || ':' || (after ->> 'unit_price') FROM audit_log
                       WHERE action = 'price_override' ORDER BY after ->> 'invoice_number'").await,
        // A group moves each batch once with its net quantity, so batches
        // are compared by their last change; everything else by count.
        "feed": rows("SELECT entity || ':' || count(*) FROM change_log WHERE entity <> 'batch'
                      GROUP BY entity ORDER BY 1").await,
        "feed_batches": rows("SELECT DISTINCT ON (entity_id) entity_id || ':' || (payload ->> 'qty_remaining')
                              FROM change_log WHERE entity = 'batch' ORDER BY entity_id, rev DESC").await,
        "chain": chain.status,
    })
}

fn payment(w: &World, customer: Uuid, amount: Decimal) -> RecordPayment {
    RecordPayment {
        customer_id: customer,
        branch_id: w.branch,
        amount,
        notes: String::new(),
        user_id: w.cashier,
        client_mutation_id: None,
        signer: None,
    }
}

#[tokio::test]
async fn the_group_writer_answers_and_writes_as_one_sale_at_a_time() {
    for seed in 0..4u64 {
        let app = TestApp::spawn().await;
        let world = set_up(&app).await;
        app.stop_server();
        let source = app.db_name().to_owned();
        let (grouped_url, single_url) = (copy_of(&source).await, copy_of(&source).await);
        let (grouped, single) = (pool(&grouped_url), pool(&single_url));
        let mut rng = StdRng::seed_from_u64(seed);
        let ops: Vec<Op> = (0..60).map(|n| random_op(&mut rng, &world, n)).collect();
        let mut i = 0;
        while i < ops.len() {
            // A run of sales: one group there, one at a time here.
            let run: Vec<NewSale> = ops[i..]
                .iter()
                .map_while(|op| match op {
                    Op::Sale(s) => Some(s.clone()),
                    Op::Payment(..) => None,
                })
                .collect();
            if run.is_empty() {
                // A run of payments: one group there, one at a time here.
                let payments: Vec<RecordPayment> = ops[i..]
                    .iter()
                    .map_while(|op| match op {
                        Op::Payment(customer, amount) => Some(payment(&world, *customer, *amount)),
                        Op::Sale(_) => None,
                    })
                    .collect();
                let together = Payments::together(&grouped, &payments)
                    .await
                    .expect("the payments commit");
                for (k, p) in payments.iter().enumerate() {
                    let alone = p.clone().run(single.clone()).await;
                    assert_eq!(
                        answer(together[k].as_ref()),
                        answer(alone.as_ref()),
                        "seed {seed}, op {}",
                        i + k
                    );
                }
                i += payments.len();
                continue;
            }
            let together = desk::in_one_transaction(&grouped, &run)
                .await
                .expect("the group commits");
            for (k, sale) in run.iter().enumerate() {
                let alone = CreateSale(sale.clone()).run(single.clone()).await;
                let a = answer(together[k].as_ref().map(|o| (&o.sale, o.replayed)));
                let b = answer(alone.as_ref().map(|o| (&o.sale, o.replayed)));
                assert_eq!(a, b, "seed {seed}, op {}", i + k);
            }
            i += run.len();
        }
        assert_eq!(
            state(&grouped, world.branch).await,
            state(&single, world.branch).await,
            "seed {seed}"
        );
    }
}
