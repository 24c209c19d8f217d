//! The counter in the console: a sale made at the browser is the API's
//! sale (same total, same invoice number), made through the same rules
//! (a cash session, a customer for a sale on account, the stock there
//! is), refused in words beside the field, and kept to the seller's
//! branch and role.

use fantoccini::Locator;
use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};
use crate::console::{stocked, text_of, Console};
use crate::console_browser::Browser;

/// A GTIN-14 with its check digit, from 13 digits.
fn gtin(body13: &str) -> String {
    let d = domain::gs1::check_digit(body13.as_bytes()).unwrap();
    format!("{body13}{}", d as char)
}

#[tokio::test]
async fn a_sale_at_the_counter_is_the_apis_sale() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = stocked(&app, &admin, a, "Paracetamol 500mg", 1500).await;
    let id = m["id"].as_str().unwrap().to_owned();
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;

    // No cash session yet: the page says so and a sale is refused in words.
    let (status, html, _) = cashier.get("/console/counter").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("No cash session is open"), "{html}");
    let line = [
        ("line-0-medicine", id.as_str()),
        ("line-0-quantity", "2"),
        ("payment_method", "cash"),
    ];
    let mut sell = line.to_vec();
    sell.push(("op", "sell"));
    let (status, html, _) = cashier.post("/console/counter", &sell).await;
    assert_eq!(status, StatusCode::CONFLICT, "{html}");
    assert!(text_of(&html, "page-error")
        .unwrap()
        .contains("open one before selling"));
    let (status, html, headers) = cashier
        .post("/console/counter/session", &[("opening_float", "50000")])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    assert!(headers[LOCATION].to_str().unwrap().contains("done=session"));

    // Words find the medicine; the line comes back in the form.
    let (status, html, _) = cashier
        .post(
            "/console/counter",
            &[("code", "paracet"), ("quantity", "2"), ("op", "add")],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(&format!(r#"name="line-0-medicine" value="{id}""#)));
    assert_eq!(text_of(&html, "counter-estimate").unwrap(), "3,000.00");
    // Nothing matches: said beside the scan box.
    let (status, html, _) = cashier
        .post("/console/counter", &[("code", "zzzz"), ("op", "add")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text_of(&html, "code-error").unwrap().contains("zzzz"));

    // On account without a customer: beside the customer field.
    let mut credit = vec![
        ("line-0-medicine", id.as_str()),
        ("line-0-quantity", "2"),
        ("payment_method", "credit"),
        ("op", "sell"),
    ];
    let (status, html, _) = cashier.post("/console/counter", &credit).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(text_of(&html, "customer-error").is_some(), "{html}");
    assert!(!html.contains("validation_failed"));
    // More than the shelf holds: refused, nothing sold.
    credit[1] = ("line-0-quantity", "5000");
    credit[2] = ("payment_method", "cash");
    let (status, html, _) = cashier.post("/console/counter", &credit).await;
    assert!(status.is_client_error(), "{status} {html}");
    assert!(html.contains("id=\"page-error\"") || html.contains("id=\"line-0-error\""));
    let (_, list) = app.get("/sales", &admin).await;
    assert_eq!(list["total"], 0);

    // Sold: the receipt, and the API's sale with its total and number.
    sell.push(("client_mutation_id", "counter-test-1"));
    let (status, html, headers) = cashier.post("/console/counter", &sell).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let to = headers[LOCATION].to_str().unwrap().to_owned();
    let sale_id = to.rsplit('/').next().unwrap().to_owned();
    let (status, receipt, _) = cashier.get(&to).await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(text_of(&receipt, "receipt-total").unwrap(), "3,000.00");
    let (status, sale) = app.get(&format!("/sales/{sale_id}"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{sale}");
    assert_eq!(sale["total"], "3000.00");
    assert_eq!(sale["payment_method"], "cash");
    assert_eq!(
        text_of(&receipt, "receipt-number").unwrap(),
        sale["invoice_number"].as_str().unwrap()
    );
    let fiscal = text_of(&receipt, "receipt-fiscal-status").unwrap();
    assert!(
        fiscal == "Fiscal document pending" || receipt.contains("receipt-fdn"),
        "{fiscal}"
    );
    // The same form again (a double click) is the same sale.
    let (status, _, headers) = cashier.post("/console/counter", &sell).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[LOCATION].to_str().unwrap(), to);
    let (_, list) = app.get("/sales", &admin).await;
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn the_counter_keeps_to_the_sellers_branch_and_role() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let b = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = stocked(&app, &admin, b, "Ibuprofen 200mg", 800).await;
    let (_, other) = app.signed_in(b, Role::Cashier).await;
    let (s, _) = app
        .post("/sessions/open", &other, json!({"opening_float": "0"}))
        .await;
    assert_eq!(s, StatusCode::OK);
    let sale = crate::console::sell(&app, &other, &m, 1, "cash").await;
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    // Another branch: not by the form, not its receipt.
    let b_text = b.to_string();
    let (status, _, _) = cashier
        .get(&format!("/console/counter?branch_id={b_text}"))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cashier
        .post(
            "/console/counter",
            &[
                ("branch_id", b_text.as_str()),
                ("line-0-medicine", m["id"].as_str().unwrap()),
                ("line-0-quantity", "1"),
                ("op", "sell"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cashier
        .get(&format!(
            "/console/counter/receipts/{}",
            sale["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // An auditor and a stock keeper do not sell: no counter, no menu entry.
    for role in [Role::Auditor, Role::InventoryManager] {
        let (_, c) = Console::of(&app, a, role).await;
        let (status, _, _) = c.get("/console/counter").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role:?}");
        let (_, html, _) = c.get("/console/dashboard").await;
        assert!(!html.contains(r#"href="/console/counter""#), "{role:?}");
    }
    // Without its form token nothing is sold.
    let (status, _, _) = cashier
        .post_raw("/console/counter", &[("op", "sell")])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_scanner_and_the_keyboard_sell_at_the_counter_and_the_api_reads_the_sale() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let code = gtin("0614141000004");
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin 500mg", "selling_price": 1200, "gtin": code}),
        )
        .await;
    app.receive(&admin, &m["id"], a, 100, "2031-12-31").await;
    stocked(&app, &admin, a, "Cetirizine 10mg", 500).await;
    let user = app.user(a, Role::Cashier).await;
    b.c().set_window_size(1280, 1400).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/counter"]"#).await;
    b.see("h1", "Counter").await;
    b.click("#open-session").await;
    b.see("#notice-ok", "The cash session is open: you can sell.")
        .await;
    // The scanner types into the focused box and presses Enter, twice.
    for _ in 0..2 {
        let focused = b.c().active_element().await.unwrap();
        assert_eq!(focused.attr("id").await.unwrap().as_deref(), Some("code"));
        focused.send_keys(&format!("{code}\n")).await.unwrap();
        b.see_containing("#counter-lines tbody", "Amoxicillin 500mg")
            .await;
    }
    assert_eq!(
        b.c()
            .find(Locator::Id("line-0-quantity"))
            .await
            .unwrap()
            .prop("value")
            .await
            .unwrap()
            .as_deref(),
        Some("2")
    );
    // Words, then Enter.
    let focused = b.c().active_element().await.unwrap();
    focused.send_keys("cetiri\n").await.unwrap();
    b.see_containing("#counter-lines tbody", "Cetirizine 10mg")
        .await;
    b.see("#counter-estimate", "2,900.00").await;
    b.screenshot("counter").await;
    b.click("#sell").await;
    b.see("h1", "Sale made").await;
    b.screenshot("counter-receipt").await;
    let total = b.text("#receipt-total").await;
    let number = b.text("#receipt-number").await;
    let id = b.path().await.rsplit('/').next().unwrap().to_owned();
    let (status, sale) = app.get(&format!("/sales/{id}"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{sale}");
    assert_eq!(total, "2,900.00");
    assert_eq!(sale["total"], "2900.00");
    assert_eq!(sale["invoice_number"].as_str().unwrap(), number);
    assert_eq!(sale["items"].as_array().unwrap().len(), 2);
    b.finish().await;
}
