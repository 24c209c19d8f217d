use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::{assert_problem, Role, TestApp};

#[tokio::test]
async fn create_and_read_use_the_spec_types() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin 500mg", "selling_price": "1500", "generic_name": "amoxicillin",
                   "category": "Antibiotics", "requires_prescription": 1, "is_controlled": false,
                   "max_public_price": 2000, "barcode": "6001234"}),
        )
        .await;
    assert_eq!(m["selling_price"], "1500.00");
    assert_eq!(m["max_public_price"], "2000.00");
    assert_eq!(m["requires_prescription"], true);
    assert_eq!(m["is_controlled"], false);
    assert_eq!(m["requires_cold_chain"], false);
    assert_eq!(m["is_active"], true);
    assert_eq!(m["category"], "antibiotics");
    assert_eq!(m["vat_category"], "standard");
    assert_eq!(m["low_stock_threshold"], 10);
    assert_eq!(m["stock_quantity"], 0);
    for field in [
        "form",
        "strength",
        "unit",
        "image_key",
        "image_url",
        "regulator_registration_no",
    ] {
        assert_eq!(m[field], "", "{field}");
    }
    assert!(m["created_at"].as_str().unwrap().ends_with('Z'));
    let id = m["id"].as_str().unwrap();
    app.receive(&admin, &m["id"], branch, 7, "2030-01-31").await;
    let (status, read) = app.get(&format!("/medicines/{id}"), &admin).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["stock_quantity"], 7);
    assert!(read["stock_quantity"].is_i64());
    assert!(read["low_stock_threshold"].is_i64());
    let client = app.pool.get().await.unwrap();
    let categories: i64 = client
        .query_one(
            "SELECT count(*) FROM categories WHERE slug = 'antibiotics'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(categories, 1);
}

#[tokio::test]
async fn new_medicines_take_the_settings_threshold() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO settings (org_id, default_low_stock_threshold) VALUES ($1, 25)",
            &[&app.org_id],
        )
        .await
        .unwrap();
    let m = app
        .medicine(&admin, json!({"name": "Zinc", "selling_price": 300}))
        .await;
    assert_eq!(m["low_stock_threshold"], 25);
}

#[tokio::test]
async fn bad_bodies_are_refused_and_roles_are_checked() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    for (body, field) in [
        (json!({"selling_price": 10}), "name"),
        (json!({"name": "X"}), "selling_price"),
        (json!({"name": " ", "selling_price": 10}), "name"),
        (json!({"name": "X", "selling_price": -1}), "selling_price"),
        (
            json!({"name": "X", "selling_price": "abc"}),
            "selling_price",
        ),
        (
            json!({"name": "X", "selling_price": 10, "vat_category": "luxury"}),
            "vat_category",
        ),
        (
            json!({"name": "X", "selling_price": 10, "is_controlled": 2}),
            "is_controlled",
        ),
        (
            json!({"name": "X", "selling_price": 10, "max_public_price": 5}),
            "selling_price",
        ),
    ] {
        let (status, problem) = app.post("/medicines", &admin, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{problem}");
    }
    let (status, problem) = app
        .post(
            "/medicines",
            &cashier,
            json!({"name": "X", "selling_price": 1}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM medicines", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn update_delete_and_list() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::InventoryManager).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let a = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500, "barcode": "111", "category": "analgesics"}))
        .await;
    let b = app
        .medicine(
            &admin,
            json!({"name": "Amoxil", "generic_name": "amoxicillin", "selling_price": 900}),
        )
        .await;
    let path = format!("/medicines/{}", a["id"].as_str().unwrap());
    let (status, problem) = app
        .call(Method::PUT, &path, Some(&admin), Some(json!({})))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["detail"], "No fields to update");
    let (status, updated) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"selling_price": 550.5, "unknown": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["selling_price"], "550.50");
    assert!(updated["rev"].as_i64().unwrap() > a["rev"].as_i64().unwrap());

    let (_, page) = app.get("/medicines?search=amoxi", &cashier).await;
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["id"], b["id"]);
    let (_, page) = app.get("/medicines?search=111", &cashier).await;
    assert_eq!(page["items"][0]["id"], a["id"]);
    let (_, page) = app.get("/medicines?category=analgesics", &cashier).await;
    assert_eq!(page["total"], 1);
    let (_, page) = app.get("/medicines?page_size=1", &cashier).await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["page_size"], 1);
    assert_eq!(page["items"][0]["name"], "Amoxil");

    let (status, _) = app.call(Method::DELETE, &path, Some(&cashier), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, problem) = app.get(&path, &cashier).await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    let (_, page) = app.get("/medicines", &cashier).await;
    assert_eq!(page["total"], 1);
    let client = app.pool.get().await.unwrap();
    let op: String = client
        .query_one(
            "SELECT op FROM change_log WHERE entity = 'medicine' ORDER BY rev DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(op, "delete");
}

#[tokio::test]
async fn deactivated_medicines_read_as_missing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Old", "selling_price": 1}))
        .await;
    let path = format!("/medicines/{}", m["id"].as_str().unwrap());
    let (status, _) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"is_active": 0})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.get(&path, &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.get("/medicines/not-a-uuid", &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
