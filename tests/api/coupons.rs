use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{assert_problem, Role, TestApp};

fn percent(code: &str, value: Value) -> Value {
    json!({"code": code, "discount_type": "percentage", "discount_value": value})
}

#[tokio::test]
async fn create_answers_the_spec_shape_with_the_code_uppercased() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (manager, token) = app.signed_in(branch, Role::BranchManager).await;
    let (status, c) = app
        .post(
            "/coupons",
            &token,
            json!({"code": "  summer10 ", "type": "promotional", "discount_type": "percentage",
                   "discount_value": 10, "description": "Summer sale",
                   "valid_from": "2030-01-01", "valid_until": "2030-02-01T12:30:00+03:00",
                   "max_uses": 50}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    assert_eq!(c["code"], "SUMMER10");
    assert_eq!(c["type"], "promotional");
    assert_eq!(c["discount_type"], "percentage");
    assert!(c["discount_value"].is_number(), "{c}");
    assert_eq!(c["discount_value"].as_f64(), Some(10.0));
    assert_eq!(c["is_active"], true);
    assert!(c["is_active"].is_boolean());
    assert!(c["usage_count"].is_i64());
    assert_eq!(c["usage_count"], 0);
    assert!(c["id"].is_string());
    assert_eq!(c["description"], "Summer sale");
    assert_eq!(c["valid_from"], "2030-01-01T00:00:00.000Z");
    assert_eq!(c["valid_until"], "2030-02-01T09:30:00.000Z");
    assert_eq!(c["max_uses"], 50);
    assert_eq!(c["applies_to"], "all");
    assert!(c["applies_to_id"].is_null());
    assert_eq!(c["created_by"], manager.id.to_string());

    let client = app.pool.get().await.unwrap();
    let stored: String = client
        .query_one("SELECT code FROM coupons", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, "SUMMER10");
    let changes: i64 = client
        .query_one(
            "SELECT count(*) FROM change_log WHERE entity = 'coupon' AND op = 'create'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(changes, 1, "a created coupon travels to the tills");
}

#[tokio::test]
async fn type_defaults_to_promotional_and_nullable_fields_may_be_null() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, c) = app
        .post(
            "/coupons",
            &admin,
            json!({"code": "FLAT500", "discount_type": "fixed", "discount_value": 500,
                   "valid_from": null, "valid_until": null, "max_uses": null}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    assert_eq!(c["type"], "promotional");
    assert_eq!(c["discount_value"].as_f64(), Some(500.0));
    assert!(c["valid_from"].is_null() && c["valid_until"].is_null() && c["max_uses"].is_null());
    // A fixed discount may be above 100.
    let (status, _) = app
        .post(
            "/coupons",
            &admin,
            json!({"code": "FLAT150", "discount_type": "fixed", "discount_value": 150}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn each_invalid_field_is_a_400_naming_it() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let cases = [
        (
            json!({"code": "", "discount_type": "fixed", "discount_value": 5}),
            "code",
        ),
        (
            json!({"code": "   ", "discount_type": "fixed", "discount_value": 5}),
            "code",
        ),
        (
            json!({"discount_type": "fixed", "discount_value": 5}),
            "code",
        ),
        (
            json!({"code": "A", "discount_type": "bogus", "discount_value": 5}),
            "discount_type",
        ),
        (json!({"code": "A", "discount_value": 5}), "discount_type"),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 0}),
            "discount_value",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": -5}),
            "discount_value",
        ),
        (
            json!({"code": "A", "discount_type": "fixed"}),
            "discount_value",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": "x"}),
            "discount_value",
        ),
        (percent("A", json!(100.5)), "discount_value"),
        (percent("A", json!(150)), "discount_value"),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 5,
                   "valid_from": "2030-02-01", "valid_until": "2030-01-01"}),
            "valid_until",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 5,
                   "valid_from": "tomorrow"}),
            "valid_from",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 5, "max_uses": 0}),
            "max_uses",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 5, "max_uses": 1.5}),
            "max_uses",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 5,
                   "applies_to": "everything"}),
            "applies_to",
        ),
        (
            json!({"code": "A", "discount_type": "fixed", "discount_value": 5,
                   "applies_to": "medicine", "applies_to_id": uuid::Uuid::now_v7()}),
            "applies_to_id",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = app.post("/coupons", &admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
    // Exactly 100 percent is allowed.
    let (status, c) = app
        .post("/coupons", &admin, percent("FREE", json!(100)))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let n: i64 = app
        .pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM coupons", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "refused coupons are not stored");
}

#[tokio::test]
async fn a_duplicate_code_is_a_409_whatever_its_case() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, _) = app
        .post("/coupons", &admin, percent("SAVE5", json!(5)))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, problem) = app
        .post("/coupons", &admin, percent(" save5", json!(7)))
        .await;
    assert_problem(status, &problem, StatusCode::CONFLICT);
    assert!(problem["detail"].as_str().unwrap().contains("SAVE5"));
}

#[tokio::test]
async fn only_admins_and_branch_managers_create() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    for role in [
        Role::Cashier,
        Role::Pharmacist,
        Role::InventoryManager,
        Role::Auditor,
    ] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, problem) = app.post("/coupons", &token, percent("X1", json!(5))).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    let (status, problem) = app
        .call(
            reqwest::Method::POST,
            "/coupons",
            None,
            Some(percent("X1", json!(5))),
        )
        .await;
    assert_problem(status, &problem, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_coupon_may_target_a_medicine() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin", "selling_price": 1000}),
        )
        .await;
    let (status, c) = app
        .post(
            "/coupons",
            &admin,
            json!({"code": "AMOX", "discount_type": "percentage", "discount_value": 15,
                   "applies_to": "medicine", "applies_to_id": m["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    assert_eq!(c["applies_to"], "medicine");
    assert_eq!(c["applies_to_id"], m["id"]);
}

#[tokio::test]
async fn the_list_is_paged_newest_first_for_anyone_signed_in() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    for i in 0..3 {
        let (status, _) = app
            .post("/coupons", &admin, percent(&format!("C{i}"), json!(5 + i)))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, page) = app.get("/coupons", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 3);
    assert_eq!(page["page"], 1);
    assert_eq!(page["page_size"], 20);
    let codes: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["C2", "C1", "C0"]);
    let first = &page["items"][0];
    assert!(first["discount_value"].is_number());
    assert_eq!(first["is_active"], true);
    assert!(first["usage_count"].is_i64());
    for field in ["description", "applies_to", "created_at"] {
        assert!(first[field].is_string(), "{field}: {first}");
    }
    for field in ["valid_from", "valid_until", "max_uses", "applies_to_id"] {
        assert!(first.get(field).is_some(), "{field} present: {first}");
    }

    let (_, page2) = app.get("/coupons?page=2&page_size=2", &cashier).await;
    assert_eq!(page2["total"], 3);
    assert_eq!(page2["page_size"], 2);
    assert_eq!(page2["items"].as_array().unwrap().len(), 1);
    assert_eq!(page2["items"][0]["code"], "C0");

    let (status, problem) = app.get("/coupons?page=0", &cashier).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
}
