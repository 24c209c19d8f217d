use chrono::{Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A branch trading in `currency`.
async fn branch_in(app: &TestApp, code: &str, currency: &str) -> Uuid {
    let branch = app.branch(code).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE branches SET currency_code = $2 WHERE id = $1",
            &[&branch, &currency],
        )
        .await
        .unwrap();
    branch
}

async fn file(app: &TestApp, admin: &str, body: Value) -> Value {
    let (status, rate) = app.post("/currency/rates", admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{rate}");
    rate
}

#[tokio::test]
async fn the_registry_holds_the_iso_4217_currencies() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (status, list) = app.get("/currencies", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let items = list["items"].as_array().unwrap();
    assert!(items.len() >= 150, "{} currencies", items.len());
    assert_eq!(list["total"], items.len());
    let find = |code: &str| {
        items
            .iter()
            .find(|c| c["code"] == code)
            .unwrap_or_else(|| panic!("{code} missing"))
            .clone()
    };
    assert_eq!(
        find("UGX"),
        json!({"code": "UGX", "name": "Ugandan Shilling", "symbol": "USh", "exponent": 0, "is_active": true})
    );
    assert_eq!(find("JPY")["exponent"], 0);
    assert_eq!(find("KWD")["exponent"], 3);
    assert_eq!(find("NGN")["exponent"], 2);
    assert_eq!(find("XOF")["exponent"], 0);
    let codes: Vec<&str> = items.iter().map(|c| c["code"].as_str().unwrap()).collect();
    let mut sorted = codes.clone();
    sorted.sort_unstable();
    assert_eq!(codes, sorted, "ordered by code");
    // The active filter.
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE currencies SET is_active = false WHERE code = 'SAR'",
            &[],
        )
        .await
        .unwrap();
    let (_, active) = app.get("/currencies?active=true", &cashier).await;
    assert!(active["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["is_active"] == true && c["code"] != "SAR"));
    let (_, inactive) = app.get("/currencies?active=false", &cashier).await;
    assert_eq!(inactive["total"], 1);
    assert_eq!(inactive["items"][0]["code"], "SAR");
    let (status, problem) = app.get("/currencies?active=maybe", &cashier).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "active");
}

#[tokio::test]
async fn a_base_currency_branch_reads_rate_one_never_stale() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (status, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{c}");
    assert_eq!(c["currency_code"], "UGX");
    assert_eq!(c["base_currency_code"], "UGX");
    assert_eq!(c["name"], "Ugandan Shilling");
    assert_eq!(c["symbol"], "USh");
    assert_eq!(c["exponent"], 0);
    assert_eq!(c["rate"], 1.0);
    assert_eq!(c["rate_id"], "");
    assert!(c["effective_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(c["is_stale"], false);
    assert_eq!(c["age_days"], 0);
    let (status, _) = app.call(Method::GET, "/currency/branch", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_branch_currency_without_a_rate_is_a_400_until_one_is_filed() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let nairobi = branch_in(&app, "NBO", "KES").await;
    let (admin_user, admin) = app.signed_in(hq, Role::Admin).await;
    let (_, cashier) = app.signed_in(nairobi, Role::Cashier).await;
    let (status, problem) = app.get("/currency/branch", &cashier).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    let rate = file(
        &app,
        &admin,
        json!({"currency_code": "kes", "rate": 0.0345}),
    )
    .await;
    assert_eq!(rate["currency_code"], "KES");
    assert_eq!(rate["base_currency_code"], "UGX");
    assert_eq!(rate["rate"], 0.0345);
    assert_eq!(rate["rate_id"], rate["id"]);
    assert_eq!(rate["created_by"], admin_user.id.to_string());
    let (status, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{c}");
    assert_eq!(c["currency_code"], "KES");
    assert_eq!(c["base_currency_code"], "UGX");
    assert_eq!(c["exponent"], 2);
    assert_eq!(c["rate"], 0.0345);
    assert_eq!(c["rate_id"], rate["id"]);
    assert_eq!(c["effective_at"], rate["effective_at"]);
    assert_eq!(c["is_stale"], false);
    assert_eq!(c["age_days"], 0);
    // A newer rate supersedes; a future-dated one waits for its time.
    let newer = file(
        &app,
        &admin,
        json!({"currency_code": "KES", "rate": "0.035"}),
    )
    .await;
    let future = (Utc::now() + Duration::days(3)).to_rfc3339();
    file(
        &app,
        &admin,
        json!({"currency_code": "KES", "rate": 0.04, "effective_at": future}),
    )
    .await;
    let (_, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(c["rate_id"], newer["id"]);
    assert_eq!(c["rate"], 0.035);
}

#[tokio::test]
async fn a_rate_older_than_the_staleness_window_is_stale() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let branch = branch_in(&app, "DAR", "TZS").await;
    let (_, admin) = app.signed_in(hq, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    // Exactly the window (7 days by default) is not yet stale.
    let seven = (Utc::now() - Duration::days(7) - Duration::minutes(5)).to_rfc3339();
    file(
        &app,
        &admin,
        json!({"currency_code": "TZS", "rate": 0.68, "effective_at": seven}),
    )
    .await;
    let (_, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(
        (c["age_days"].clone(), c["is_stale"].clone()),
        (json!(7), json!(false))
    );
    // Move it back past the window directly in the database.
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE exchange_rates SET effective_at = now() - interval '10 days 1 hour'",
            &[],
        )
        .await
        .unwrap();
    let (_, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(c["age_days"], 10);
    assert_eq!(c["is_stale"], true);
    // A wider window makes the same rate fresh again.
    let (status, _) = app
        .call(
            Method::PUT,
            "/settings",
            Some(&admin),
            Some(json!({"rate_staleness_days": 10})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(c["is_stale"], false);
    // Filing with a past `effective_at` (a bare date) is stale at once.
    let old = (Utc::now() - Duration::days(40))
        .format("%Y-%m-%d")
        .to_string();
    client
        .execute("DELETE FROM exchange_rates", &[])
        .await
        .unwrap();
    file(
        &app,
        &admin,
        json!({"currency_code": "TZS", "rate": 0.68, "effective_at": old}),
    )
    .await;
    let (_, c) = app.get("/currency/branch", &cashier).await;
    assert!(c["age_days"].as_i64().unwrap() >= 39, "{c}");
    assert_eq!(c["is_stale"], true);
}

#[tokio::test]
async fn the_branch_comes_from_the_session_only() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let (_, admin) = app.signed_in(hq, Role::Admin).await;
    for path in [
        format!("/currency/branch?branch_id={hq}"),
        "/currency/branch?branch_id=".to_owned(),
    ] {
        let (status, problem) = app.get(&path, &admin).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "branch_id");
    }
}

#[tokio::test]
async fn filing_a_rate_is_for_admins_and_validated() {
    let app = TestApp::spawn().await;
    let hq = app.branch("HQ").await;
    let (_, admin) = app.signed_in(hq, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE currencies SET is_active = false WHERE code = 'SAR'",
            &[],
        )
        .await
        .unwrap();
    let cases = [
        (json!({"currency_code": "USD", "rate": 0}), "rate"),
        (json!({"currency_code": "USD", "rate": -3700}), "rate"),
        (
            json!({"currency_code": "USD", "rate": "0.00000000001"}),
            "rate",
        ),
        (json!({"currency_code": "USD"}), "rate"),
        (json!({"rate": 3700}), "currency_code"),
        (
            json!({"currency_code": "XYZ", "rate": 3700}),
            "currency_code",
        ),
        (
            json!({"currency_code": "SAR", "rate": 1000}),
            "currency_code",
        ),
        (json!({"currency_code": "UGX", "rate": 1}), "currency_code"),
        (
            json!({"currency_code": "USD", "rate": 3700, "effective_at": "yesterday"}),
            "effective_at",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = app.post("/currency/rates", &admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    for role in [
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
        Role::Cashier,
        Role::Auditor,
    ] {
        let (_, token) = app.signed_in(hq, role).await;
        let (status, problem) = app
            .post(
                "/currency/rates",
                &token,
                json!({"currency_code": "USD", "rate": 3700}),
            )
            .await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
        let (status, _) = app.get("/currencies", &token).await;
        assert_eq!(status, StatusCode::OK, "{role}");
    }
    // After a base-currency change, rates are filed against the new base.
    let (status, _) = app
        .call(
            Method::PUT,
            "/settings",
            Some(&admin),
            Some(json!({"base_currency": "USD"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let rate = file(&app, &admin, json!({"currency_code": "UGX", "rate": 3700})).await;
    assert_eq!(rate["base_currency_code"], "USD");
    let (_, cashier) = app.signed_in(hq, Role::Cashier).await;
    let (_, c) = app.get("/currency/branch", &cashier).await;
    assert_eq!(c["currency_code"], "UGX");
    assert_eq!(c["base_currency_code"], "USD");
    assert_eq!(c["rate"], 3700.0);
}
