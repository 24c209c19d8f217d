//! The buying flow end to end on known data: an order of three lines,
//! approved by a manager, received in two deliveries (one with freight,
//! one line partly rejected), invoiced with one price 5 % off (held, then
//! released and paid), some sold, some returned to the supplier, some
//! written off; the stock value and the margins equal figures worked out
//! by hand, to the cent.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{Role, TestApp};

fn in_a_year() -> String {
    (chrono::Utc::now().date_naive() + chrono::Duration::days(365)).to_string()
}

fn id(v: &Value) -> &str {
    v["id"].as_str().unwrap()
}

async fn ok(app: &TestApp, path: &str, token: &str, body: Value, want: StatusCode) -> Value {
    let (status, answer) = app.post(path, token, body).await;
    assert_eq!(status, want, "{path}: {answer}");
    answer
}

#[tokio::test]
async fn order_receive_match_pay_sell_return_and_value_to_the_cent() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let (_, buyer) = app.signed_in(branch, Role::InventoryManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let medicine = |name: &str, price: i64| {
        let app = &app;
        let admin = admin.clone();
        let name = name.to_owned();
        async move {
            app.medicine(&admin, json!({"name": name, "selling_price": price}))
                .await
        }
    };
    let a = medicine("Amoxicillin", 5).await;
    let b = medicine("Brufen", 10).await;
    let c = medicine("Cetirizine", 4).await;

    // Ordered: 100 A at 2.00, 50 B at 6.00, 20 C at 1.00 = 520.00.
    let order = ok(
        &app,
        "/purchase-orders",
        &buyer,
        json!({"supplier_id": supplier, "lines": [
            {"medicine_id": id(&a), "quantity": 100, "unit_cost": "2.00"},
            {"medicine_id": id(&b), "quantity": 50, "unit_cost": "6.00"},
            {"medicine_id": id(&c), "quantity": 20, "unit_cost": "1.00"}]}),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(order["total"], "520.00");
    let po = format!("/purchase-orders/{}", id(&order));
    ok(
        &app,
        &format!("{po}/submit"),
        &buyer,
        json!({}),
        StatusCode::OK,
    )
    .await;
    ok(
        &app,
        &format!("{po}/approve"),
        &manager,
        json!({}),
        StatusCode::OK,
    )
    .await;
    ok(
        &app,
        &format!("{po}/send"),
        &manager,
        json!({}),
        StatusCode::OK,
    )
    .await;
    let lines: Vec<String> = order["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| id(l).to_owned())
        .collect();
    let line = |n: usize, medicine: &Value, batch: &str, qty: i64, cost: &str| {
        json!({"purchase_order_line_id": lines[n], "medicine_id": id(medicine),
               "batch_number": batch, "expiry_date": in_a_year(),
               "quantity_received": qty, "unit_cost": cost})
    };

    // Delivery 1: 100 A, 30 B (5 more rejected), 10.00 freight. Values
    // 200 and 180: shares 5.26 and 4.74; A lands at 205.26 (2.0526 a
    // unit), B at 184.74 (6.1580 a unit).
    let mut b1 = line(1, &b, "B-1", 30, "6.00");
    b1["quantity_rejected"] = json!(5);
    b1["rejection_reason"] = json!("crushed");
    let first = ok(
        &app,
        "/goods-received",
        &buyer,
        json!({"supplier_id": supplier, "purchase_order_id": id(&order),
               "delivery_reference": "DN-1", "lines": [line(0, &a, "A-1", 100, "2.00"), b1],
               "charges": [{"kind": "freight", "amount": "10.00"}]}),
        StatusCode::CREATED,
    )
    .await;
    let first = ok(
        &app,
        &format!("/goods-received/{}/post", id(&first)),
        &buyer,
        json!({}),
        StatusCode::OK,
    )
    .await;
    assert_eq!(first["lines"][0]["charge_share"], "5.26");
    assert_eq!(first["lines"][1]["charge_share"], "4.74");
    assert_eq!(first["lines"][0]["landed_unit_cost"], "2.0526");
    assert_eq!(first["lines"][1]["landed_unit_cost"], "6.1580");
    let (_, o) = app.get(&po, &buyer).await;
    assert_eq!(o["status"], "partially_received", "{o}");

    // Delivery 2: the other 20 B and the 20 C.
    let second = ok(
        &app,
        "/goods-received",
        &buyer,
        json!({"supplier_id": supplier, "delivery_reference": "DN-2",
               "lines": [line(1, &b, "B-2", 20, "6.00"), line(2, &c, "C-1", 20, "1.00")]}),
        StatusCode::CREATED,
    )
    .await;
    let second = ok(
        &app,
        &format!("/goods-received/{}/post", id(&second)),
        &buyer,
        json!({}),
        StatusCode::OK,
    )
    .await;
    let (_, o) = app.get(&po, &buyer).await;
    assert_eq!(o["status"], "received", "{o}");

    // The invoice bills A at 2.00 and B at 6.30 (5 % off): held.
    let invoice = ok(
        &app,
        "/supplier-finance/invoices",
        &buyer,
        json!({"supplier_id": supplier, "invoice_no": "INV-1", "total_amount": "399.00",
               "lines": [
                 {"goods_received_line_id": first["lines"][0]["id"], "quantity": 100, "unit_cost": "2.00"},
                 {"goods_received_line_id": first["lines"][1]["id"], "quantity": 30, "unit_cost": "6.30"}],
               "charges": [{"kind": "freight", "amount": "10.00"}]}),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(invoice["match_status"], "on_hold");
    let inv = format!("/supplier-finance/invoices/{}", id(&invoice));
    let (status, _) = app
        .post(
            &format!("{inv}/payments"),
            &buyer,
            json!({"amount": "399.00"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    ok(
        &app,
        &format!("{inv}/release"),
        &manager,
        json!({"reason": "New price list agreed"}),
        StatusCode::OK,
    )
    .await;
    let paid = ok(
        &app,
        &format!("{inv}/payments"),
        &buyer,
        json!({"amount": "399.00"}),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(paid["invoice"]["status"], "paid");

    // Sold: 10 A (50.00, cost 20.526) and 5 B from B-1 (50.00, cost 30.79).
    ok(
        &app,
        "/sales",
        &admin,
        json!({"items": [{"medicine_id": id(&a), "quantity": 10},
                         {"medicine_id": id(&b), "quantity": 5}],
               "payment_method": "cash"}),
        StatusCode::CREATED,
    )
    .await;
    // 10 C go back to the supplier (10.00); 2 A are written off.
    let c_batch = second["lines"][1]["batch_id"].clone();
    let back = ok(
        &app,
        "/supplier-returns",
        &buyer,
        json!({"supplier_id": supplier, "reason": "damaged",
               "lines": [{"batch_id": c_batch, "quantity": 10}]}),
        StatusCode::CREATED,
    )
    .await;
    assert_eq!(back["total_value"], "10.00");
    ok(
        &app,
        "/stock/write-offs",
        &buyer,
        json!({"reason": "damaged",
               "items": [{"batch_id": first["lines"][0]["batch_id"], "quantity": 2}]}),
        StatusCode::CREATED,
    )
    .await;

    // A: 88 of 100 at 205.26 = 180.63; B-1: 25 of 30 at 184.74 = 153.95;
    // B-2: 20 × 6.00 = 120.00; C: 10 of 20 at 20.00 = 10.00. Total 464.58.
    let (_, v) = app.get("/reports/stock-valuation", &admin).await;
    assert_eq!(v["total_value"], "464.58", "{v}");
    let yesterday = (chrono::Utc::now().date_naive() - chrono::Duration::days(2)).to_string();
    let (_, before) = app
        .get(
            &format!("/reports/stock-valuation?as_of={yesterday}"),
            &admin,
        )
        .await;
    assert_eq!(before["total_value"], "0.00", "{before}");
    // Revenue 100.00, cost 20.526 + 30.79 = 51.32, margin 48.68 (48.7 %).
    let (_, m) = app.get("/reports/margins", &admin).await;
    assert_eq!(m["totals"]["revenue"], "100.00", "{m}");
    assert_eq!(m["totals"]["cost_of_goods_sold"], "51.32", "{m}");
    assert_eq!(m["totals"]["gross_margin"], "48.68", "{m}");
    assert_eq!(m["totals"]["margin_pct"], 48.7, "{m}");
    // The purchases report: 520.00 of goods and 10.00 of freight.
    let (_, p) = app.get("/reports/purchases", &admin).await;
    assert_eq!(p["totals"]["spend"], 530.0, "{p}");
    assert_eq!(p["totals"]["charges"], 10.0, "{p}");
    // Each posted delivery and the supplier return is a stock change for
    // the tax authority, queued with it.
    let client = app.pool.get().await.unwrap();
    for source in [id(&first), id(&second), id(&back)] {
        let source: uuid::Uuid = source.parse().unwrap();
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM fiscal_documents WHERE kind = 'T131' AND source_id = $1",
                &[&source],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "{source}");
    }
    app.assert_invariants().await;
}
