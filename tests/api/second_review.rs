//! The controls of the second review: a destruction witnessed by someone
//! else, no cash refund of what a customer still owes, text that cannot
//! disguise itself, reserved approval kinds, quantities that are numbers,
//! and the headers every answer carries.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};
use crate::console::{redirected_to_sign_in, Console};

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

async fn scalar(app: &TestApp, sql: &str) -> i64 {
    let client = app.pool.get().await.unwrap();
    client.query_one(sql, &[]).await.unwrap().get(0)
}

/// A branch with an admin, and a controlled medicine's batch of 10 there.
struct Vault {
    app: TestApp,
    branch: Uuid,
    admin: String,
    batch: Value,
}

impl Vault {
    async fn open() -> Vault {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let morphine = app
            .medicine(
                &admin,
                json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                       "requires_prescription": true, "control_schedule": "Class A"}),
            )
            .await;
        let batch = app
            .receive(&admin, &morphine["id"], branch, 10, "2030-01-31")
            .await;
        Vault {
            app,
            branch,
            admin,
            batch,
        }
    }

    fn body(&self, witness: Value) -> Value {
        let mut body = json!({"reason": "expired",
                              "items": [{"batch_id": self.batch["id"], "quantity": 1}]});
        for (k, v) in witness.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    }

    async fn write_off(&self, token: &str, witness: Value) -> (StatusCode, Value) {
        self.app
            .post("/stock/write-offs", token, self.body(witness))
            .await
    }
}

#[tokio::test]
async fn a_destruction_is_never_witnessed_by_its_author() {
    let v = Vault::open().await;
    let (me, token) = v.app.signed_in(v.branch, Role::Pharmacist).await;
    let spaced = format!("  {}  ", me.full_name.to_uppercase().replace(' ', "   "));
    for own in [
        me.full_name.clone(),
        spaced,
        me.email.clone(),
        me.email.to_uppercase(),
        "\u{200B}".to_owned(),
        "J".to_owned(),
        "12".to_owned(),
    ] {
        let (status, problem) = v.write_off(&token, json!({"witness_name": own})).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "witness_name", "{own:?}: {problem}");
    }
    // As a user: myself, a user of another branch, an inactive one, nobody.
    let other_branch = v.app.branch("GUL").await;
    let elsewhere = v.app.user(other_branch, Role::Pharmacist).await;
    let gone = v.app.user(v.branch, Role::Pharmacist).await;
    let client = v.app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE users SET is_active = false WHERE id = $1",
            &[&gone.id],
        )
        .await
        .unwrap();
    for id in [me.id, elsewhere.id, gone.id, Uuid::now_v7()] {
        let (status, problem) = v.write_off(&token, json!({"witness_user_id": id})).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "witness_user_id", "{problem}");
    }
    assert_eq!(scalar(&v.app, "SELECT count(*) FROM write_offs").await, 0);

    // Someone else, typed in and as a user of the branch.
    let (status, typed) = v
        .write_off(&token, json!({"witness_name": "Inspector Nakato"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{typed}");
    assert!(typed["witness_user_id"].is_null());
    let colleague = v.app.user(v.branch, Role::BranchManager).await;
    let (status, chosen) = v
        .write_off(&token, json!({"witness_user_id": colleague.id}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{chosen}");
    assert_eq!(chosen["witness_name"], colleague.full_name.as_str());
    assert_eq!(chosen["witness_user_id"], colleague.id.to_string());

    // The register tells the two forms apart.
    let (status, book) = v
        .app
        .get("/compliance/destruction-register", &v.admin)
        .await;
    assert_eq!(status, StatusCode::OK, "{book}");
    let rows = book["items"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["witness_kind"], "user");
    assert_eq!(rows[0]["witness_user_id"], colleague.id.to_string());
    assert_eq!(rows[1]["witness_kind"], "name");
    assert_eq!(rows[1]["witness_name"], "Inspector Nakato");
    assert!(rows[1]["witness_user_id"].is_null());

    // The database refuses an author as witness whatever wrote the row.
    let refused = client
        .execute(
            "UPDATE write_offs SET witness_user_id = created_by WHERE witness_user_id IS NOT NULL",
            &[],
        )
        .await;
    assert!(refused.is_err(), "the CHECK lets an author witness");
}

/// A branch with a credit customer who bought 2 × 1,000 on account.
struct Account {
    app: TestApp,
    branch: Uuid,
    pharmacist: String,
    cashier: String,
    customer: Uuid,
    sale: Value,
}

impl Account {
    async fn open() -> Account {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let m = app
            .medicine(&admin, json!({"name": "Insulin", "selling_price": 1000}))
            .await;
        app.receive(&admin, &m["id"], branch, 10, "2030-12-31")
            .await;
        let customer = Uuid::now_v7();
        let client = app.pool.get().await.unwrap();
        client
            .execute(
                "INSERT INTO customers (id, name, is_credit_allowed, credit_limit)
                 VALUES ($1, 'Akello', true, 50000)",
                &[&customer],
            )
            .await
            .unwrap();
        let (status, sale) = app
            .post(
                "/sales",
                &cashier,
                json!({"items": [{"medicine_id": m["id"], "quantity": 2}],
                       "payment_method": "credit", "customer_id": customer}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sale}");
        Account {
            app,
            branch,
            pharmacist,
            cashier,
            customer,
            sale,
        }
    }

    fn one_back(&self, method: Option<&str>) -> Value {
        let mut body = json!({"reason": "Wrong strength",
                              "items": [{"sale_item_id": self.sale["items"][0]["id"],
                                         "quantity": 1}]});
        if let Some(m) = method {
            body["refund_method"] = json!(m);
        }
        body
    }

    async fn balance(&self) -> String {
        let client = self.app.pool.get().await.unwrap();
        client
            .query_one(
                "SELECT current_balance::text FROM customers WHERE id = $1",
                &[&self.customer],
            )
            .await
            .unwrap()
            .get(0)
    }
}

#[tokio::test]
async fn a_credit_sale_is_refunded_to_the_account_while_it_is_owed() {
    let a = Account::open().await;
    let path = format!("/sales/{}/returns", s(&a.sale["id"]));
    assert_eq!(a.balance().await, "2000.00");
    for method in ["cash", "card", "mobile_money"] {
        let (status, problem) = a
            .app
            .post(&path, &a.pharmacist, a.one_back(Some(method)))
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "refund_method");
        assert_eq!(problem["code"], "refund_to_account");
        let detail = s(&problem["detail"]);
        assert!(
            detail.contains("2000.00") && detail.contains("1000.00"),
            "{detail}"
        );
    }
    assert_eq!(scalar(&a.app, "SELECT count(*) FROM sale_returns").await, 0);
    // Without a method the refund goes to the account.
    let (status, note) = a.app.post(&path, &a.pharmacist, a.one_back(None)).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["refund_method"], "credit");
    assert_eq!(a.balance().await, "1000.00");
    // Paid off: what was paid may go back in cash.
    let (status, paid) = a
        .app
        .post(
            &format!("/customers/{}/payments", a.customer),
            &a.cashier,
            json!({"amount": 1000}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{paid}");
    let (status, note) = a
        .app
        .post(&path, &a.pharmacist, a.one_back(Some("cash")))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    assert_eq!(note["refund_method"], "cash");
    assert_eq!(a.balance().await, "0.00");
    a.app.assert_invariants().await;
}

#[tokio::test]
async fn a_cashiers_cash_refund_of_a_credit_sale_is_checked_again_when_approved() {
    let a = Account::open().await;
    let path = format!("/sales/{}/returns", s(&a.sale["id"]));
    // Paid off in full: a cashier may ask for the refund in cash.
    let (status, _) = a
        .app
        .post(
            &format!("/customers/{}/payments", a.customer),
            &a.cashier,
            json!({"amount": 2000}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, pending) = a
        .app
        .post(&path, &a.cashier, a.one_back(Some("cash")))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{pending}");
    assert_eq!(pending["status"], "pending_approval");
    // Before the manager decides, the customer owes again.
    let client = a.app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE customers SET current_balance = 5000 WHERE id = $1",
            &[&a.customer],
        )
        .await
        .unwrap();
    let (_, manager) = a.app.signed_in(a.branch, Role::BranchManager).await;
    let approval = s(&pending["approval_id"]).to_owned();
    let (status, problem) = a
        .app
        .post(
            &format!("/approvals/{approval}/approve"),
            &manager,
            json!({}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["code"], "refund_to_account");
    assert_eq!(
        scalar(
            &a.app,
            "SELECT count(*) FROM sale_returns WHERE status = 'pending_approval'"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn single_line_text_refuses_control_and_invisible_characters() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let nasty = [
        "Drawer\u{1b}p\u{0}\u{19}\u{fa}",
        "Two\nlines",
        "Back\u{8}space",
        "\u{202E}tset",
        "Iso\u{2066}late\u{2069}",
        "Zero\u{200B}width",
        "\u{FEFF}Bom",
    ];
    for name in nasty {
        let (status, problem) = app
            .post(
                "/customers",
                &admin,
                json!({"name": name, "phone": "0700000000"}),
            )
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "name", "{name:?}");
        let (status, problem) = app
            .post(
                "/medicines",
                &admin,
                json!({"name": name, "selling_price": 1}),
            )
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "name", "{name:?}");
        let (status, problem) = app
            .post(
                "/users",
                &admin,
                json!({"email": format!("x{}@t.pharmacy", Uuid::now_v7().simple()),
                       "password": "Long-Enough-2026", "full_name": name,
                       "role": "cashier", "branch_id": branch}),
            )
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "full_name", "{name:?}");
    }
    // A name of only a zero-width space, or a filler, is blank.
    for blank in ["\u{200B}", "\u{3164}", " \u{2800} "] {
        let (status, problem) = app.post("/customers", &admin, json!({"name": blank})).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "name");
    }
    assert_eq!(scalar(&app, "SELECT count(*) FROM customers").await, 0);
    // Multi-line fields keep tabs and line breaks, and refuse the rest.
    let (status, c) = app
        .post(
            "/customers",
            &admin,
            json!({"name": "Nakato Sarah", "notes": "Allergic:\r\n\tpenicillin"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    assert_eq!(c["notes"], "Allergic:\n\tpenicillin");
    let (status, problem) = app
        .post(
            "/customers",
            &admin,
            json!({"name": "Okello", "notes": "clear\u{1b}[2J"}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "notes");
    // The same rule through a till's push.
    let (_, device) = app
        .post(
            "/devices",
            &admin,
            json!({"name": "Till 1", "branch_id": branch}),
        )
        .await;
    let (status, body) = app
        .post(
            "/sync/push",
            &admin,
            json!({"device_id": device["id"], "changes": [
                {"client_mutation_id": "c-1", "entity": "customer", "op": "create",
                 "payload": {"name": "Esc\u{1b}p"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"][0]["code"], "validation_failed", "{body}");
    assert_eq!(body["rejected"][0]["field"], "name", "{body}");
}

#[tokio::test]
async fn nobody_files_an_approval_of_a_kind_the_service_files_itself() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    for kind in ["refund", " Refund ", "REFUND"] {
        let (status, problem) = app
            .post(
                "/approvals",
                &cashier,
                json!({"kind": kind, "reason": "please"}),
            )
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "kind");
    }
    assert_eq!(scalar(&app, "SELECT count(*) FROM approvals").await, 0);
    let (status, a) = app
        .post(
            "/approvals",
            &cashier,
            json!({"kind": "price_override", "reason": "please"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
}

#[tokio::test]
async fn quantities_of_returns_and_write_offs_are_json_numbers() {
    let a = Account::open().await;
    let path = format!("/sales/{}/returns", s(&a.sale["id"]));
    let mut body = a.one_back(Some("credit"));
    body["items"][0]["quantity"] = json!("1");
    let (status, problem) = a.app.post(&path, &a.pharmacist, body).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(scalar(&a.app, "SELECT count(*) FROM sale_returns").await, 0);
    let (_, admin) = a.app.signed_in(a.branch, Role::Admin).await;
    let m = a
        .app
        .medicine(&admin, json!({"name": "Zinc", "selling_price": 100}))
        .await;
    let batch = a
        .app
        .receive(&admin, &m["id"], a.branch, 5, "2030-01-31")
        .await;
    let (status, problem) = a
        .app
        .post(
            "/stock/write-offs",
            &admin,
            json!({"reason": "damaged", "items": [{"batch_id": batch["id"], "quantity": "1"}]}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(scalar(&a.app, "SELECT count(*) FROM write_offs").await, 0);
    let (status, w) = a
        .app
        .post(
            "/stock/write-offs",
            &admin,
            json!({"reason": "damaged", "items": [{"batch_id": batch["id"], "quantity": 1}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
}

#[tokio::test]
async fn answers_are_never_sniffed_and_the_docs_are_never_framed() {
    let app = TestApp::spawn().await;
    for path in [
        "/docs",
        "/api/v1/openapi.json",
        "/api/v1/nowhere",
        "/healthz",
    ] {
        let res = app
            .http
            .get(format!("{}{path}", app.root))
            .send()
            .await
            .unwrap();
        let nosniff = res
            .headers()
            .get("x-content-type-options")
            .and_then(|v| v.to_str().ok());
        assert_eq!(nosniff, Some("nosniff"), "{path}");
    }
    let res = app
        .http
        .get(format!("{}/docs", app.root))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let frame = res.headers().get("x-frame-options").unwrap();
    assert_eq!(frame, "DENY");
    let csp = res.headers().get("content-security-policy").unwrap();
    assert!(csp.to_str().unwrap().contains("frame-ancestors 'none'"));
}

#[tokio::test]
async fn the_operations_pages_refresh_does_not_keep_a_console_session_alive() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, console) = Console::of(&app, branch, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    let idle = "UPDATE console_sessions SET last_seen_at = now() - interval '20 minutes'";
    client.execute(idle, &[]).await.unwrap();
    let (status, _, _) = console.get("/console/operations/live").await;
    assert_eq!(status, StatusCode::OK);
    let quiet: i64 = client
        .query_one(
            "SELECT count(*) FROM console_sessions
             WHERE last_seen_at < now() - interval '19 minutes'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(quiet, 1, "a background refresh renewed the session");
    // Another 11 minutes of refreshes only: the session has idled out.
    client
        .execute(
            "UPDATE console_sessions SET last_seen_at = now() - interval '31 minutes'",
            &[],
        )
        .await
        .unwrap();
    let (status, _, headers) = console.get("/console/operations/live").await;
    assert!(redirected_to_sign_in(status, &headers), "{status}");
}

#[tokio::test]
async fn a_console_session_ends_at_its_absolute_lifetime_however_busy() {
    let app = TestApp::spawn().await;
    assert_eq!(app.config.auth.console_max_age_secs, 12 * 3600);
    let branch = app.branch("KLA").await;
    let (_, console) = Console::of(&app, branch, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE console_sessions SET created_at = now() - interval '12 hours 1 minute'",
            &[],
        )
        .await
        .unwrap();
    let (status, _, headers) = console.get("/console/dashboard").await;
    assert!(redirected_to_sign_in(status, &headers), "{status}");
    assert_eq!(
        scalar(&app, "SELECT count(*) FROM console_sessions").await,
        0
    );
}
