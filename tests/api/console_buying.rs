//! Buying on screen beyond the order's moves: a draft's lines edited
//! (changed, added by name, removed) as the API then reads them, and a
//! delivery filled from a box's GS1 code and posted with its freight.

use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};
use crate::console::{text_of, Console};

/// A GTIN-14 with its check digit, from 13 digits.
fn gtin(body13: &str) -> String {
    let d = domain::gs1::check_digit(body13.as_bytes()).unwrap();
    format!("{body13}{}", d as char)
}

fn cost(v: &serde_json::Value) -> f64 {
    v.as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_drafts_lines_are_edited_on_screen_as_the_api_reads_them() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, buyer) = app.signed_in(a, Role::InventoryManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let metformin = app
        .medicine(
            &admin,
            json!({"name": "Metformin 500mg", "selling_price": 250}),
        )
        .await;
    app.medicine(
        &admin,
        json!({"name": "Zinc sulphate 20mg", "selling_price": 90}),
    )
    .await;
    let (status, order) = app
        .post(
            "/purchase-orders",
            &buyer,
            json!({"supplier_id": supplier, "lines": [
                {"medicine_id": metformin["id"], "quantity": 50, "unit_cost": "120"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{order}");
    let oid = order["id"].as_str().unwrap().to_owned();
    let first = order["lines"][0]["id"].as_str().unwrap().to_owned();
    let (_, console) = Console::of(&app, a, Role::InventoryManager).await;
    let page = format!("/console/purchase-orders/{oid}");
    let (status, html, _) = console.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(r#"id="lines-form""#), "{html}");
    let post = format!("{page}/lines");
    let qty = format!("qty-{first}");
    let price = format!("cost-{first}");

    // A line without its quantity: refused beside it, nothing saved.
    let (status, html, _) = console
        .post(&post, &[(qty.as_str(), ""), (price.as_str(), "120")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(
        text_of(&html, &format!("qty-{first}-error")).is_some(),
        "{html}"
    );
    // The same medicine added again: refused beside the add box.
    let (status, html, _) = console
        .post(
            &post,
            &[
                (qty.as_str(), "50"),
                ("add", "Metformin"),
                ("add_quantity", "5"),
                ("add_cost", "100"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "add-error").is_some(), "{html}");

    // Changed and a line added by name.
    let (status, html, headers) = console
        .post(
            &post,
            &[
                (qty.as_str(), "60"),
                (price.as_str(), "110"),
                ("add", "zinc"),
                ("add_quantity", "30"),
                ("add_cost", "15.5"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    assert!(headers[LOCATION].to_str().unwrap().contains("done=edited"));
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    let lines = o["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{o}");
    assert_eq!(lines[0]["quantity_ordered"], 60);
    assert_eq!(cost(&lines[0]["unit_cost"]), 110.0);
    assert_eq!(lines[1]["medicine_name"], "Zinc sulphate 20mg");
    assert_eq!(lines[1]["quantity_ordered"], 30);
    // The first line removed.
    let kept = lines[1]["id"].as_str().unwrap().to_owned();
    let (qty_first, remove_first) = (
        format!("qty-{}", lines[0]["id"].as_str().unwrap()),
        format!("remove-{}", lines[0]["id"].as_str().unwrap()),
    );
    let qty_kept = format!("qty-{kept}");
    let (status, html, _) = console
        .post(
            &post,
            &[
                (qty_first.as_str(), "60"),
                (remove_first.as_str(), "on"),
                (qty_kept.as_str(), "30"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    assert_eq!(o["lines"].as_array().unwrap().len(), 1, "{o}");
    assert_eq!(o["lines"][0]["medicine_name"], "Zinc sulphate 20mg");
    // A replaced order's lines are new lines.
    let qty_kept = format!("qty-{}", o["lines"][0]["id"].as_str().unwrap());

    // Once submitted the lines are no longer edited.
    let (status, _) = app
        .post(&format!("/purchase-orders/{oid}/submit"), &buyer, json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, html, _) = console.get(&page).await;
    assert!(!html.contains(r#"id="lines-form""#));
    let (status, html, _) = console.post(&post, &[(qty_kept.as_str(), "1")]).await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(text_of(&html, "page-error").is_some(), "{html}");
    // Neither a cashier nor an auditor edits an order.
    for role in [Role::Cashier, Role::Auditor] {
        let (_, other) = Console::of(&app, a, role).await;
        let (status, _, _) = other.post(&post, &[(qty_kept.as_str(), "1")]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role:?}");
    }
}

#[tokio::test]
async fn a_box_scanned_fills_the_delivery_and_its_freight_is_posted() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, buyer) = app.signed_in(a, Role::InventoryManager).await;
    let (_, manager) = app.signed_in(a, Role::BranchManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let code = gtin("0614141000004");
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin 500mg", "selling_price": 1200, "gtin": code}),
        )
        .await;
    let (status, order) = app
        .post(
            "/purchase-orders",
            &buyer,
            json!({"supplier_id": supplier, "lines": [
                {"medicine_id": m["id"], "quantity": 10, "unit_cost": "500"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{order}");
    let oid = order["id"].as_str().unwrap().to_owned();
    let line = order["lines"][0]["id"].as_str().unwrap().to_owned();
    for (mv, token) in [("submit", &buyer), ("approve", &manager), ("send", &buyer)] {
        let (status, body) = app
            .post(&format!("/purchase-orders/{oid}/{mv}"), token, json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{mv}: {body}");
    }
    let (_, console) = Console::of(&app, a, Role::InventoryManager).await;
    let post = format!("/console/purchase-orders/{oid}/receive");
    let scanned = format!("(01){code}(17)311231(10)AMX-77");

    // A code that cannot be read: refused beside the scan box.
    let (status, html, _) = console
        .post(&post, &[("act", "scan"), ("scan", "(01)123")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "scan-error").is_some(), "{html}");
    // Two boxes scanned: batch and expiry filled, two accepted.
    let (status, html, _) = console
        .post(
            &post,
            &[
                ("act", "scan"),
                ("scan", &scanned),
                ("delivery_reference", "DN-1"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains(&format!(
            r#"id="batch-{line}" name="batch-{line}" value="AMX-77""#
        )),
        "{html}"
    );
    assert!(html.contains(r#"value="2031-12-31""#), "{html}");
    let received = format!("received-{line}");
    let batch = format!("batch-{line}");
    let expiry = format!("expiry-{line}");
    let (status, html, _) = console
        .post(
            &post,
            &[
                ("act", "scan"),
                ("scan", &scanned),
                ("delivery_reference", "DN-1"),
                (batch.as_str(), "AMX-77"),
                (expiry.as_str(), "2031-12-31"),
                (received.as_str(), "1"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(&format!(r#"id="{received}" name="{received}" type="number" min="0" step="1" inputmode="numeric" value="2""#)), "{html}");
    assert!(
        text_of(&html, "notice-ok").unwrap().contains("2 accepted"),
        "{html}"
    );

    // A charge that is not an amount: beside it; then posted with freight.
    let mut form = vec![
        ("act", "post"),
        ("delivery_reference", "DN-1"),
        (batch.as_str(), "AMX-77"),
        (expiry.as_str(), "2031-12-31"),
        (received.as_str(), "2"),
        ("freight", "-3"),
    ];
    let (status, html, _) = console.post(&post, &form).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "charge-freight-error").is_some(), "{html}");
    form.pop();
    form.push(("freight", "40"));
    let (status, html, _) = console.post(&post, &form).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, notes) = app
        .get(&format!("/goods-received?purchase_order_id={oid}"), &admin)
        .await;
    let note = &notes["items"][0];
    assert_eq!(note["status"], "posted", "{notes}");
    assert_eq!(note["charges_total"], "40.00");
    assert_eq!(note["lines"][0]["batch_number"], "AMX-77");
    assert_eq!(note["lines"][0]["expiry_date"], "2031-12-31");
    assert_eq!(note["lines"][0]["quantity_received"], 2);
    // The freight is in the batch's cost: (2 × 500 + 40) / 2.
    assert_eq!(cost(&note["lines"][0]["landed_unit_cost"]), 520.0);
}
