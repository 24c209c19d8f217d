//! Suppliers in the console: the directory, a supplier's orders, receipts,
//! invoices and balance, an invoice on hold shown with the difference that
//! holds it, released and paid on screen as the API then reads, and none
//! of it for a cashier, even by address.

use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};
use crate::console::{text_of, Console};

fn in_a_year() -> String {
    (chrono::Utc::now().date_naive() + chrono::Duration::days(365)).to_string()
}

#[tokio::test]
async fn an_invoice_on_hold_is_shown_released_and_paid_on_screen() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, clerk) = app.signed_in(a, Role::InventoryManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin 500mg", "selling_price": 3}),
        )
        .await;
    let body = json!({"supplier_id": supplier, "delivery_reference": "DN-77",
        "lines": [{"medicine_id": m["id"], "batch_number": "B-1",
                   "expiry_date": in_a_year(), "quantity_received": 10, "unit_cost": "2.00"}]});
    let (status, note) = app.post("/goods-received", &clerk, body).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let path = format!("/goods-received/{}/post", note["id"].as_str().unwrap());
    let (status, note) = app.post(&path, &clerk, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{note}");
    // Billed 5 % over the receipt's price: on hold.
    let body = json!({"supplier_id": supplier, "total_amount": "10.50", "invoice_no": "INV-9",
        "lines": [{"goods_received_line_id": note["lines"][0]["id"], "quantity": 5, "unit_cost": "2.10"}]});
    let (status, inv) = app.post("/supplier-finance/invoices", &clerk, body).await;
    assert_eq!(status, StatusCode::CREATED, "{inv}");
    assert_eq!(inv["match_status"], "on_hold");
    let inv_id = inv["id"].as_str().unwrap().to_owned();

    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (status, html, _) = manager.get("/console/purchase-orders").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"href="/console/suppliers""#));
    let (status, html, _) = manager.get("/console/suppliers?search=quality").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(&format!(r#"href="/console/suppliers/{supplier}""#)));
    let page = format!("/console/suppliers/{supplier}");
    let (status, html, _) = manager.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert_eq!(
        text_of(&html, &format!("match-{inv_id}")).unwrap(),
        "on hold"
    );
    assert!(html.contains(r#"<tr class="highlight"><td>"#), "{html}");
    assert!(html.contains("0.10 (5"), "{html}");
    assert!(html.contains("DN-77"));
    assert_eq!(text_of(&html, "supplier-balance").unwrap(), "10.50");

    // Paid while on hold: refused in words beside the invoice.
    let pay = format!("/console/supplier-invoices/{inv_id}/payments");
    let (status, html, _) = manager
        .post(&pay, &[("amount", "5"), ("method", "cash")])
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(text_of(&html, "invoice-error").is_some(), "{html}");
    assert!(!html.contains("invoice_on_hold"));
    // Released without a reason: refused; with one: released.
    let release = format!("/console/supplier-invoices/{inv_id}/release");
    let (status, html, _) = manager.post(&release, &[("reason", " ")]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "invoice-error").is_some(), "{html}");
    let (status, html, headers) = manager
        .post(&release, &[("reason", "Price rise agreed by phone")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    assert!(headers[LOCATION]
        .to_str()
        .unwrap()
        .contains("done=released"));
    let (status, html, _) = manager
        .post(&pay, &[("amount", "5"), ("method", "bank_transfer")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, list) = app
        .get(
            &format!("/supplier-finance/invoices?supplier_id={supplier}"),
            &admin,
        )
        .await;
    let read = &list["items"][0];
    assert_eq!(read["match_status"], "released", "{list}");
    assert_eq!(read["paid_amount"], "5.00");
    let (_, html, _) = manager.get(&page).await;
    assert_eq!(text_of(&html, "supplier-balance").unwrap(), "5.50");

    // A cashier reaches none of it.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    for path in ["/console/suppliers", page.as_str()] {
        let (status, _, _) = cashier.get(path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
    }
    let (status, _, _) = cashier.post(&pay, &[("amount", "1")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

/// A posted receipt of `units` of a new medicine at 2.00, by `token`:
/// the note as the API answers it.
async fn received(
    app: &TestApp,
    admin: &str,
    token: &str,
    supplier: uuid::Uuid,
    units: i64,
) -> serde_json::Value {
    let m = app
        .medicine(
            admin,
            json!({"name": "Ciprofloxacin 500mg", "selling_price": 4}),
        )
        .await;
    let body = json!({"supplier_id": supplier, "delivery_reference": "DN-5",
        "lines": [{"medicine_id": m["id"], "batch_number": "CIP-1",
                   "expiry_date": in_a_year(), "quantity_received": units, "unit_cost": "2.00"}]});
    let (status, note) = app.post("/goods-received", token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let path = format!("/goods-received/{}/post", note["id"].as_str().unwrap());
    let (status, note) = app.post(&path, token, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{note}");
    note
}

#[tokio::test]
async fn an_invoice_recorded_on_screen_is_the_apis_with_its_match_status() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, clerk) = app.signed_in(a, Role::InventoryManager).await;
    let supplier = app.supplier("Abacus Pharma").await;
    let note = received(&app, &admin, &clerk, supplier, 10).await;
    let line = note["lines"][0]["id"].as_str().unwrap().to_owned();
    let (_, manager) = Console::of(&app, a, Role::InventoryManager).await;
    let page = format!("/console/suppliers/{supplier}");
    let (status, html, _) = manager.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(&format!(r#"id="bill-{line}""#)), "{html}");
    let post = format!("{page}/invoices");
    let bill = format!("bill-{line}");

    // A total the lines and charges do not come to: refused beside the total.
    let (status, html, _) = manager
        .post(
            &post,
            &[
                ("invoice_no", "AB-1"),
                ("total_amount", "25"),
                (bill.as_str(), "10"),
                ("freight", "3"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "inv-total_amount-error").is_some(), "{html}");
    assert!(html.contains(r#"value="AB-1""#), "{html}");
    // More units than were received: refused beside the line.
    let (status, html, _) = manager
        .post(&post, &[("total_amount", "22"), (bill.as_str(), "11")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(
        text_of(&html, &format!("bill-{line}-error")).is_some(),
        "{html}"
    );

    // Ten at the received price and freight: matched.
    let (status, html, headers) = manager
        .post(
            &post,
            &[
                ("invoice_no", "AB-1"),
                ("due_date", "2030-01-31"),
                ("total_amount", "23"),
                (bill.as_str(), "10"),
                ("freight", "3"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    assert!(headers[LOCATION]
        .to_str()
        .unwrap()
        .contains("done=recorded"));
    let (_, list) = app
        .get(
            &format!("/supplier-finance/invoices?supplier_id={supplier}"),
            &admin,
        )
        .await;
    let inv = &list["items"][0];
    assert_eq!(inv["invoice_no"], "AB-1", "{list}");
    assert_eq!(inv["total_amount"], "23.00");
    assert_eq!(inv["charges_total"], "3.00");
    let inv_id = inv["id"].as_str().unwrap();
    let (_, html, _) = manager.get(&page).await;
    assert_eq!(
        text_of(&html, &format!("match-{inv_id}")).unwrap(),
        inv["match_status"].as_str().unwrap().replace('_', " ")
    );
    assert_ne!(inv["match_status"], "on_hold", "{inv}");
    // Billed in full: the line is no longer offered.
    assert!(!html.contains(&format!(r#"id="bill-{line}""#)), "{html}");

    // A cashier cannot record one, even by address.
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, _, _) = cashier.post(&post, &[("total_amount", "1")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_batch_sent_back_on_screen_makes_the_apis_return_and_debit_note() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, clerk) = app.signed_in(a, Role::InventoryManager).await;
    let supplier = app.supplier("Abacus Pharma").await;
    let note = received(&app, &admin, &clerk, supplier, 10).await;
    let batch = note["lines"][0]["batch_id"].as_str().unwrap().to_owned();
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let page = format!("/console/suppliers/{supplier}");
    let (status, html, _) = manager.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains(&format!(r#"<option value="{batch}">"#)),
        "{html}"
    );
    let post = format!("{page}/returns");

    // More than the batch holds: refused beside the units, nothing moves.
    let (status, html, _) = manager
        .post(
            &post,
            &[
                ("batch_id", batch.as_str()),
                ("quantity", "11"),
                ("reason", "damaged"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "ret-quantity-error").is_some(), "{html}");
    assert!(!html.contains("validation_failed"));
    // No batch chosen: beside the batch.
    let (status, html, _) = manager
        .post(&post, &[("quantity", "1"), ("reason", "damaged")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "ret-batch_id-error").is_some(), "{html}");

    let (status, html, headers) = manager
        .post(
            &post,
            &[
                ("batch_id", batch.as_str()),
                ("quantity", "4"),
                ("reason", "damaged"),
                ("notes", "Crushed cartons"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    assert!(headers[LOCATION]
        .to_str()
        .unwrap()
        .contains("done=returned"));
    let (_, list) = app
        .get(&format!("/supplier-returns?supplier_id={supplier}"), &admin)
        .await;
    let r = &list["items"][0];
    assert_eq!(r["reason"], "damaged", "{list}");
    assert_eq!(r["lines"][0]["quantity"], 4);
    assert_eq!(r["total_value"], "8.00");
    let number = r["debit_note_number"].as_str().unwrap();
    let (_, html, _) = manager.get(&page).await;
    let rows = crate::console::table_rows(&html, "supplier-returns");
    assert_eq!(rows[0][0], number, "{rows:?}");
    assert_eq!(rows[0][4], "8.00");

    // An auditor reads the returns but gets no form; a cashier nothing.
    let (_, auditor) = Console::of(&app, a, Role::Auditor).await;
    let (status, html, _) = auditor.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(number));
    assert!(!html.contains(r#"id="return-form""#));
    let (status, _, _) = auditor
        .post(
            &post,
            &[
                ("batch_id", batch.as_str()),
                ("quantity", "1"),
                ("reason", "damaged"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, _, _) = cashier.post(&post, &[("quantity", "1")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_admin_picks_the_branch_of_an_invoice_that_bills_no_line() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("JJA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let supplier = app.supplier("Abacus Pharma").await;
    let page = format!("/console/suppliers/{supplier}");
    let post = format!("{page}/invoices");
    let (_, screen) = Console::of(&app, a, Role::Admin).await;
    let (status, html, _) = screen.get(&page).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(r#"id="inv-branch_id""#), "{html}");
    assert!(html.contains(&format!(r#"value="{b}""#)), "{html}");

    // Not a branch: refused beside the picker, nothing recorded.
    let (status, html, _) = screen
        .post(&post, &[("total_amount", "40"), ("branch_id", "nowhere")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "inv-branch_id-error").is_some(), "{html}");

    // An unmatched invoice for the other branch goes there.
    let b_id = b.to_string();
    let (status, html, _) = screen
        .post(
            &post,
            &[
                ("invoice_no", "AB-9"),
                ("total_amount", "40"),
                ("branch_id", b_id.as_str()),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, list) = app
        .get(
            &format!("/supplier-finance/invoices?supplier_id={supplier}"),
            &admin,
        )
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["items"][0]["invoice_no"], "AB-9", "{list}");
    assert_eq!(list["items"][0]["branch_id"], b_id, "{list}");

    // Staff of one branch get no picker: their own branch is implied.
    let (_, manager) = Console::of(&app, a, Role::InventoryManager).await;
    let (_, html, _) = manager.get(&page).await;
    assert!(!html.contains(r#"id="inv-branch_id""#), "{html}");
}
