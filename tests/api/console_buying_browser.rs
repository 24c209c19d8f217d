//! The buying and stock pages done by hand in headless Chromium: an
//! invoice recorded and a batch sent back on a supplier's page, a draft's
//! lines edited and a delivery filled by scanning boxes, each as the API
//! then reads it; and the pictures of the count, transfer and credit-terms
//! pages for the docs.

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};
use crate::console::stocked;
use crate::console_browser::Browser;

/// A GTIN-14 with its check digit, from 13 digits.
fn gtin(body13: &str) -> String {
    let d = domain::gs1::check_digit(body13.as_bytes()).unwrap();
    format!("{body13}{}", d as char)
}

/// Types `text` into the field with `id`, replacing what it held.
async fn fill(b: &Browser, id: &str, text: &str) {
    let e = b
        .c()
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"));
    e.clear().await.unwrap();
    e.send_keys(text).await.unwrap();
}

/// Chooses the option `value` of the select with `id`.
async fn choose(b: &Browser, id: &str, value: &str) {
    b.c()
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"))
        .select_by_value(value)
        .await
        .unwrap();
}

/// What the field with `id` holds now.
async fn value(b: &Browser, id: &str) -> String {
    b.c()
        .find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("#{id}: {e}"))
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default()
}

#[tokio::test]
async fn an_invoice_recorded_and_a_batch_sent_back_on_a_suppliers_page() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, clerk) = app.signed_in(a, Role::InventoryManager).await;
    let supplier = app.supplier("Abacus Pharma").await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Ciprofloxacin 500mg", "selling_price": 4}),
        )
        .await;
    let body = json!({"supplier_id": supplier, "delivery_reference": "DN-5",
        "lines": [{"medicine_id": m["id"], "batch_number": "CIP-1",
                   "expiry_date": "2031-12-31", "quantity_received": 10, "unit_cost": "2.00"}]});
    let (status, note) = app.post("/goods-received", &clerk, body).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let path = format!("/goods-received/{}/post", note["id"].as_str().unwrap());
    let (status, note) = app.post(&path, &clerk, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{note}");
    let line = note["lines"][0]["id"].as_str().unwrap().to_owned();
    let batch = note["lines"][0]["batch_id"].as_str().unwrap().to_owned();

    let user = app.user(a, Role::BranchManager).await;
    b.c().set_window_size(1280, 2600).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/purchase-orders"]"#).await;
    b.click(r#"a[href="/console/suppliers"]"#).await;
    b.click(&format!(r#"a[href="/console/suppliers/{supplier}"]"#))
        .await;
    b.see("h1", "Abacus Pharma").await;
    fill(&b, "inv-invoice_no", "AB-7").await;
    fill(&b, "inv-total_amount", "24").await;
    fill(&b, &format!("bill-{line}"), "10").await;
    fill(&b, "inv-freight", "3").await;
    b.screenshot("supplier-invoice-new").await;
    // A total the lines and charges do not come to: said beside it.
    b.click("#record-invoice-button").await;
    b.see_containing("#inv-total_amount-error", "23").await;
    fill(&b, "inv-total_amount", "23").await;
    b.click("#record-invoice-button").await;
    b.see_containing("#notice-ok", "The invoice was recorded")
        .await;
    let (_, list) = app
        .get(
            &format!("/supplier-finance/invoices?supplier_id={supplier}"),
            &admin,
        )
        .await;
    let inv = &list["items"][0];
    assert_eq!(inv["invoice_no"], "AB-7", "{list}");
    assert_eq!(inv["total_amount"], "23.00");
    let status = inv["match_status"].as_str().unwrap().replace('_', " ");
    b.see(&format!("#match-{}", inv["id"].as_str().unwrap()), status)
        .await;
    b.screenshot("supplier").await;

    // Four units of the batch go back as damaged.
    choose(&b, "ret-batch_id", &batch).await;
    fill(&b, "ret-quantity", "4").await;
    choose(&b, "ret-reason", "damaged").await;
    fill(&b, "ret-notes", "Crushed cartons").await;
    b.click("#send-back-button").await;
    b.see_containing("#notice-ok", "sent back").await;
    let (_, returns) = app
        .get(&format!("/supplier-returns?supplier_id={supplier}"), &admin)
        .await;
    let r = &returns["items"][0];
    assert_eq!(r["lines"][0]["quantity"], 4, "{returns}");
    b.see_containing(
        "#supplier-returns tbody",
        r["debit_note_number"].as_str().unwrap(),
    )
    .await;
    b.screenshot("supplier-returns").await;
    b.finish().await;
}

#[tokio::test]
async fn a_draft_edited_and_a_delivery_scanned_box_by_box() {
    let Some(b) = Browser::start().await else {
        return;
    };
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
                {"medicine_id": m["id"], "quantity": 10, "unit_cost": "500"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{order}");
    let oid = order["id"].as_str().unwrap().to_owned();
    let line = order["lines"][0]["id"].as_str().unwrap().to_owned();

    let user = app.user(a, Role::InventoryManager).await;
    b.c().set_window_size(1280, 1800).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.goto(&app, &format!("/console/purchase-orders/{oid}"))
        .await;
    fill(&b, &format!("qty-{line}"), "12").await;
    fill(&b, "add", "zinc").await;
    fill(&b, "add_quantity", "30").await;
    fill(&b, "add_cost", "15").await;
    b.screenshot("order-lines").await;
    b.click("#save-lines").await;
    b.see("#notice-ok", "The order's lines were saved.").await;
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    assert_eq!(o["lines"][0]["quantity_ordered"], 12, "{o}");
    assert_eq!(o["lines"][1]["medicine_name"], "Zinc sulphate 20mg");

    for (mv, token) in [("submit", &buyer), ("approve", &manager), ("send", &buyer)] {
        let (status, body) = app
            .post(&format!("/purchase-orders/{oid}/{mv}"), token, json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{mv}: {body}");
    }
    // A replaced order's lines are new lines.
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    let line = o["lines"][0]["id"].as_str().unwrap().to_owned();
    b.goto(&app, &format!("/console/purchase-orders/{oid}"))
        .await;
    fill(&b, "delivery_reference", "DN-9").await;
    // The scanner types each box's code into the scan box and presses Enter.
    let scanned = format!("]d201{code}1731123110AMX-77");
    b.click("#scan").await;
    for n in 1..=2 {
        let scan = b.c().find(Locator::Id("scan")).await.unwrap();
        scan.send_keys(&format!("{scanned}\n")).await.unwrap();
        b.see_containing("#notice-ok", &format!("{n} accepted"))
            .await;
    }
    assert_eq!(value(&b, &format!("batch-{line}")).await, "AMX-77");
    assert_eq!(value(&b, &format!("expiry-{line}")).await, "2031-12-31");
    assert_eq!(value(&b, &format!("received-{line}")).await, "2");
    assert_eq!(value(&b, "delivery_reference").await, "DN-9");
    fill(&b, "charge-freight", "40").await;
    b.screenshot("receive-scan").await;
    b.click("#post-delivery").await;
    b.see(
        "#notice-ok",
        "The delivery was received: its batches are in stock.",
    )
    .await;
    let (_, notes) = app
        .get(&format!("/goods-received?purchase_order_id={oid}"), &admin)
        .await;
    let note = &notes["items"][0];
    assert_eq!(note["charges_total"], "40.00", "{notes}");
    assert_eq!(note["lines"][0]["quantity_received"], 2);
    assert_eq!(note["lines"][0]["batch_number"], "AMX-77");
    b.finish().await;
}

#[tokio::test]
async fn the_count_transfer_and_credit_terms_pages_pictured() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let e = app.branch("ENT").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    stocked(&app, &admin, a, "Paracetamol 500mg", 1500).await;
    let (status, c) = app
        .post(
            "/customers",
            &admin,
            json!({"name": "Sarah Namusoke", "phone": "0700000001"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let user = app.user(a, Role::BranchManager).await;
    b.c().set_window_size(1280, 1400).await.unwrap();
    b.sign_in(&app, &user.email).await;

    b.goto(&app, "/console/stock/count").await;
    let code = b.c().find(Locator::Id("code")).await.unwrap();
    code.send_keys("paracet\n").await.unwrap();
    b.see_containing("#count-lines tbody", "Paracetamol 500mg")
        .await;
    fill(&b, "line-0-counted", "95").await;
    b.click("#check-count").await;
    b.see_containing("#variance-0", "-").await;
    b.screenshot("stock-count").await;

    b.goto(&app, "/console/transfers").await;
    fill(&b, "medicine", "paracet").await;
    choose(&b, "to_branch_id", &e.to_string()).await;
    fill(&b, "qty", "5").await;
    b.click("#send-transfer").await;
    b.see_containing("#transfers tbody", "Paracetamol 500mg")
        .await;
    b.screenshot("transfers").await;

    b.goto(
        &app,
        &format!("/console/customers/{}", c["id"].as_str().unwrap()),
    )
    .await;
    fill(&b, "credit_limit", "50000").await;
    b.screenshot("credit-terms").await;
    b.finish().await;
}
