//! An order drafted from the reorder list, and the path it takes.

use reqwest::StatusCode;
use serde_json::json;
use uuid::Uuid;

use super::{refused, shop, text, Shop};
use crate::common::TestApp;

/// Inserts `n` medicines with no stock at all: each is at or below its
/// threshold (10), with stock 0, so it comes first on the reorder list.
async fn empty_medicines(app: &TestApp, n: i64) {
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO medicines (id, name, selling_price)
             SELECT gen_random_uuid(), 'Empty ' || i, 1 FROM generate_series(1, $1::bigint) i",
            &[&n],
        )
        .await
        .unwrap();
}

async fn purchase(s: &Shop, medicine: &str, supplier: Uuid, qty: i64, cost: &str) {
    let body = json!({"supplier_id": supplier, "medicine_id": medicine, "branch_id": s.branch,
                      "batch_number": format!("B-{}", Uuid::now_v7().simple()),
                      "expiry_date": "2035-01-01", "quantity": qty, "unit_cost": cost});
    let (status, b) = s.app.post("/purchases", &s.admin, body).await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
}

#[tokio::test]
async fn an_order_drafted_from_the_reorder_list_is_never_crowded_out() {
    let s = shop().await;
    let other_supplier = s.app.supplier("Abacus").await;
    let mut ours = Vec::new();
    for name in ["Ours low", "Ours lower"] {
        let m = s
            .app
            .medicine(&s.admin, json!({"name": name, "selling_price": 10}))
            .await;
        ours.push(text(&m["id"]));
    }
    // Ours: 2 and 4 units left of a threshold of 10, last bought from us.
    purchase(&s, &ours[0], other_supplier, 1, "9.00").await;
    purchase(&s, &ours[0], s.supplier, 3, "7.25").await;
    purchase(&s, &ours[1], s.supplier, 2, "3.00").await;
    // Last bought from the other supplier: not ours any more.
    purchase(&s, &s.medicines[0], s.supplier, 1, "5.00").await;
    purchase(&s, &s.medicines[0], other_supplier, 1, "6.00").await;
    // Bought from us but well stocked: nothing to order.
    purchase(&s, &s.medicines[1], s.supplier, 500, "1.00").await;
    // More low items of nobody's than the suggestion list shows, all
    // lower than ours.
    empty_medicines(&s.app, 120).await;
    let (status, list) = s
        .app
        .get(
            &format!(
                "/supplier-finance/reorder-suggestions?branch_id={}",
                s.branch
            ),
            &s.admin,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let shown: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["medicine_id"].as_str().unwrap())
        .collect();
    assert_eq!(shown.len(), 100);
    assert!(
        !ours.iter().any(|m| shown.contains(&m.as_str())),
        "the list must crowd ours out for the test to mean something"
    );

    let (status, order) = s
        .app
        .post(
            "/purchase-orders/from-reorder",
            &s.buyer,
            json!({"supplier_id": s.supplier}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{order}");
    assert_eq!(order["status"], "draft");
    assert_eq!(order["po_number"], "KLA-PO-000001");
    assert_eq!(order["supplier_id"], s.supplier.to_string());
    let lines = order["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{order}");
    // Lowest stock first: 2 units (suggests 18), then 4 (suggests 16).
    assert_eq!(lines[0]["medicine_id"], ours[1].as_str());
    assert_eq!(lines[0]["quantity_ordered"], 18);
    assert_eq!(lines[0]["unit_cost"], "3.00");
    assert_eq!(lines[0]["line_total"], "54.00");
    assert_eq!(lines[1]["medicine_id"], ours[0].as_str());
    assert_eq!(lines[1]["quantity_ordered"], 16);
    assert_eq!(lines[1]["unit_cost"], "7.25");
    assert_eq!(lines[1]["line_total"], "116.00");
    assert_eq!(order["total"], "170.00");

    // Nothing to order from a supplier no low medicine came from last.
    let quiet = s.app.supplier("Quiet").await;
    let before = s.written().await;
    for supplier in [quiet, Uuid::now_v7()] {
        let (status, body) = s
            .app
            .post(
                "/purchase-orders/from-reorder",
                &s.buyer,
                json!({"supplier_id": supplier}),
            )
            .await;
        refused(status, &body, StatusCode::BAD_REQUEST, Some("supplier_id"));
    }
    assert_eq!(s.written().await, before);
    s.app.assert_invariants().await;
}

#[tokio::test]
async fn the_document_lists_the_moves_and_from_reorder_takes_only_post() {
    let s = shop().await;
    let (status, body) = s.app.get("/purchase-orders/from-reorder", &s.buyer).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    let (status, _) = s
        .app
        .get(&format!("/purchase-orders/{}", Uuid::now_v7()), &s.buyer)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = s.app.get("/purchase-orders/not-an-id", &s.buyer).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
