use reqwest::StatusCode;
use serde_json::json;

use crate::common::{assert_problem, Role, TestApp};

#[tokio::test]
async fn a_purchase_receives_the_batch_with_the_spec_shape() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Metformin", "selling_price": 250}))
        .await;
    let supplier = app.supplier("Quality Chemicals").await;
    let (status, b) = app
        .post(
            "/purchases",
            &pharmacist,
            json!({"supplier_id": supplier, "medicine_id": m["id"], "branch_id": branch,
                   "batch_number": "MF-01", "expiry_date": "2031-06-30", "quantity": "40",
                   "unit_cost": 120.5, "manufacturing_date": null, "notes": "first delivery"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["qty_received"], 40);
    assert_eq!(b["qty_remaining"], 40);
    assert_eq!(b["unit_cost"], "120.50");
    assert_eq!(b["medicine_name"], "Metformin");
    assert_eq!(b["medicine_selling_price"], 250.0);
    assert!(b["medicine_selling_price"].is_number());
    assert_eq!(b["supplier_name"], "Quality Chemicals");
    assert_eq!(b["is_deleted"], false);
    assert_eq!(b["expiry_date"], "2031-06-30");
    assert!(b["manufacturing_date"].is_null());
    assert_eq!(b["status"], "active");
    assert_eq!(b["regulator_status"], "active");
    assert_eq!(b["branch_id"], branch.to_string());
    assert_eq!(b["supplier_id"], supplier.to_string());
    for field in ["id", "medicine_id", "batch_number", "created_at"] {
        assert!(b[field].is_string(), "{field}");
    }
    let (_, read) = app
        .get(
            &format!("/medicines/{}", m["id"].as_str().unwrap()),
            &pharmacist,
        )
        .await;
    assert_eq!(read["stock_quantity"], 40);
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT kind, qty FROM stock_movements WHERE batch_id = $1",
            &[&uuid::Uuid::parse_str(b["id"].as_str().unwrap()).unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "IN");
    assert_eq!(row.get::<_, i32>(1), 40);
    let changes: i64 = client
        .query_one(
            "SELECT count(*) FROM change_log WHERE entity = 'batch' AND entity_id = $1",
            &[&b["id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(changes, 1);
    app.assert_invariants().await;
}

#[tokio::test]
async fn bad_purchases_change_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let other = app.branch("B2").await;
    let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Metformin", "selling_price": 250}))
        .await;
    let supplier = app.supplier("S").await;
    let good = json!({"supplier_id": supplier, "medicine_id": m["id"], "branch_id": branch,
                      "batch_number": "MF-01", "expiry_date": "2031-06-30", "quantity": 5,
                      "unit_cost": 100});
    for (field, value) in [
        ("quantity", json!(0)),
        ("quantity", json!(-3)),
        ("quantity", json!("2.5")),
        ("unit_cost", json!(-1)),
        ("expiry_date", json!("31/06/2031")),
        ("medicine_id", json!(uuid::Uuid::now_v7())),
        ("supplier_id", json!(uuid::Uuid::now_v7())),
        ("batch_number", json!("")),
    ] {
        let mut body = good.clone();
        body[field] = value;
        let (status, problem) = app.post("/purchases", &pharmacist, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{problem}");
    }
    for field in [
        "supplier_id",
        "medicine_id",
        "branch_id",
        "batch_number",
        "expiry_date",
        "quantity",
        "unit_cost",
    ] {
        let mut body = good.clone();
        body.as_object_mut().unwrap().remove(field);
        let (status, problem) = app.post("/purchases", &pharmacist, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{problem}");
    }
    let (status, _) = app.post("/purchases", &cashier, good.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut elsewhere = good.clone();
    elsewhere["branch_id"] = json!(other);
    let (status, _) = app.post("/purchases", &pharmacist, elsewhere).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM batches", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}
