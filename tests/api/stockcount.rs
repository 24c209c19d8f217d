use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

fn id(v: &Value) -> Uuid {
    Uuid::parse_str(v["id"].as_str().unwrap()).unwrap()
}

async fn remaining(app: &TestApp, batch: Uuid) -> i32 {
    app.pool
        .get()
        .await
        .unwrap()
        .query_one("SELECT qty_remaining FROM batches WHERE id = $1", &[&batch])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn surplus_lands_on_the_newest_batch_and_shortfall_drains_the_oldest() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (manager, token) = app.signed_in(branch, Role::BranchManager).await;
    let up = app
        .medicine(
            &admin,
            json!({"name": "Paracetamol", "selling_price": 1000}),
        )
        .await;
    let down = app
        .medicine(&admin, json!({"name": "Ibuprofen", "selling_price": 1500}))
        .await;
    let same = app
        .medicine(&admin, json!({"name": "Cetirizine", "selling_price": 800}))
        .await;
    // The newer batch expires first, so "newest" cannot be confused with FEFO.
    let up_old = app
        .receive(&admin, &up["id"], branch, 10, "2031-12-31")
        .await;
    let up_new = app
        .receive(&admin, &up["id"], branch, 5, "2030-01-31")
        .await;
    let down_old = app
        .receive(&admin, &down["id"], branch, 10, "2031-12-31")
        .await;
    let down_new = app
        .receive(&admin, &down["id"], branch, 5, "2030-01-31")
        .await;
    app.receive(&admin, &same["id"], branch, 7, "2031-12-31")
        .await;

    let (status, body) = app
        .post(
            "/stockcount/submit",
            &token,
            json!({"items": [
                {"medicine_id": up["id"], "counted_quantity": 20, "notes": "found a carton"},
                {"medicine_id": down["id"], "counted_quantity": 3},
                {"medicine_id": same["id"], "counted_quantity": 7},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "completed");
    assert_eq!(body["adjustments_made"], 2);
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert_eq!(items[0]["medicine_id"], up["id"]);
    assert_eq!(items[0]["db_quantity"], 15);
    assert_eq!(items[0]["counted_quantity"], 20);
    assert_eq!(items[0]["delta"], 5);
    assert_eq!(items[1]["medicine_id"], down["id"]);
    assert_eq!(items[1]["db_quantity"], 15);
    assert_eq!(items[1]["counted_quantity"], 3);
    assert_eq!(items[1]["delta"], -12);
    assert_eq!(items[2]["delta"], 0);
    for item in items {
        for field in ["db_quantity", "counted_quantity", "delta"] {
            assert!(item[field].is_i64(), "{field} is an integer: {item}");
        }
    }

    assert_eq!(remaining(&app, id(&up_old)).await, 10);
    assert_eq!(
        remaining(&app, id(&up_new)).await,
        10,
        "surplus on the newest"
    );
    assert_eq!(
        remaining(&app, id(&down_old)).await,
        0,
        "oldest drained first"
    );
    assert_eq!(remaining(&app, id(&down_new)).await, 3);

    let client = app.pool.get().await.unwrap();
    let count_id: Uuid = client
        .query_one(
            "SELECT id FROM stock_counts WHERE branch_id = $1 AND adjustments_made = 2 AND created_by = $2",
            &[&branch, &manager.id],
        )
        .await
        .unwrap()
        .get(0);
    let lines: i64 = client
        .query_one(
            "SELECT count(*) FROM stock_count_lines WHERE stock_count_id = $1",
            &[&count_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(lines, 3);
    let notes: String = client
        .query_one(
            "SELECT notes FROM stock_count_lines WHERE stock_count_id = $1 AND delta = 5",
            &[&count_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(notes, "found a carton");
    let moves = client
        .query(
            "SELECT qty FROM stock_movements
             WHERE kind = 'ADJUST' AND reference_type = 'stock_count' AND reference_id = $1
             ORDER BY qty",
            &[&count_id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, i32>(0))
        .collect::<Vec<_>>();
    assert_eq!(moves, [-10, -2, 5]);
    app.assert_invariants().await;
}

#[tokio::test]
async fn an_admin_counts_another_branch() {
    let app = TestApp::spawn().await;
    let home = app.branch("HQ").await;
    let other = app.branch("B2").await;
    let (_, admin) = app.signed_in(home, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Zinc", "selling_price": 300}))
        .await;
    let batch = app.receive(&admin, &m["id"], other, 4, "2031-01-31").await;
    let (status, body) = app
        .post(
            "/stockcount/submit",
            &admin,
            json!({"branch_id": other, "items": [{"medicine_id": m["id"], "counted_quantity": 0}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["items"][0]["delta"], -4);
    assert_eq!(remaining(&app, id(&batch)).await, 0);
    app.assert_invariants().await;
}

#[tokio::test]
async fn invalid_counts_are_400_and_change_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, token) = app.signed_in(branch, Role::BranchManager).await;
    let stocked = app
        .medicine(&admin, json!({"name": "Stocked", "selling_price": 100}))
        .await;
    let never = app
        .medicine(
            &admin,
            json!({"name": "Never received", "selling_price": 100}),
        )
        .await;
    let batch = app
        .receive(&admin, &stocked["id"], branch, 8, "2031-01-31")
        .await;
    let m = &stocked["id"];
    let cases = [
        (json!({"items": []}), "items"),
        (json!({}), "items"),
        (
            json!({"items": [{"medicine_id": m, "counted_quantity": -1}]}),
            "items[0].counted_quantity",
        ),
        (
            json!({"items": [{"medicine_id": m, "counted_quantity": 1.5}]}),
            "items[0].counted_quantity",
        ),
        (
            json!({"items": [{"medicine_id": m}]}),
            "items[0].counted_quantity",
        ),
        (
            json!({"items": [{"medicine_id": m, "counted_quantity": 1},
                             {"medicine_id": m, "counted_quantity": 2}]}),
            "items[1].medicine_id",
        ),
        (
            json!({"items": [{"medicine_id": m, "counted_quantity": 1},
                             {"medicine_id": Uuid::now_v7(), "counted_quantity": 2}]}),
            "items[1].medicine_id",
        ),
        (
            json!({"items": [{"medicine_id": m, "counted_quantity": 1},
                             {"medicine_id": never["id"], "counted_quantity": 2}]}),
            "items[1].counted_quantity",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = app.post("/stockcount/submit", &token, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body} -> {problem}");
    }
    // The last case failed after adjusting the first line: all rolled back.
    assert_eq!(remaining(&app, id(&batch)).await, 8);
    let client = app.pool.get().await.unwrap();
    let counts: i64 = client
        .query_one("SELECT count(*) FROM stock_counts", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(counts, 0);
    // Counting zero of a medicine never received is fine: nothing to adjust.
    let (status, body) = app
        .post(
            "/stockcount/submit",
            &token,
            json!({"items": [{"medicine_id": never["id"], "counted_quantity": 0}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["adjustments_made"], 0);
    app.assert_invariants().await;
}

#[tokio::test]
async fn only_admins_and_branch_managers_count_and_only_their_branch() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let other = app.branch("B2").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Vitamin C", "selling_price": 100}))
        .await;
    let body = json!({"items": [{"medicine_id": m["id"], "counted_quantity": 3}]});
    for role in [
        Role::Cashier,
        Role::Pharmacist,
        Role::InventoryManager,
        Role::Auditor,
    ] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, problem) = app.post("/stockcount/submit", &token, body.clone()).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let (status, problem) = app
        .post(
            "/stockcount/submit",
            &manager,
            json!({"branch_id": other, "items": [{"medicine_id": m["id"], "counted_quantity": 0}]}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
}
