use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_problem, Role, TestApp};

async fn supplier(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, s) = app.post("/suppliers", token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{s}");
    s
}

fn names(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn create_applies_the_defaults_and_the_snapshot_types() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, manager) = app.signed_in(branch, Role::InventoryManager).await;
    let s = supplier(
        &app,
        &manager,
        json!({"name": "Quality Chemicals", "tax_number": "1000012345"}),
    )
    .await;
    assert_eq!(s["supplier_type"], "distributor");
    assert_eq!(s["lead_time_days"], 7);
    assert_eq!(s["reliability_score"], 100.0);
    assert_eq!(s["is_active"], 1);
    assert_eq!(s["is_deleted"], 0);
    let custom = supplier(
        &app,
        &manager,
        json!({"name": "Maker", "supplier_type": "manufacturer", "lead_time_days": 21, "reliability_score": 87.5}),
    )
    .await;
    assert_eq!(custom["lead_time_days"], 21);
    assert_eq!(custom["reliability_score"], 87.5);
    for (body, field) in [
        (json!({}), "name"),
        (json!({"name": " "}), "name"),
        (json!({"name": "X", "lead_time_days": -1}), "lead_time_days"),
        (
            json!({"name": "X", "reliability_score": 101}),
            "reliability_score",
        ),
    ] {
        let (status, problem) = app.post("/suppliers", &manager, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field);
    }
    for role in [Role::Cashier, Role::Pharmacist, Role::Auditor] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, _) = app.post("/suppliers", &token, json!({"name": "No"})).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role:?}");
    }
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM change_log WHERE entity = 'supplier'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 2);
}

#[tokio::test]
async fn list_search_and_soft_delete() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::BranchManager).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let a = supplier(
        &app,
        &admin,
        json!({"name": "Abacus Pharma", "tax_number": "1000098765"}),
    )
    .await;
    supplier(
        &app,
        &admin,
        json!({"name": "national medical stores", "tax_number": "1000055555"}),
    )
    .await;
    supplier(
        &app,
        &admin,
        json!({"name": "Cipla Quality", "tax_number": "2000011111"}),
    )
    .await;
    let (_, page) = app.get("/suppliers", &cashier).await;
    assert_eq!(
        names(&page),
        ["Abacus Pharma", "Cipla Quality", "national medical stores"]
    );
    assert_eq!(page["page_size"], 20);
    let (_, page) = app.get("/suppliers?search=QUALITY", &cashier).await;
    assert_eq!(names(&page), ["Cipla Quality"]);
    let (_, page) = app.get("/suppliers?search=55555", &cashier).await;
    assert_eq!(names(&page), ["national medical stores"]);
    let (status, problem) = app.get("/suppliers?is_active=maybe", &cashier).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);

    let path = format!("/suppliers/{}", a["id"].as_str().unwrap());
    let (status, _) = app.call(Method::DELETE, &path, Some(&cashier), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let res = app
        .http
        .delete(format!("{}{path}", app.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert!(res.text().await.unwrap().is_empty());
    let (status, _) = app.get(&path, &cashier).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, page) = app.get("/suppliers", &cashier).await;
    assert_eq!(page["total"], 2);
    let (_, page) = app.get("/suppliers?is_active=all", &cashier).await;
    assert_eq!(page["total"], 3);
    assert_eq!(page["items"][0]["is_deleted"], 1);
    assert_eq!(page["items"][0]["is_active"], 0);
    let (_, page) = app.get("/suppliers?is_active=false", &cashier).await;
    assert_eq!(names(&page), ["Abacus Pharma"]);
    let (status, _) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn update_applies_only_the_allowlist() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let s = supplier(&app, &admin, json!({"name": "Old name"})).await;
    let path = format!("/suppliers/{}", s["id"].as_str().unwrap());
    let (status, problem) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"id": "x", "is_deleted": 1, "rev": 99})),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["detail"], "No fields to update");
    let (status, updated) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"name": "New name", "lead_time_days": 3, "phone": "+256700000000", "created_at": "2020-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(updated["name"], "New name");
    assert_eq!(updated["lead_time_days"], 3);
    assert_eq!(updated["created_at"], s["created_at"]);
    let (status, deactivated) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"is_active": false})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(deactivated["is_active"], 0);
    let (status, _) = app.get(&path, &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
