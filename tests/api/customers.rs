use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_all_mismatched, assert_one_effect, assert_problem, Role, TestApp};

async fn customer(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, c) = app.post("/customers", token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    c
}

/// Gives a customer a balance through a credit sale of `amount` (one unit).
async fn owe(app: &TestApp, admin: &str, branch: Uuid, customer: &Value, amount: i64) {
    let m = app
        .medicine(
            admin,
            json!({"name": format!("Item {}", Uuid::now_v7()), "selling_price": amount}),
        )
        .await;
    app.receive(admin, &m["id"], branch, 1, "2030-01-01").await;
    let (status, sale) = app
        .post(
            "/sales",
            admin,
            json!({"items": [{"medicine_id": m["id"], "quantity": 1}], "payment_method": "credit",
                   "customer_id": customer["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
}

#[tokio::test]
async fn create_read_update_delete_with_the_spec_types() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (_, auditor) = app.signed_in(branch, Role::Auditor).await;
    let c = customer(
        &app,
        &cashier,
        json!({"name": "Akello Grace", "phone": "+256772000111"}),
    )
    .await;
    assert_eq!(c["credit_limit"], "0.00");
    assert_eq!(c["current_balance"], "0.00");
    assert_eq!(c["is_credit_allowed"], false);
    let path = format!("/customers/{}", c["id"].as_str().unwrap());
    let (status, read) = app.get(&path, &auditor).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read, c);
    let (status, problem) = app
        .call(Method::PUT, &path, Some(&cashier), Some(json!({})))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["detail"], "No fields to update");
    // Giving credit is a manager's decision (a cashier gets 403).
    let credit = json!({"credit_limit": 50000, "is_credit_allowed": true});
    let (status, problem) = app
        .call(Method::PUT, &path, Some(&cashier), Some(credit.clone()))
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let (status, updated) = app
        .call(Method::PUT, &path, Some(&manager), Some(credit))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(updated["credit_limit"], "50000.00");
    assert_eq!(updated["is_credit_allowed"], true);
    assert_eq!(updated["name"], "Akello Grace");
    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "X", "credit_limit": -1}),
    ] {
        let (status, problem) = app.post("/customers", &cashier, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    }
    let (status, _) = app.post("/customers", &auditor, json!({"name": "X"})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app.call(Method::DELETE, &path, Some(&cashier), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app.get(&path, &cashier).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let client = app.pool.get().await.unwrap();
    let ops: Vec<String> = client
        .query(
            "SELECT op FROM change_log WHERE entity = 'customer' ORDER BY rev",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ops, ["create", "update", "delete"]);
}

#[tokio::test]
async fn search_matches_name_and_phone_in_part_and_national_id_exactly() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, token) = app.signed_in(branch, Role::Pharmacist).await;
    customer(
        &app,
        &token,
        json!({"name": "Zawadi Mukasa", "phone": "+256701000222", "national_id": "CM900111"}),
    )
    .await;
    customer(
        &app,
        &token,
        json!({"name": "akello grace", "phone": "+256772000111", "national_id": "CF800222"}),
    )
    .await;
    customer(
        &app,
        &token,
        json!({"name": "Brian Okello", "phone": "0414000333"}),
    )
    .await;
    let names = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (_, all) = app.get("/customers", &token).await;
    assert_eq!(
        names(&all),
        ["akello grace", "Brian Okello", "Zawadi Mukasa"]
    );
    assert_eq!(all["page"], 1);
    assert_eq!(all["page_size"], 20);
    let (_, page) = app.get("/customers?search=kello", &token).await;
    assert_eq!(names(&page), ["akello grace", "Brian Okello"]);
    let (_, page) = app.get("/customers?search=701000", &token).await;
    assert_eq!(names(&page), ["Zawadi Mukasa"]);
    let (_, page) = app.get("/customers?search=CM900111", &token).await;
    assert_eq!(names(&page), ["Zawadi Mukasa"]);
    let (_, page) = app.get("/customers?search=CM900", &token).await;
    assert_eq!(page["total"], 0);
    let (_, page) = app.get("/customers?page=2&page_size=2", &token).await;
    assert_eq!(names(&page), ["Zawadi Mukasa"]);
    assert_eq!(page["total"], 3);
}

#[tokio::test]
async fn a_payment_lowers_the_balance_and_writes_the_ledger() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Debtor", "is_credit_allowed": true, "credit_limit": 100000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 15000).await;
    let path = format!("/customers/{}/payments", c["id"].as_str().unwrap());
    let (status, receipt) = app
        .post(&path, &cashier, json!({"amount": 4000, "notes": "cash"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{receipt}");
    assert_eq!(receipt["amount_paid"], "4000.00");
    assert_eq!(receipt["previous_balance"], "15000.00");
    assert_eq!(receipt["new_balance"], "11000.00");
    assert_eq!(receipt["customer_id"], c["id"]);
    assert!(receipt["paid_at"].as_str().unwrap().ends_with('Z'));
    for amount in [json!(11000.01), json!(0), json!(-5)] {
        let (status, problem) = app.post(&path, &cashier, json!({"amount": amount})).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("11000.00"), "{detail}");
    }
    let (status, problem) = app.post(&path, &cashier, json!({"amount": 11000.01})).await;
    assert!(problem["detail"].as_str().unwrap().contains("11000.01"));
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = app
        .post(
            &format!("/customers/{}/payments", Uuid::now_v7()),
            &cashier,
            json!({"amount": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, auditor) = app.signed_in(branch, Role::Auditor).await;
    let (status, _) = app.post(&path, &auditor, json!({"amount": 1})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, ledger) = app
        .get(
            &format!("/customers/{}/ledger", c["id"].as_str().unwrap()),
            &cashier,
        )
        .await;
    assert_eq!(ledger["total"], 2);
    let first = &ledger["items"][0];
    assert_eq!(first["transaction_type"], "PAYMENT");
    assert_eq!(first["amount"], "4000.00");
    assert_eq!(first["balance_after"], "11000.00");
    assert_eq!(first["created_by_name"], "Test cashier");
    assert_eq!(ledger["items"][1]["transaction_type"], "SALE");
    let client = app.pool.get().await.unwrap();
    let entities: Vec<String> = client
        .query(
            "SELECT entity FROM change_log WHERE rev > (SELECT max(rev) FROM change_log WHERE entity = 'sale') AND entity <> 'user' ORDER BY rev",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(entities, ["customer", "customer_ledger"]);
    app.assert_invariants().await;
}

#[tokio::test]
async fn the_ledger_is_newest_first_and_paged() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Paged", "is_credit_allowed": true, "credit_limit": 100000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 5000).await;
    let path = format!("/customers/{}/payments", c["id"].as_str().unwrap());
    for _ in 0..22 {
        let (status, _) = app.post(&path, &admin, json!({"amount": 100})).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let ledger_path = format!("/customers/{}/ledger", c["id"].as_str().unwrap());
    let (_, first) = app.get(&ledger_path, &admin).await;
    assert_eq!(first["total"], 23);
    assert_eq!(first["items"].as_array().unwrap().len(), 20);
    assert_eq!(first["items"][0]["balance_after"], "2800.00");
    assert_eq!(first["items"][19]["balance_after"], "4700.00");
    let (_, second) = app.get(&format!("{ledger_path}?page=2"), &admin).await;
    assert_eq!(second["items"].as_array().unwrap().len(), 3);
    assert_eq!(second["items"][2]["transaction_type"], "SALE");
}

#[tokio::test]
async fn thirty_concurrent_payments_of_ten_against_a_hundred_leave_ten_successes() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let other = app.branch("B2").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, here) = app.signed_in(branch, Role::Cashier).await;
    let (_, there) = app.signed_in(other, Role::Cashier).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Contended", "is_credit_allowed": true, "credit_limit": 100}),
    )
    .await;
    owe(&app, &admin, branch, &c, 100).await;
    let id: Uuid = c["id"].as_str().unwrap().parse().unwrap();
    let path = format!("/customers/{id}/payments");
    // Two branches' actors plus direct transactions (as a second server
    // process would run them): only the database serialises them all.
    let http = (0..20).map(|i| {
        let token = if i % 2 == 0 { &here } else { &there };
        let (app, path) = (&app, &path);
        async move { app.post(path, token, json!({"amount": 10})).await.0 == StatusCode::CREATED }
    });
    let user: Uuid = {
        let client = app.pool.get().await.unwrap();
        client
            .query_one("SELECT id FROM users LIMIT 1", &[])
            .await
            .unwrap()
            .get(0)
    };
    let direct = (0..10).map(|_| {
        let pool = app.pool.clone();
        async move {
            use domain::Command;
            let payment = domain::customers::RecordPayment {
                customer_id: id,
                branch_id: branch,
                amount: rust_decimal::Decimal::TEN,
                notes: String::new(),
                user_id: user,
                client_mutation_id: None,
                signer: None,
            };
            payment.run(pool).await.is_ok()
        }
    });
    let (a, b) = futures_util::join!(join_all(http), join_all(direct));
    let successes = a.iter().chain(b.iter()).filter(|ok| **ok).count();
    assert_eq!(successes, 10);
    let (_, read) = app.get(&format!("/customers/{id}"), &admin).await;
    assert_eq!(read["current_balance"], "0.00");
    let client = app.pool.get().await.unwrap();
    let paid: String = client
        .query_one(
            "SELECT sum(amount)::text FROM customer_ledger WHERE customer_id = $1 AND transaction_type = 'PAYMENT'",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(paid, "100.00");
    app.assert_invariants().await;
}

#[tokio::test]
async fn a_customer_who_owes_cannot_be_deleted() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Owes", "is_credit_allowed": 1, "credit_limit": 1000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 500).await;
    let path = format!("/customers/{}", c["id"].as_str().unwrap());
    let (status, problem) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    let (status, _) = app.get(&path, &admin).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_retried_payment_with_its_mutation_id_pays_once() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Retry", "is_credit_allowed": true, "credit_limit": 1000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 500).await;
    let path = format!("/customers/{}/payments", c["id"].as_str().unwrap());
    let body = json!({"amount": 100, "client_mutation_id": "pay-1"});
    let (first_status, first) = app.post(&path, &cashier, body.clone()).await;
    assert_eq!(first_status, StatusCode::CREATED, "{first}");
    // Ten retries at once, as a till reconnecting would: one effect.
    let retries = join_all((0..10).map(|_| app.post(&path, &cashier, body.clone()))).await;
    for (status, receipt) in &retries {
        assert_eq!(*status, StatusCode::OK, "{receipt}");
        assert_eq!(receipt, &first);
    }
    let (_, read) = app
        .get(&format!("/customers/{}", c["id"].as_str().unwrap()), &admin)
        .await;
    assert_eq!(read["current_balance"], "400.00");
    // The same id for another amount is refused; a new id pays again.
    let (status, b) = app
        .post(
            &path,
            &cashier,
            json!({"amount": 50, "client_mutation_id": "pay-1"}),
        )
        .await;
    assert_problem(status, &b, StatusCode::CONFLICT);
    let (status, _) = app
        .post(
            &path,
            &cashier,
            json!({"amount": 50, "client_mutation_id": "pay-2"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    app.assert_invariants().await;
}

#[tokio::test]
async fn a_payments_changes_carry_the_customer_then_its_ledger_row() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (cashier_user, cashier) = app.signed_in(branch, Role::Cashier).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Feed", "is_credit_allowed": true, "credit_limit": 100000}),
    )
    .await;
    let id = c["id"].as_str().unwrap();
    let before: i64 = {
        let client = app.pool.get().await.unwrap();
        client
            .query_one("SELECT coalesce(max(rev), 0)::bigint FROM change_log", &[])
            .await
            .unwrap()
            .get(0)
    };
    owe(&app, &admin, branch, &c, 15000).await;
    let (status, receipt) = app
        .post(
            &format!("/customers/{id}/payments"),
            &cashier,
            json!({"amount": 4000, "notes": "cash", "client_mutation_id": "feed-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{receipt}");
    let client = app.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT rev, entity, entity_id, op, branch_id, payload FROM change_log
             WHERE rev > $1 AND entity IN ('customer', 'customer_ledger') ORDER BY rev",
            &[&before],
        )
        .await
        .unwrap();
    let feed: Vec<(i64, String, String, String, Option<Uuid>, Value)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
        .collect();
    let kinds: Vec<(&str, &str)> = feed
        .iter()
        .map(|(_, e, _, op, _, _)| (e.as_str(), op.as_str()))
        .collect();
    // The credit sale, then the payment: each the customer before its ledger row.
    assert_eq!(
        kinds,
        [
            ("customer", "update"),
            ("customer_ledger", "create"),
            ("customer", "update"),
            ("customer_ledger", "create"),
        ]
    );
    let (_, read) = app.get(&format!("/customers/{id}"), &admin).await;
    let (_, ledger) = app.get(&format!("/customers/{id}/ledger"), &admin).await;
    for (i, kind, balance) in [(0, "SALE", 15000.0), (2, "PAYMENT", 11000.0)] {
        let (rev, _, entity_id, _, branch_id, customer) = &feed[i];
        assert_eq!(entity_id, id);
        assert_eq!(*branch_id, None);
        assert_eq!(customer["id"], c["id"]);
        assert_eq!(customer["rev"], *rev);
        assert_eq!(customer["current_balance"], balance);
        assert_eq!(customer["credit_limit"], 100000.0);
        assert_eq!(customer["is_credit_allowed"], 1);
        assert_eq!(customer["is_deleted"], 0);
        let (ledger_rev, _, ledger_id, _, ledger_branch, row) = &feed[i + 1];
        assert!(ledger_rev > rev);
        assert_eq!(row["rev"], *ledger_rev);
        assert_eq!(row["id"], ledger_id.as_str());
        assert_eq!(*ledger_branch, Some(branch));
        assert_eq!(row["transaction_type"], kind);
        assert_eq!(row["customer_id"], c["id"]);
        assert_eq!(row["branch_id"], branch.to_string());
        // The payload is the ledger's own shape, byte for byte.
        let listed = ledger["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["id"] == row["id"])
            .unwrap();
        assert_eq!(listed, row);
    }
    let payment = &feed[2].5;
    assert_eq!(payment["rev"], read["rev"]);
    assert_eq!(payment["updated_at"], read["updated_at"]);
    assert_eq!(payment["created_at"], read["created_at"]);
    let row = &feed[3].5;
    assert_eq!(row["id"], receipt["ledger_id"]);
    assert_eq!(row["created_at"], receipt["paid_at"]);
    assert_eq!(row["amount"], "4000.00");
    assert_eq!(row["balance_after"], "11000.00");
    assert_eq!(row["notes"], "cash");
    assert_eq!(row["reference_id"], Value::Null);
    assert_eq!(row["created_by"], cashier_user.id.to_string());
    assert_eq!(row["created_by_name"], "Test cashier");
    let sale = &feed[1].5;
    assert_eq!(sale["amount"], "15000.00");
    assert_eq!(sale["balance_after"], "15000.00");
    assert!(sale["reference_id"].is_string());
    // The mutation id and digest are stored on the ledger row, not synced.
    let stored = client
        .query_one(
            "SELECT client_mutation_id, request_digest FROM customer_ledger WHERE id = $1",
            &[&receipt["ledger_id"]
                .as_str()
                .unwrap()
                .parse::<Uuid>()
                .unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(
        stored.get::<_, Option<String>>(0).as_deref(),
        Some("feed-1")
    );
    assert_eq!(
        stored.get::<_, Option<String>>(1),
        Some(format!("{branch}:4000.00"))
    );
    assert!(row.get("client_mutation_id").is_none());
    app.assert_invariants().await;
}

/// Two server processes on one database, one payment's mutation id sent
/// through both at once: one ledger row, every answer its receipt, and a
/// different amount under the id refused by either.
#[tokio::test]
async fn one_mutation_id_sent_at_once_through_two_processes_pays_once() {
    let app = TestApp::spawn().await;
    let other = app.second_process();
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Raced", "is_credit_allowed": true, "credit_limit": 1000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 500).await;
    let path = format!("/customers/{}/payments", c["id"].as_str().unwrap());
    let body = json!({"amount": 100, "client_mutation_id": "pay-race-1"});
    let answers = app
        .post_through_both(&other, 16, &path, &admin, &body)
        .await;
    let receipt = assert_one_effect(&answers);
    assert_eq!(receipt["new_balance"], "400.00", "{receipt}");
    let different = json!({"amount": 50, "client_mutation_id": "pay-race-1"});
    let refused = app
        .post_through_both(&other, 6, &path, &admin, &different)
        .await;
    assert_all_mismatched(&refused, "payment");
    let (_, read) = app
        .get(&format!("/customers/{}", c["id"].as_str().unwrap()), &admin)
        .await;
    assert_eq!(read["current_balance"], "400.00");
    app.assert_invariants().await;
}

/// Retries, a reused id and a new payment sent together (so the branch's
/// desk may take them as one group, whose retry lookups are one statement):
/// each gets the answer it would get alone.
#[tokio::test]
async fn retries_a_reused_id_and_a_new_payment_sent_together_each_get_their_own_answer() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Mixed", "is_credit_allowed": true, "credit_limit": 1000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 500).await;
    let path = format!("/customers/{}/payments", c["id"].as_str().unwrap());
    let mut first = Vec::new();
    for key in ["a", "b", "c"] {
        let (status, receipt) = app
            .post(
                &path,
                &cashier,
                json!({"amount": 10, "client_mutation_id": key}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{receipt}");
        first.push(receipt);
    }
    let bodies = [
        json!({"amount": 10, "client_mutation_id": "a"}),
        json!({"amount": 10, "client_mutation_id": "b"}),
        json!({"amount": 20, "client_mutation_id": "c"}),
        json!({"amount": 10, "client_mutation_id": "d"}),
        json!({"amount": 10}),
    ];
    let answers = join_all(bodies.iter().map(|b| app.post(&path, &cashier, b.clone()))).await;
    assert_eq!(answers[0], (StatusCode::OK, first[0].clone()));
    assert_eq!(answers[1], (StatusCode::OK, first[1].clone()));
    assert_problem(answers[2].0, &answers[2].1, StatusCode::CONFLICT);
    assert_eq!(answers[3].0, StatusCode::CREATED, "{}", answers[3].1);
    assert_eq!(answers[4].0, StatusCode::CREATED, "{}", answers[4].1);
    let (_, read) = app
        .get(&format!("/customers/{}", c["id"].as_str().unwrap()), &admin)
        .await;
    assert_eq!(read["current_balance"], "450.00");
    app.assert_invariants().await;
}

#[tokio::test]
async fn concurrent_first_attempts_with_one_mutation_id_pay_once() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (admin_user, admin) = app.signed_in(branch, Role::Admin).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Twice", "is_credit_allowed": true, "credit_limit": 1000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 100).await;
    let id: Uuid = c["id"].as_str().unwrap().parse().unwrap();
    // Direct transactions, as other server processes would run them: none
    // has seen another's ledger row when it starts, so only the unique
    // index tells the duplicates apart.
    let attempts = (0..8).map(|_| {
        let pool = app.pool.clone();
        async move {
            use domain::Command;
            let payment = domain::customers::RecordPayment {
                customer_id: id,
                branch_id: branch,
                amount: rust_decimal::Decimal::TEN,
                notes: String::new(),
                user_id: admin_user.id,
                client_mutation_id: Some("same".to_owned()),
                signer: None,
            };
            payment.run(pool).await
        }
    });
    let receipts = join_all(attempts).await;
    let receipts: Vec<_> = receipts.into_iter().map(Result::unwrap).collect();
    assert_eq!(receipts.iter().filter(|r| !r.replayed).count(), 1);
    for r in &receipts {
        assert_eq!(r.ledger_id, receipts[0].ledger_id);
        assert_eq!(r.new_balance, rust_decimal::Decimal::from(90));
        assert_eq!(r.paid_at, receipts[0].paid_at);
    }
    let (_, read) = app.get(&format!("/customers/{id}"), &admin).await;
    assert_eq!(read["current_balance"], "90.00");
    let client = app.pool.get().await.unwrap();
    let payments: i64 = client
        .query_one(
            "SELECT count(*) FROM customer_ledger WHERE customer_id = $1 AND transaction_type = 'PAYMENT'",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(payments, 1);
    app.assert_invariants().await;
}

/// `POST /customers/{id}/payments` checks its caller with the group's
/// first statement: a signed-out cashier's payments answer 401 and leave
/// the balance as it was, alone or in one group with a live cashier's.
#[tokio::test]
async fn a_dead_token_pays_nothing_alone_or_among_a_group() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (_, gone) = app.signed_in(branch, Role::Cashier).await;
    let c = customer(
        &app,
        &admin,
        json!({"name": "Debtor", "is_credit_allowed": true, "credit_limit": 100000}),
    )
    .await;
    owe(&app, &admin, branch, &c, 50000).await;
    let path = format!("/customers/{}/payments", c["id"].as_str().unwrap());
    let (status, body) = app.post(&path, &gone, json!({"amount": 100})).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = app
        .call(Method::POST, "/auth/logout", Some(&gone), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    let (status, body) = app.post(&path, &gone, json!({"amount": 100})).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    // Refused before its request is judged: a negative amount is no 400 here.
    let (status, body) = app.post(&path, &gone, json!({"amount": -5})).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    let live = (0..12).map(|_| app.post(&path, &cashier, json!({"amount": 100})));
    let dead = (0..6).map(|_| app.post(&path, &gone, json!({"amount": 100})));
    let (live, dead) = futures_util::join!(join_all(live), join_all(dead));
    for (status, body) in live {
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    for (status, body) in dead {
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }
    let (_, read) = app
        .get(&format!("/customers/{}", c["id"].as_str().unwrap()), &admin)
        .await;
    assert_eq!(read["current_balance"], "48700.00", "50000 - 13 × 100");
    app.assert_invariants().await;
}
