use std::collections::HashSet;

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_all_mismatched, assert_one_effect, assert_problem, Role, TestApp};

/// A branch with an admin and a cashier signed in.
struct Shop {
    app: TestApp,
    branch: Uuid,
    admin: String,
    cashier: String,
}

impl Shop {
    async fn open() -> Shop {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        Shop {
            app,
            branch,
            admin,
            cashier,
        }
    }

    /// A medicine with `qty` units in one batch expiring in 2030.
    async fn stocked(&self, body: Value, qty: i64) -> Value {
        let m = self.app.medicine(&self.admin, body).await;
        if qty > 0 {
            self.app
                .receive(&self.admin, &m["id"], self.branch, qty, "2030-12-31")
                .await;
        }
        m
    }

    async fn sell(&self, token: &str, body: Value) -> (StatusCode, Value) {
        self.app.post("/sales", token, body).await
    }

    async fn stock_of(&self, m: &Value) -> i64 {
        let (_, read) = self
            .app
            .get(
                &format!("/medicines/{}", m["id"].as_str().unwrap()),
                &self.cashier,
            )
            .await;
        read["stock_quantity"].as_i64().unwrap()
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }
}

fn one(m: &Value, qty: i64) -> Value {
    json!({"items": [{"medicine_id": m["id"], "quantity": qty}], "payment_method": "cash"})
}

#[tokio::test]
async fn a_sale_answers_201_with_invoice_and_totals() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Paracetamol", "selling_price": 500}), 20)
        .await;
    let (status, sale) = shop.sell(&shop.cashier, one(&m, 3)).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["icv"], 1);
    assert_eq!(sale["invoice_number"], "KLA-00000001");
    assert_eq!(sale["total"], "1500.00");
    assert_eq!(sale["vat"], "0.00");
    assert_eq!(sale["subtotal"], "1500.00");
    assert_eq!(sale["payment_method"], "cash");
    assert_eq!(sale["items"][0]["quantity"], 3);
    assert_eq!(sale["items"][0]["unit_price"], "500.00");
    assert_eq!(sale["items"][0]["cost_at_sale"], "100.00");
    assert_eq!(sale["previous_invoice_hash"], "0".repeat(64));
    assert_eq!(sale["invoice_hash"].as_str().unwrap().len(), 64);
    assert_eq!(shop.stock_of(&m).await, 17);
    let (status, again) = shop
        .app
        .get(
            &format!("/sales/{}", sale["id"].as_str().unwrap()),
            &shop.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // The read adds the invoice's fiscal status (docs/fiscal.md); the rest
    // is the sale as answered.
    let mut again = again;
    let fiscal = again.as_object_mut().unwrap().remove("fiscal").unwrap();
    assert!(fiscal["status"].is_string(), "{fiscal}");
    assert_eq!(again, sale);
    let (_, second) = shop.sell(&shop.cashier, one(&m, 1)).await;
    assert_eq!(second["icv"], 2);
    assert_eq!(second["previous_invoice_hash"], sale["invoice_hash"]);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn vat_is_taken_out_of_inclusive_prices_per_category() {
    let shop = Shop::open().await;
    let client = shop.app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO settings (org_id, tax_enabled, tax_rate) VALUES ($1, true, 0.18)",
            &[&shop.app.org_id],
        )
        .await
        .unwrap();
    let standard = shop
        .stocked(json!({"name": "Cough syrup", "selling_price": 1180}), 10)
        .await;
    let zero = shop
        .stocked(
            json!({"name": "ORS", "selling_price": 300, "vat_category": "zero"}),
            10,
        )
        .await;
    let (status, sale) = shop
        .sell(
            &shop.cashier,
            json!({"items": [{"medicine_id": standard["id"], "quantity": 1},
                             {"medicine_id": zero["id"], "quantity": 2}],
                   "payment_method": "card"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["total"], "1780.00");
    assert_eq!(sale["vat"], "180.00");
    assert_eq!(sale["subtotal"], "1600.00");
    assert_eq!(sale["items"][0]["vat_rate"], 18);
    assert_eq!(sale["items"][0]["vat_amount"], "180.00");
    assert_eq!(sale["items"][1]["vat_rate"], 0);
}

#[tokio::test]
async fn fefo_takes_the_earliest_sellable_batch_first() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Amoxicillin", "selling_price": 1000}), 0)
        .await;
    let mut batches = Vec::new();
    for expiry in [
        "2020-01-31",
        "2027-01-31",
        "2027-02-28",
        "2029-06-30",
        "2028-06-30",
    ] {
        let b = shop
            .app
            .receive(&shop.admin, &m["id"], shop.branch, 10, expiry)
            .await;
        batches.push(Uuid::parse_str(b["id"].as_str().unwrap()).unwrap());
    }
    let client = shop.app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE batches SET regulator_status = 'quarantined' WHERE id = $1",
            &[&batches[1]],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE batches SET regulator_status = 'recalled' WHERE id = $1",
            &[&batches[2]],
        )
        .await
        .unwrap();
    let (status, sale) = shop.sell(&shop.cashier, one(&m, 12)).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let taken: Vec<(String, i64)> = sale["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["batch_id"].as_str().unwrap().to_owned(),
                i["quantity"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        taken,
        vec![(batches[4].to_string(), 10), (batches[3].to_string(), 2)]
    );
    // What is left sellable: 8 in the 2029 batch. Expired, quarantined and
    // recalled stock is never sold.
    let (status, problem) = shop.sell(&shop.cashier, one(&m, 9)).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].quantity");
    assert!(problem["detail"].as_str().unwrap().contains("8 available"));
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn a_refused_sale_changes_nothing() {
    let shop = Shop::open().await;
    let a = shop
        .stocked(json!({"name": "A", "selling_price": 100}), 5)
        .await;
    let b = shop
        .stocked(json!({"name": "B", "selling_price": 100}), 1)
        .await;
    shop.sell(&shop.cashier, one(&a, 1)).await;
    let (status, problem) = shop
        .sell(
            &shop.cashier,
            json!({"items": [{"medicine_id": a["id"], "quantity": 2},
                             {"medicine_id": b["id"], "quantity": 2}],
                   "payment_method": "cash"}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(shop.stock_of(&a).await, 4);
    assert_eq!(shop.stock_of(&b).await, 1);
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 1);
    assert_eq!(shop.scalar("SELECT last_icv FROM invoice_counters c JOIN branches b ON b.id = c.branch_id WHERE b.code = 'KLA'").await, 1);
    let (_, next) = shop.sell(&shop.cashier, one(&a, 1)).await;
    assert_eq!(next["icv"], 2);
    for body in [
        json!({"items": [], "payment_method": "cash"}),
        json!({"items": [{"medicine_id": a["id"], "quantity": 1}], "payment_method": "cheque"}),
        json!({"items": [{"medicine_id": a["id"], "quantity": 0}], "payment_method": "cash"}),
        json!({"items": [{"medicine_id": Uuid::now_v7(), "quantity": 1}], "payment_method": "cash"}),
        json!({"items": [{"medicine_id": a["id"], "quantity": 1}], "payment_method": "credit"}),
        json!({"payment_method": "cash"}),
    ] {
        let (status, problem) = shop.sell(&shop.cashier, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    }
    let (_, auditor) = shop.app.signed_in(shop.branch, Role::Auditor).await;
    let (status, _) = shop.sell(&auditor, one(&a, 1)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 2);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn fifty_concurrent_sales_of_the_last_ten_units_sell_exactly_ten() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Last ten", "selling_price": 100}), 10)
        .await;
    let mut tokens = vec![shop.cashier.clone()];
    for _ in 0..3 {
        tokens.push(shop.app.signed_in(shop.branch, Role::Cashier).await.1);
    }
    let calls = (0..50).map(|i| shop.sell(&tokens[i % tokens.len()], one(&m, 1)));
    let results = join_all(calls).await;
    let sold = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    let refused = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::BAD_REQUEST)
        .count();
    assert_eq!((sold, refused), (10, 40), "{results:?}");
    assert_eq!(shop.stock_of(&m).await, 0);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn a_hundred_concurrent_sales_get_icv_one_to_a_hundred() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Plenty", "selling_price": 100}), 1000)
        .await;
    let mut tokens = vec![shop.cashier.clone()];
    for _ in 0..3 {
        tokens.push(shop.app.signed_in(shop.branch, Role::Cashier).await.1);
    }
    let user: Uuid = {
        let client = shop.app.pool.get().await.unwrap();
        client
            .query_one("SELECT id FROM users WHERE role = 'cashier' LIMIT 1", &[])
            .await
            .unwrap()
            .get(0)
    };
    // Half over HTTP through this process's branch actor, half straight into
    // the database as a second server process would: the counter row and the
    // unique index keep the numbers gapless either way.
    let http = (0..50).map(|i| {
        let token = tokens[i % tokens.len()].clone();
        let body = one(&m, 1);
        let shop = &shop;
        async move {
            let (status, sale) = shop.sell(&token, body).await;
            assert_eq!(status, StatusCode::CREATED, "{sale}");
            sale["icv"].as_i64().unwrap()
        }
    });
    let direct = (0..50).map(|_| {
        let pool = shop.app.pool.clone();
        let request: domain::sales::SaleRequest = serde_json::from_value(one(&m, 1)).unwrap();
        let sale = request
            .validate(shop.branch, user, domain::Role::Cashier)
            .unwrap();
        async move {
            use domain::Command;
            let outcome = domain::sales::CreateSale(sale).run(pool).await;
            match outcome {
                Ok(o) => o.sale.icv,
                Err(e) => panic!("direct sale failed: {e}"),
            }
        }
    });
    let (mut a, b) = futures_util::join!(join_all(http), join_all(direct));
    a.extend(b);
    let icvs: HashSet<i64> = a.iter().copied().collect();
    assert_eq!(icvs.len(), 100);
    assert_eq!(icvs, (1..=100).collect());
    let (status, report) = shop.app.get("/sales/verify-chain", &shop.admin).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(report["status"], "ok", "{report}");
    assert_eq!(report["checked"], 100);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn a_coupon_with_five_uses_is_used_exactly_five_times_under_contention() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Vitamin C", "selling_price": 1000}), 100)
        .await;
    {
        let client = shop.app.pool.get().await.unwrap();
        client
            .execute(
                "INSERT INTO coupons (id, code, discount_type, discount_value, max_uses)
                 VALUES ($1, 'FIVE', 'percentage', 10, 5)",
                &[&Uuid::now_v7()],
            )
            .await
            .unwrap();
    }
    let body = json!({"items": [{"medicine_id": m["id"], "quantity": 1}],
                      "payment_method": "cash", "coupon_code": "five"});
    let results = join_all((0..20).map(|_| shop.sell(&shop.cashier, body.clone()))).await;
    let used: Vec<&Value> = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(used.len(), 5, "{results:?}");
    assert_eq!(used[0]["total"], "900.00");
    assert_eq!(used[0]["discount"], "100.00");
    assert_eq!(used[0]["coupon_code"], "FIVE");
    assert!(results
        .iter()
        .all(|(s, _)| *s == StatusCode::CREATED || *s == StatusCode::BAD_REQUEST));
    assert_eq!(
        shop.scalar("SELECT usage_count::bigint FROM coupons").await,
        5
    );
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 5);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn credit_sales_raise_the_balance_within_the_limit() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Insulin", "selling_price": 4000}), 10)
        .await;
    let customer = Uuid::now_v7();
    let stranger = Uuid::now_v7();
    {
        let client = shop.app.pool.get().await.unwrap();
        client
            .execute(
                "INSERT INTO customers (id, name, is_credit_allowed, credit_limit) VALUES ($1, 'Akello', true, 10000),
                        ($2, 'Cash only', false, 10000)",
                &[&customer, &stranger],
            )
            .await
            .unwrap();
    }
    let credit = |qty: i64, who: Uuid| {
        json!({"items": [{"medicine_id": m["id"], "quantity": qty}],
               "payment_method": "credit", "customer_id": who})
    };
    let (status, sale) = shop.sell(&shop.cashier, credit(2, customer)).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let (status, problem) = shop.sell(&shop.cashier, credit(1, customer)).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert!(
        problem["detail"].as_str().unwrap().contains("10000.00"),
        "{problem}"
    );
    let (status, _) = shop.sell(&shop.cashier, credit(1, stranger)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let client = shop.app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT c.current_balance::text, l.transaction_type, l.amount::text, l.balance_after::text, l.reference_id
             FROM customers c JOIN customer_ledger l ON l.customer_id = c.id WHERE c.id = $1",
            &[&customer],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "8000.00");
    assert_eq!(row.get::<_, String>(1), "SALE");
    assert_eq!(row.get::<_, String>(2), "8000.00");
    assert_eq!(row.get::<_, String>(3), "8000.00");
    assert_eq!(
        row.get::<_, Uuid>(4).to_string(),
        sale["id"].as_str().unwrap()
    );
    assert_eq!(shop.stock_of(&m).await, 8);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn prescription_only_medicines_need_a_pending_prescription_of_the_branch() {
    let shop = Shop::open().await;
    let other = shop.app.branch("EBB").await;
    let m = shop
        .stocked(
            json!({"name": "Morphine 10mg", "selling_price": 2000, "requires_prescription": true,
                   "is_controlled": true}),
            10,
        )
        .await;
    let (here, there, done) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    {
        let client = shop.app.pool.get().await.unwrap();
        client
            .execute(
                "INSERT INTO prescriptions (id, branch_id, rx_number, patient_id_number, prescriber_license, status)
                 VALUES ($1, $2, 'RX-1', 'CM900', 'UMDPC-77', 'PENDING'), ($3, $4, 'RX-2', '', '', 'PENDING'),
                        ($5, $2, 'RX-3', '', '', 'DISPENSED')",
                &[&here, &shop.branch, &there, &other, &done],
            )
            .await
            .unwrap();
        // A sale against a prescription sells only what it lists.
        let medicine: Uuid = m["id"].as_str().unwrap().parse().unwrap();
        client
            .execute(
                "INSERT INTO prescription_items (id, prescription_id, medicine_id, quantity)
                 VALUES ($1, $2, $3, 2)",
                &[&Uuid::now_v7(), &here, &medicine],
            )
            .await
            .unwrap();
    }
    let with_rx = |rx: Option<Uuid>| {
        json!({"items": [{"medicine_id": m["id"], "quantity": 2}], "payment_method": "cash",
               "prescription_id": rx})
    };
    for rx in [None, Some(there), Some(done)] {
        let (status, problem) = shop.sell(&shop.cashier, with_rx(rx)).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "prescription_id");
    }
    let (status, sale) = shop.sell(&shop.cashier, with_rx(Some(here))).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let client = shop.app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT quantity, patient_national_id, doctor_license, sale_id FROM controlled_dispenses",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 2);
    assert_eq!(row.get::<_, String>(1), "CM900");
    assert_eq!(row.get::<_, String>(2), "UMDPC-77");
    assert_eq!(
        row.get::<_, Uuid>(3).to_string(),
        sale["id"].as_str().unwrap()
    );
}

#[tokio::test]
async fn the_price_never_exceeds_the_maximum_public_price() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(
            json!({"name": "Capped", "selling_price": 900, "max_public_price": 1000}),
            10,
        )
        .await;
    let (status, problem) = shop
        .sell(
            &shop.cashier,
            json!({"items": [{"medicine_id": m["id"], "quantity": 1, "unit_price": 1000.01}],
                   "payment_method": "cash"}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "items[0].unit_price");
    let (status, sale) = shop
        .sell(
            &shop.cashier,
            json!({"items": [{"medicine_id": m["id"], "quantity": 1, "unit_price": "1000"}],
                   "payment_method": "mobile_money"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(sale["total"], "1000.00");
}

#[tokio::test]
async fn the_hash_chain_detects_an_edited_invoice() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Chained", "selling_price": 100}), 10)
        .await;
    let mut sales = Vec::new();
    for _ in 0..3 {
        sales.push(shop.sell(&shop.cashier, one(&m, 1)).await.1);
    }
    let (_, report) = shop.app.get("/sales/verify-chain", &shop.admin).await;
    assert_eq!(report["status"], "ok");
    assert_eq!(report["checked"], 3);
    let (status, _) = shop.app.get("/sales/verify-chain", &shop.cashier).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let client = shop.app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE sales SET total = 10, subtotal = 10 WHERE icv = 2",
            &[],
        )
        .await
        .unwrap();
    let (_, report) = shop
        .app
        .get(
            &format!("/sales/verify-chain?branch_id={}", shop.branch),
            &shop.admin,
        )
        .await;
    assert_eq!(report["status"], "broken", "{report}");
    assert_eq!(report["first_broken"]["icv"], 2);
    assert_eq!(report["first_broken"]["sale_id"], sales[1]["id"]);
}

#[tokio::test]
async fn a_retried_mutation_id_has_one_effect() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Retry", "selling_price": 100}), 10)
        .await;
    let mut body = one(&m, 2);
    body["client_mutation_id"] = json!("till-1-0001");
    let (status, first) = shop.sell(&shop.cashier, body.clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    let results = join_all((0..5).map(|_| shop.sell(&shop.cashier, body.clone()))).await;
    for (status, again) in results {
        assert_eq!(status, StatusCode::OK);
        assert_eq!(again, first);
    }
    body["items"][0]["quantity"] = json!(3);
    let (status, problem) = shop.sell(&shop.cashier, body).await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert_eq!(shop.stock_of(&m).await, 8);
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 1);
}

/// Two server processes on one database, the same mutation id sent through
/// both at once: the insert that loses the unique-key race replays the
/// winner's sale, and a different sale under the id is refused by either.
#[tokio::test]
async fn one_mutation_id_sent_at_once_through_two_processes_sells_once() {
    let shop = Shop::open().await;
    let other = shop.app.second_process();
    let m = shop
        .stocked(json!({"name": "Raced", "selling_price": 100}), 50)
        .await;
    let mut body = one(&m, 2);
    body["client_mutation_id"] = json!("till-race-0001");
    let answers = shop
        .app
        .post_through_both(&other, 16, "/sales", &shop.cashier, &body)
        .await;
    let sale = assert_one_effect(&answers);
    assert_eq!(sale["client_mutation_id"], "till-race-0001", "{sale}");
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 1);
    assert_eq!(shop.stock_of(&m).await, 48);
    body["items"][0]["quantity"] = json!(3);
    let refused = shop
        .app
        .post_through_both(&other, 6, "/sales", &shop.cashier, &body)
        .await;
    assert_all_mismatched(&refused, "sale");
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 1);
    assert_eq!(shop.stock_of(&m).await, 48);
    shop.app.assert_invariants().await;
}

/// Direct transactions, as other server processes would run them: none has
/// seen another's sale when it looks its mutation id up, so each loser of
/// the unique-key race reads the winner's sale back and replays it.
#[tokio::test]
async fn concurrent_first_attempts_with_one_mutation_id_sell_once() {
    let shop = Shop::open().await;
    let (seller, _) = shop.app.signed_in(shop.branch, Role::Cashier).await;
    let m = shop
        .stocked(json!({"name": "Raced", "selling_price": 100}), 50)
        .await;
    let mut body = one(&m, 2);
    body["client_mutation_id"] = json!("till-race-0002");
    let request: domain::sales::SaleRequest = serde_json::from_value(body).unwrap();
    let sale = request
        .validate(shop.branch, seller.id, Role::Cashier)
        .unwrap();
    let attempts = (0..8).map(|_| {
        let (pool, sale) = (shop.app.pool.clone(), sale.clone());
        async move {
            use domain::Command;
            domain::sales::CreateSale(sale).run(pool).await
        }
    });
    let outcomes: Vec<_> = join_all(attempts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(outcomes.iter().filter(|o| !o.replayed).count(), 1);
    for o in &outcomes {
        assert_eq!(o.sale.id, outcomes[0].sale.id);
        assert_eq!(o.sale.icv, 1);
    }
    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 1);
    assert_eq!(shop.stock_of(&m).await, 48);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn sales_count_into_the_open_session_and_closing_reconciles_cash() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Counted", "selling_price": 1000}), 10)
        .await;
    shop.sell(&shop.cashier, one(&m, 1)).await; // before the session: not counted
    let (_, session) = shop
        .app
        .post(
            "/sessions/open",
            &shop.cashier,
            json!({"opening_float": 5000}),
        )
        .await;
    shop.sell(&shop.cashier, one(&m, 2)).await;
    let mut card = one(&m, 1);
    card["payment_method"] = json!("card");
    shop.sell(&shop.cashier, card).await;
    let (_, current) = shop.app.get("/sessions/current", &shop.cashier).await;
    assert_eq!(current["total_sales"], 2);
    assert_eq!(current["total_revenue"], "3000.00");
    assert_eq!(current["total_vat"], "0.00");
    let breakdown: Value =
        serde_json::from_str(current["payment_breakdown"].as_str().unwrap()).unwrap();
    assert_eq!(breakdown, json!({"cash": "2000.00", "card": "1000.00"}));
    let path = format!("/sessions/{}/close", session["id"].as_str().unwrap());
    let (status, closed) = shop
        .app
        .post(&path, &shop.cashier, json!({"counted_cash": 6500}))
        .await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    assert_eq!(closed["status"], "closed");
    assert_eq!(closed["expected_cash"], "7000.00");
    assert_eq!(closed["counted_cash"], "6500.00");
    assert_eq!(closed["variance"], "-500.00");
    assert!(closed["closed_at"].is_string());
    let (status, problem) = shop
        .app
        .post(&path, &shop.cashier, json!({"counted_cash": 6500}))
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    let (status, _) = shop.app.get("/sessions/current", &shop.cashier).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let other = shop.app.branch("EBB").await;
    let (_, stranger) = shop.app.signed_in(other, Role::BranchManager).await;
    let (status, _) = shop
        .app
        .post(&path, &stranger, json!({"counted_cash": 1}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sales_are_listed_newest_first_within_the_branch() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Listed", "selling_price": 100}), 10)
        .await;
    for _ in 0..3 {
        shop.sell(&shop.cashier, one(&m, 1)).await;
    }
    let (status, page) = shop.app.get("/sales?page_size=2", &shop.cashier).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"][0]["icv"], 3);
    assert_eq!(page["items"][1]["icv"], 2);
    let today = chrono::Utc::now().date_naive();
    let (_, page) = shop
        .app
        .get(
            &format!(
                "/sales?from_date=2020-01-01&to_date={}",
                today.succ_opt().unwrap()
            ),
            &shop.cashier,
        )
        .await;
    assert_eq!(page["total"], 3);
    let (_, page) = shop
        .app
        .get("/sales?to_date=2020-01-01", &shop.cashier)
        .await;
    assert_eq!(page["total"], 0);
    let (status, _) = shop
        .app
        .get(
            "/sales?from_date=2026-02-01&to_date=2026-01-01",
            &shop.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let other = shop.app.branch("EBB").await;
    let (_, stranger) = shop.app.signed_in(other, Role::Cashier).await;
    let (_, page) = shop.app.get("/sales", &stranger).await;
    assert_eq!(page["total"], 0);
    let (_, mine) = shop.app.get("/sales", &shop.cashier).await;
    let (status, _) = shop
        .app
        .get(
            &format!("/sales/{}", mine["items"][0]["id"].as_str().unwrap()),
            &stranger,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, problem) = shop
        .app
        .get(&format!("/sales/{}", Uuid::now_v7()), &shop.cashier)
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    assert_eq!(problem["detail"], "Sale not found");
}

/// Concurrent sales of one branch are group-committed: several share one
/// transaction (their rows carry the same `xmin`), refusals inside a shared
/// transaction roll back alone, and the numbers stay gapless.
#[tokio::test]
async fn concurrent_sales_of_a_branch_share_commits_and_refusals_roll_back_alone() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Plenty", "selling_price": 100}), 1000)
        .await;
    let sales = (0..60).map(|i| {
        // Every fifth asks for more than there is: refused inside the batch.
        let qty = if i % 5 == 0 { 5000 } else { 1 };
        shop.sell(&shop.cashier, one(&m, qty))
    });
    let answers = join_all(sales).await;
    let made = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    let refused = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::BAD_REQUEST)
        .count();
    assert_eq!((made, refused), (48, 12));
    // Some drain took more than one sale (the histogram is process-wide).
    let metrics = shop
        .app
        .http
        .get(format!("{}/metrics", shop.app.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let singles = value("sale_batch_size_bucket{kind=\"branch\",le=\"1\"}");
    let drains = value("sale_batch_size_count{kind=\"branch\"}");
    assert!(
        drains > singles,
        "no batch of more than one sale: {drains} drains, {singles} single"
    );
    assert_eq!(shop.stock_of(&m).await, 1000 - 48);
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn with_batching_off_every_sale_commits_alone() {
    let app = TestApp::spawn_with(|c| c.actors.sale_batch_max = 1).await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Plenty", "selling_price": 100}))
        .await;
    app.receive(&admin, &m["id"], branch, 100, "2030-12-31")
        .await;
    let answers = join_all((0..20).map(|_| app.post("/sales", &admin, one(&m, 1)))).await;
    assert!(answers.iter().all(|(s, _)| *s == StatusCode::CREATED));
    let client = app.pool.get().await.unwrap();
    let commits: i64 = client
        .query_one("SELECT count(DISTINCT xmin::text) FROM sales", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(commits, 20);
    app.assert_invariants().await;
}

#[tokio::test]
async fn tills_selling_in_a_loop_never_fill_a_mailbox_bigger_than_their_number() {
    // 12 tills each sell 15 times in a row on one branch whose mailbox holds
    // 16: at most 12 sales wait at once, so none may be refused, however
    // many sales went before.
    let app = TestApp::spawn_with(|c| c.actors.branch_mailbox = 16).await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Plenty", "selling_price": 100}))
        .await;
    app.receive(&admin, &m["id"], branch, 1000, "2030-12-31")
        .await;
    let tills = (0..12).map(|_| async {
        let mut statuses = Vec::new();
        for _ in 0..15 {
            statuses.push(app.post("/sales", &admin, one(&m, 1)).await.0);
        }
        statuses
    });
    let statuses: Vec<StatusCode> = join_all(tills).await.into_iter().flatten().collect();
    let refused = statuses
        .iter()
        .filter(|s| **s != StatusCode::CREATED)
        .count();
    assert_eq!(refused, 0, "{statuses:?}");
    let client = app.pool.get().await.unwrap();
    let icvs: Vec<i64> = client
        .query("SELECT icv FROM sales ORDER BY icv", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(icvs, (1..=180).collect::<Vec<i64>>());
    app.assert_invariants().await;
}

#[tokio::test]
async fn two_lines_from_one_batch_move_it_once_in_the_feed_before_the_sale() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Twice", "selling_price": 10}), 10)
        .await;
    let body = json!({"items": [
        {"medicine_id": m["id"], "quantity": 3},
        {"medicine_id": m["id"], "quantity": 4}
    ], "payment_method": "cash"});
    let (status, sale) = shop.sell(&shop.cashier, body).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["items"].as_array().unwrap().len(), 2);
    assert_eq!(shop.stock_of(&m).await, 3);
    let sale_id: Uuid = sale["id"].as_str().unwrap().parse().unwrap();
    let client = shop.app.pool.get().await.unwrap();
    let moved: Vec<i32> = client
        .query(
            "SELECT qty FROM stock_movements WHERE reference_id = $1 ORDER BY qty",
            &[&sale_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(moved, vec![-4, -3]);
    // The feed: the batch once, with what is left, under a rev below the sale's.
    let feed = client
        .query(
            "SELECT entity, rev, payload FROM change_log
             WHERE rev > (SELECT max(rev) FROM change_log WHERE entity = 'batch' AND op = 'create')
             ORDER BY rev",
            &[],
        )
        .await
        .unwrap();
    let entities: Vec<String> = feed.iter().map(|r| r.get(0)).collect();
    assert_eq!(entities, vec!["batch", "sale"]);
    let batch: Value = feed[0].get(2);
    assert_eq!(batch["qty_remaining"], 3);
    let sale_rev: i64 = feed[1].get(1);
    assert_eq!(sale["rev"].as_i64(), Some(sale_rev));
    shop.app.assert_invariants().await;
}

#[tokio::test]
async fn the_database_refuses_a_line_whose_medicine_is_not_its_batchs() {
    let shop = Shop::open().await;
    let a = shop
        .stocked(json!({"name": "Alpha", "selling_price": 10}), 5)
        .await;
    let b = shop
        .stocked(json!({"name": "Beta", "selling_price": 10}), 5)
        .await;
    let client = shop.app.pool.get().await.unwrap();
    let batch_of_a: Uuid = client
        .query_one(
            "SELECT id FROM batches WHERE medicine_id = $1",
            &[&a["id"].as_str().unwrap().parse::<Uuid>().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    let medicine_b: Uuid = b["id"].as_str().unwrap().parse().unwrap();
    let wrong = client
        .execute(
            "INSERT INTO stock_movements (id, batch_id, medicine_id, branch_id, kind, qty)
             VALUES ($1, $2, $3, $4, 'ADJUST', -1)",
            &[&Uuid::now_v7(), &batch_of_a, &medicine_b, &shop.branch],
        )
        .await
        .unwrap_err();
    assert_eq!(
        wrong.code(),
        Some(&tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION)
    );
}

/// `POST /sales` checks its caller with the group's first statement: a
/// signed-out or deactivated seller's sales answer 401 and make nothing,
/// alone or in one group with a live seller's sales (which all stand), and
/// a dead token is refused before its request is judged.
#[tokio::test]
async fn a_dead_token_sells_nothing_alone_or_among_a_group() {
    let shop = Shop::open().await;
    let m = shop
        .stocked(json!({"name": "Zinc", "selling_price": 100}), 1000)
        .await;
    let (_, gone) = shop.app.signed_in(shop.branch, Role::Cashier).await;
    let (status, body) = shop.sell(&gone, one(&m, 1)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = shop
        .app
        .call(Method::POST, "/auth/logout", Some(&gone), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    let (status, body) = shop.sell(&gone, one(&m, 1)).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    // Refused before its request is judged: an empty sale is no 400 here.
    let (status, body) = shop
        .sell(&gone, json!({"items": [], "payment_method": "cash"}))
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    let live = (0..20).map(|_| shop.sell(&shop.cashier, one(&m, 1)));
    let dead = (0..10).map(|_| shop.sell(&gone, one(&m, 1)));
    let (live, dead) = futures_util::join!(join_all(live), join_all(dead));
    for (status, body) in live {
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    for (status, body) in dead {
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }

    let (deactivated, token) = shop.app.signed_in(shop.branch, Role::Cashier).await;
    let (status, body) = shop
        .app
        .call(
            Method::PUT,
            &format!("/users/{}", deactivated.id),
            Some(&shop.admin),
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = shop.sell(&token, one(&m, 1)).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    assert_eq!(shop.scalar("SELECT count(*) FROM sales").await, 21);
    assert_eq!(shop.stock_of(&m).await, 1000 - 21);
    shop.app.assert_invariants().await;
}
