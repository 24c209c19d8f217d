use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

fn id(v: &Value) -> Uuid {
    Uuid::parse_str(v["id"].as_str().unwrap()).unwrap()
}

fn quarantine_path(batch: &Value) -> String {
    format!(
        "/supplier-finance/batches/{}/quarantine",
        batch["id"].as_str().unwrap()
    )
}

#[tokio::test]
async fn quarantine_sets_each_regulator_status_and_emits_a_change() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
    let m = app
        .medicine(&admin, json!({"name": "Oxytocin", "selling_price": 2000}))
        .await;
    let batch = app.receive(&admin, &m["id"], branch, 6, "2031-01-31").await;
    let path = quarantine_path(&batch);
    let mut last_rev = 0;
    for status in ["quarantined", "recalled", "active"] {
        let (code, b) = app
            .post(&path, &pharmacist, json!({"status": status}))
            .await;
        assert_eq!(code, StatusCode::OK, "{b}");
        assert_eq!(b["regulator_status"], status);
        assert_eq!(b["id"], batch["id"]);
        assert_eq!(b["qty_remaining"], 6);
        assert!(b["unit_cost"].is_number());
        let rev = b["rev"].as_i64().unwrap();
        assert!(rev > last_rev, "rev moves on every write");
        last_rev = rev;
    }
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT payload->>'regulator_status', op FROM change_log
             WHERE entity = 'batch' AND entity_id = $1 AND rev = $2",
            &[&batch["id"].as_str().unwrap(), &last_rev],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "active");
    assert_eq!(row.get::<_, String>(1), "update");
    let audits: i64 = client
        .query_one(
            "SELECT count(*) FROM audit_log WHERE entity_type = 'batch' AND entity_id = $1",
            &[&batch["id"].as_str().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(audits, 3);

    // A quarantined batch is not sold from: a transfer finds no stock.
    app.post(&path, &admin, json!({"status": "quarantined"}))
        .await;
    let other = app.branch("B2").await;
    let (status, problem) = app
        .post(
            "/transfers",
            &admin,
            json!({"medicine_id": m["id"], "from_branch_id": branch, "to_branch_id": other, "qty": 1}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    app.assert_invariants().await;
}

#[tokio::test]
async fn a_bad_status_is_a_400_naming_the_field() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Ergometrine", "selling_price": 900}))
        .await;
    let batch = app.receive(&admin, &m["id"], branch, 2, "2031-01-31").await;
    let path = quarantine_path(&batch);
    for body in [
        json!({"status": "destroyed"}),
        json!({"status": ""}),
        json!({}),
        json!({"status": 3}),
    ] {
        let (status, problem) = app.post(&path, &admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "status", "{body}");
    }
    let regulator: String = app
        .pool
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT regulator_status FROM batches WHERE id = $1",
            &[&id(&batch)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(regulator, "active");
}

#[tokio::test]
async fn other_branches_batches_are_404_to_non_admins() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, manager_b) = app.signed_in(b, Role::InventoryManager).await;
    let m = app
        .medicine(&admin, json!({"name": "Misoprostol", "selling_price": 700}))
        .await;
    let batch_a = app.receive(&admin, &m["id"], a, 2, "2031-01-31").await;
    let body = json!({"status": "recalled"});
    let (status, problem) = app
        .post(&quarantine_path(&batch_a), &manager_b, body.clone())
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    let (status, problem) = app
        .post(
            &format!("/supplier-finance/batches/{}/quarantine", Uuid::now_v7()),
            &admin,
            body.clone(),
        )
        .await;
    assert_problem(status, &problem, StatusCode::NOT_FOUND);
    for role in [Role::Cashier, Role::Auditor] {
        let (_, token) = app.signed_in(a, role).await;
        let (status, problem) = app
            .post(&quarantine_path(&batch_a), &token, body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    // An admin of another branch may act on any batch.
    let (_, admin_b) = app.signed_in(b, Role::Admin).await;
    let (status, batch) = app.post(&quarantine_path(&batch_a), &admin_b, body).await;
    assert_eq!(status, StatusCode::OK, "{batch}");
    assert_eq!(batch["regulator_status"], "recalled");
}

async fn set_lead_time(app: &TestApp, batch: &Value, days: i32, name: &str) {
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE suppliers SET lead_time_days = $1, name = $2
             WHERE id = (SELECT supplier_id FROM batches WHERE id = $3)",
            &[&days, &name, &id(batch)],
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn reorder_suggestions_lowest_stock_first_with_the_latest_supplier() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, pharmacist) = app.signed_in(a, Role::Pharmacist).await;
    let medicine = |name: &str, threshold: i64| json!({"name": name, "selling_price": 100, "low_stock_threshold": threshold});
    let low = app.medicine(&admin, medicine("Low", 10)).await;
    let empty = app.medicine(&admin, medicine("Empty", 10)).await;
    let plenty = app.medicine(&admin, medicine("Plenty", 5)).await;
    let edge = app.medicine(&admin, medicine("Edge", 10)).await;
    let inactive = app.medicine(&admin, medicine("Inactive", 10)).await;
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE medicines SET is_active = false WHERE id = $1",
            &[&id(&inactive)],
        )
        .await
        .unwrap();

    let older = app.receive(&admin, &low["id"], a, 1, "2031-01-31").await;
    let newer = app.receive(&admin, &low["id"], a, 2, "2030-01-31").await;
    set_lead_time(&app, &older, 30, "Old Supplier").await;
    set_lead_time(&app, &newer, 4, "New Supplier").await;
    app.receive(&admin, &plenty["id"], a, 20, "2031-01-31")
        .await;
    let edge_batch = app.receive(&admin, &edge["id"], a, 10, "2031-01-31").await;
    set_lead_time(&app, &edge_batch, 0, "Edge Supplier").await;
    // Stock at B only counts for B or the chain.
    app.receive(&admin, &empty["id"], b, 8, "2031-01-31").await;

    let (status, body) = app
        .get("/supplier-finance/reorder-suggestions", &pharmacist)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let items = body["items"].as_array().unwrap();
    assert_eq!(body["total"], 3);
    let names: Vec<&str> = items.iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Empty", "Low", "Edge"]);

    assert_eq!(items[0]["medicine_id"], empty["id"]);
    assert_eq!(items[0]["stock_quantity"], 0);
    assert_eq!(items[0]["suggested_qty"], 20);
    assert!(
        items[0]["supplier_id"].is_null(),
        "no batch at A: {}",
        items[0]
    );
    assert!(items[0]["lead_time_days"].is_null());

    assert_eq!(items[1]["stock_quantity"], 3);
    assert_eq!(items[1]["low_stock_threshold"], 10);
    assert_eq!(items[1]["suggested_qty"], 17);
    assert_eq!(items[1]["supplier_name"], "New Supplier");
    assert_eq!(items[1]["lead_time_days"], 4);
    assert!(items[1]["supplier_id"].is_string());

    assert_eq!(items[2]["stock_quantity"], 10);
    assert_eq!(items[2]["suggested_qty"], 10);
    assert_eq!(items[2]["lead_time_days"], 0);
    for item in items {
        for field in ["stock_quantity", "low_stock_threshold", "suggested_qty"] {
            assert!(item[field].is_i64(), "{field}: {item}");
        }
    }

    // Across the chain, Empty has 8 units and sorts after Low.
    let (_, chain) = app
        .get("/supplier-finance/reorder-suggestions", &admin)
        .await;
    let names: Vec<&str> = chain["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Low", "Empty", "Edge"]);
    assert_eq!(chain["items"][1]["suggested_qty"], 12);

    // An admin may look at one branch; B has none of Low, Plenty or Edge.
    let (_, of_b) = app
        .get(
            &format!("/supplier-finance/reorder-suggestions?branch_id={b}"),
            &admin,
        )
        .await;
    let names: Vec<&str> = of_b["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Edge", "Low", "Plenty", "Empty"]);

    let (status, problem) = app
        .get(
            &format!("/supplier-finance/reorder-suggestions?branch_id={b}"),
            &pharmacist,
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let (status, problem) = app
        .get("/supplier-finance/reorder-suggestions", &cashier)
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
}
