//! The console's pages for a branch's daily work (catalogue, sales and
//! returns, stock, buying, the fiscal queue, customers and suppliers),
//! in headless Chromium where the job is done by hand and with the
//! browser stand-in of `console.rs` for the rules: each page's work is
//! what the API then reads.
//!
//! Over 600 lines: one browser test per page group and its rule test,
//! sharing the fixtures at the top.

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::{Role, TestApp};
use crate::console::{sell, stocked, text_of, Console};
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

#[tokio::test]
async fn a_medicine_created_in_the_console_is_what_the_api_reads() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    stocked(&app, &admin, a, "Paracetamol 500mg", 1500).await;
    let user = app.user(a, Role::InventoryManager).await;
    b.c().set_window_size(1280, 1500).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/medicines"]"#).await;
    b.see("h1", "Catalogue").await;
    b.click("#new-medicine").await;
    let unit_gtin = gtin("0614141000004");
    fill(&b, "name", "Amoxicillin 500mg").await;
    fill(&b, "generic_name", "amoxicillin").await;
    fill(&b, "gtin", &unit_gtin).await;
    fill(&b, "category", "Antibiotics").await;
    fill(&b, "form", "capsule").await;
    fill(&b, "strength", "500mg").await;
    fill(&b, "selling_price", "1200").await;
    fill(&b, "max_public_price", "1000").await;
    b.click("#requires_prescription").await;
    b.click("#save-medicine").await;
    // Refused beside the field, in words; nothing saved.
    b.see_containing("#selling_price-error", "maximum public price")
        .await;
    assert!(!b.source().await.contains("validation_failed"));
    let (_, list) = app.get("/medicines?search=Amoxicillin", &admin).await;
    assert_eq!(list["total"], 0);
    b.screenshot("medicine-refused").await;
    fill(&b, "selling_price", "950.50").await;
    b.click("#save-medicine").await;
    b.see("#notice-ok", "The medicine was added to the catalogue.")
        .await;
    // A pack of 10 with its own GTIN.
    let box_gtin = gtin("1614141000004");
    fill(&b, "pack-name", "box").await;
    fill(&b, "pack-units", "10").await;
    fill(&b, "pack-gtin", &box_gtin).await;
    fill(&b, "pack-selling_price", "9000").await;
    b.click("#add-pack").await;
    b.see("#notice-ok", "The pack was added.").await;
    b.screenshot("medicine").await;
    let id = b.path().await.rsplit('/').next().unwrap().to_owned();

    let (status, m) = app.get(&format!("/medicines/{id}"), &admin).await;
    assert_eq!(status, StatusCode::OK, "{m}");
    assert_eq!(m["name"], "Amoxicillin 500mg");
    assert_eq!(m["generic_name"], "amoxicillin");
    assert_eq!(m["gtin"], json!(unit_gtin));
    assert_eq!(m["category"], "antibiotics");
    assert_eq!(m["selling_price"], "950.50");
    assert_eq!(m["max_public_price"], "1000.00");
    assert_eq!(m["requires_prescription"], true);
    assert_eq!(m["is_controlled"], false);
    assert_eq!(m["packs"][0]["units"], 10);
    assert_eq!(m["packs"][0]["gtin"], json!(box_gtin));
    assert_eq!(m["packs"][0]["selling_price"], "9000.00");

    // A scanner types a box's GS1 code into the search box.
    b.click(r#"a[href="/console/medicines"]"#).await;
    fill(&b, "search", &format!("(01){box_gtin}(10)LOT7(17)301231\n")).await;
    b.see_that("#scanned", "the medicine, its pack and its lot", |said| {
        said.contains("Amoxicillin 500mg") && said.contains("box of 10") && said.contains("LOT7")
    })
    .await;
    b.see("#medicines tbody tr td a", "Amoxicillin 500mg").await;
    // Searching by generic name finds it too.
    fill(&b, "search", "amoxi\n").await;
    b.see("#medicines tbody tr td a", "Amoxicillin 500mg").await;
    fill(&b, "search", "\n").await;
    b.screenshot("catalogue").await;

    // Edited in the console, read by the API.
    b.goto(&app, &format!("/console/medicines/{id}")).await;
    fill(&b, "strength", "250mg").await;
    b.click("#save-medicine").await;
    b.see("#notice-ok", "The medicine was saved.").await;
    let (_, m) = app.get(&format!("/medicines/{id}"), &admin).await;
    assert_eq!(m["strength"], "250mg");
    assert_eq!(m["selling_price"], "950.50");
    b.finish().await;
}

#[tokio::test]
async fn the_catalogue_pages_keep_the_apis_rules() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = stocked(&app, &admin, a, "Ibuprofen 200mg", 800).await;
    let id = m["id"].as_str().unwrap();
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    // A cashier reads but does not write the catalogue.
    let (status, html, _) = cashier.get("/console/medicines?search=ibup").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Ibuprofen 200mg"));
    assert!(!html.contains("Add a medicine"));
    let (status, _, _) = cashier.get("/console/medicines/new").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = cashier
        .post(
            "/console/medicines",
            &[("name", "Nope"), ("selling_price", "10")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, list) = app.get("/medicines?search=Nope", &admin).await;
    assert_eq!(list["total"], 0);
    // An unreadable code is named beside the search box.
    let (_, html, _) = cashier.get("/console/medicines?search=%5Dd2019999").await;
    assert!(text_of(&html, "search-error").is_some(), "{html}");
    // A manager deactivates: the API no longer reads it.
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (status, _, _) = manager
        .post(&format!("/console/medicines/{id}/deactivate"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _) = app.get(&format!("/medicines/{id}"), &admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Without the form token nothing is deactivated.
    let other = stocked(&app, &admin, a, "Cetirizine", 300).await;
    let oid = other["id"].as_str().unwrap();
    let (status, _, _) = manager
        .post_raw(&format!("/console/medicines/{oid}/deactivate"), &[])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app.get(&format!("/medicines/{oid}"), &admin).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_sale_found_by_its_invoice_number_is_returned_in_the_browser() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let m = stocked(&app, &admin, a, "Cetirizine 10mg", 1250).await;
    sell(&app, &cashier, &m, 1, "card").await;
    let sale = sell(&app, &cashier, &m, 3, "cash").await;
    let invoice = sale["invoice_number"].as_str().unwrap();
    let user = app.user(a, Role::Pharmacist).await;
    b.c().set_window_size(1280, 1400).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/sales"]"#).await;
    b.see("h1", "Sales").await;
    b.see_containing("#sales", invoice).await;
    b.screenshot("sales").await;
    // The number typed in lower case finds it.
    fill(&b, "invoice", &format!("{}\n", invoice.to_lowercase())).await;
    b.see("h1", format!("Sale {invoice}")).await;
    b.see("#sale-total", "3,750.00").await;
    // Nothing to return is refused in words, beside the form.
    fill(&b, "reason", "Wrong strength").await;
    b.click("#make-return").await;
    b.see_containing("#return-error", "at least one line").await;
    let line = sale["items"][0]["id"].as_str().unwrap();
    fill(&b, &format!("qty-{line}"), "1").await;
    fill(&b, "reason", "Wrong strength").await;
    b.click("#make-return").await;
    b.see(
        "#notice-ok",
        "The return was made and its credit note issued.",
    )
    .await;
    b.screenshot("sale").await;
    let (_, returns) = app
        .get(
            &format!("/sales/{}/returns", sale["id"].as_str().unwrap()),
            &admin,
        )
        .await;
    assert_eq!(returns["total"], 1, "{returns}");
    let note = &returns["items"][0];
    assert_eq!(note["status"], "issued");
    assert_eq!(note["total"], "1250.00");
    assert_eq!(note["refund_method"], "cash");
    assert_eq!(note["reason"], "Wrong strength");
    b.see_containing(
        "#sale-returns",
        note["credit_note_number"].as_str().unwrap(),
    )
    .await;
    // More than is left is refused and nothing more is returned (the
    // browser stops it at the field; a page left open in another tab
    // would not know the new limit).
    b.c()
        .execute(
            "document.querySelectorAll('#return-form input[type=number]').forEach(e => e.removeAttribute('max'));",
            vec![],
        )
        .await
        .unwrap();
    fill(&b, &format!("qty-{line}"), "3").await;
    fill(&b, "reason", "Again").await;
    b.click("#make-return").await;
    b.see_that("#return-error", "a refusal", |t| !t.trim().is_empty())
        .await;
    let (_, returns) = app
        .get(
            &format!("/sales/{}/returns", sale["id"].as_str().unwrap()),
            &admin,
        )
        .await;
    assert_eq!(returns["total"], 1);
    b.goto(&app, "/console/returns").await;
    b.see_containing(
        "#credit-notes",
        note["credit_note_number"].as_str().unwrap(),
    )
    .await;
    b.screenshot("returns").await;
    b.finish().await;
}

#[tokio::test]
async fn a_cashiers_return_waits_and_another_branchs_sale_is_out_of_reach() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let e = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier_a) = app.signed_in(a, Role::Cashier).await;
    let (_, cashier_e) = app.signed_in(e, Role::Cashier).await;
    let m = stocked(&app, &admin, a, "Loratadine", 900).await;
    app.receive(&admin, &m["id"], e, 20, "2031-12-31").await;
    let mine = sell(&app, &cashier_a, &m, 2, "cash").await;
    let theirs = sell(&app, &cashier_e, &m, 1, "cash").await;
    let (_, console) = Console::of(&app, a, Role::Cashier).await;
    let id = mine["id"].as_str().unwrap();
    let line = mine["items"][0]["id"].as_str().unwrap();
    let qty = format!("qty-{line}");
    let (status, html, _) = console
        .post(
            &format!("/console/sales/{id}/returns"),
            &[
                (qty.as_str(), "1"),
                ("reason", "Not needed"),
                ("refund_method", "cash"),
                ("restock", "on"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{html}");
    let (_, returns) = app.get(&format!("/sales/{id}/returns"), &admin).await;
    assert_eq!(returns["items"][0]["status"], "pending_approval");
    // Another branch's sale: not by its address, not by its number.
    let other = theirs["id"].as_str().unwrap();
    let (status, html, _) = console.get(&format!("/console/sales/{other}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!html.contains(theirs["invoice_number"].as_str().unwrap()));
    let number = theirs["invoice_number"].as_str().unwrap();
    let (status, html, _) = console
        .get(&format!("/console/sales?invoice={number}"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(text_of(&html, "invoice-error").is_some(), "{html}");
    let (status, _, _) = console
        .post(
            &format!("/console/sales/{other}/returns"),
            &[(qty.as_str(), "1"), ("reason", "x")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = console.get(&format!("/console/sales?branch_id={e}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A return without the form token is refused.
    let (status, _, _) = console
        .post_raw(
            &format!("/console/sales/{id}/returns"),
            &[(qty.as_str(), "1"), ("reason", "x")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, returns) = app.get(&format!("/sales/{id}/returns"), &admin).await;
    assert_eq!(returns["total"], 1);
}

/// The regulator status of a batch, as stored.
async fn batch_status(app: &TestApp, batch: &str) -> String {
    let client = app.pool.get().await.unwrap();
    let id = uuid::Uuid::parse_str(batch).unwrap();
    client
        .query_one("SELECT regulator_status FROM batches WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn stock_is_quarantined_released_and_written_off_in_the_browser() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amlodipine 5mg", "selling_price": 300}),
        )
        .await;
    let batch = app.receive(&admin, &m["id"], a, 100, "2031-12-31").await;
    let batch_id = batch["id"].as_str().unwrap().to_owned();
    let c = app
        .medicine(
            &admin,
            json!({"name": "Morphine 10mg", "selling_price": 900, "is_controlled": true}),
        )
        .await;
    let old = app.receive(&admin, &c["id"], a, 30, "2031-12-31").await;
    {
        let client = app.pool.get().await.unwrap();
        let id = uuid::Uuid::parse_str(old["id"].as_str().unwrap()).unwrap();
        client
            .execute(
                "UPDATE batches SET expiry_date = DATE '2024-01-31' WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap();
    }
    let witness = app.user(a, Role::Pharmacist).await;
    let user = app.user(a, Role::BranchManager).await;
    b.c().set_window_size(1280, 1300).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/stock"]"#).await;
    b.see("h1", "Stock").await;
    let row = format!("#batch-{batch_id}");
    b.see_containing(&row, "Amlodipine 5mg").await;
    b.screenshot("stock").await;
    b.click(&format!(r#"{row} button[aria-label^="Quarantine"]"#))
        .await;
    b.see_containing("#notice-ok", "quarantined").await;
    assert_eq!(batch_status(&app, &batch_id).await, "quarantined");
    // The quarantined view lists it; release brings it back.
    b.goto(&app, "/console/stock?view=quarantined").await;
    b.see_containing(&row, "quarantined").await;
    b.click(&format!(r#"{row} button[aria-label^="Release"]"#))
        .await;
    b.see_containing("#notice-ok", "released").await;
    assert_eq!(batch_status(&app, &batch_id).await, "active");
    // Five damaged units written off.
    b.goto(&app, "/console/stock").await;
    fill(&b, &format!("qty-{batch_id}"), "5").await;
    b.c()
        .find(Locator::Css("#reason option[value=damaged]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.click("#write-off-submit").await;
    b.see("#notice-ok", "The stock was written off.").await;
    let (_, med) = app
        .get(&format!("/medicines/{}", m["id"].as_str().unwrap()), &admin)
        .await;
    assert_eq!(med["stock_quantity"], 95);
    let (_, list) = app.get("/stock/write-offs", &admin).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["reason"], "damaged");
    // The expired list in one action: the controlled line needs a witness.
    b.goto(&app, "/console/stock?view=expired").await;
    b.see_containing("#batches", "Morphine 10mg").await;
    b.click("#write-off-expired").await;
    b.see_that(".field-error", "the witness rule", |t| {
        t.to_lowercase().contains("witness")
    })
    .await;
    let (_, expired) = app.get("/stock/expired", &admin).await;
    assert_eq!(
        expired["items"].as_array().map_or(0, Vec::len),
        1,
        "{expired}"
    );
    b.c()
        .find(Locator::Css(&format!(
            "#witness_user_id option[value='{}']",
            witness.id
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.click("#write-off-expired").await;
    b.see("#notice-ok", "The stock was written off.").await;
    let (_, list) = app.get("/stock/write-offs", &admin).await;
    assert_eq!(list["total"], 2);
    let (_, expired) = app.get("/stock/expired", &admin).await;
    assert_eq!(
        expired["items"].as_array().map_or(0, Vec::len),
        0,
        "{expired}"
    );
    b.finish().await;
}

#[tokio::test]
async fn a_cashier_sees_only_its_branchs_stock_and_changes_none() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let e = app.branch("EBB").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = stocked(&app, &admin, a, "Omeprazole", 500).await;
    let theirs = app.receive(&admin, &m["id"], e, 40, "2030-06-30").await;
    let (_, console) = Console::of(&app, a, Role::Cashier).await;
    let (status, html, _) = console.get("/console/stock").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Omeprazole"));
    assert!(!html.contains(theirs["batch_number"].as_str().unwrap()));
    assert!(!html.contains("write-off-submit") && !html.contains("Quarantine batch"));
    let (status, _, _) = console.get(&format!("/console/stock?branch_id={e}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let id = theirs["id"].as_str().unwrap();
    let (status, _, _) = console
        .post(
            &format!("/console/stock/batches/{id}/status"),
            &[("status", "recalled")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(batch_status(&app, id).await, "active");
    // A manager of one branch cannot recall another's batch either.
    let (_, manager) = Console::of(&app, a, Role::BranchManager).await;
    let (status, _, _) = manager
        .post(
            &format!("/console/stock/batches/{id}/status"),
            &[("status", "recalled")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(batch_status(&app, id).await, "active");
}

#[tokio::test]
async fn a_delivery_received_in_the_browser_raises_the_apis_stock() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, buyer) = app.signed_in(a, Role::InventoryManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Metformin 500mg", "selling_price": 250}),
        )
        .await;
    let mid = m["id"].as_str().unwrap().to_owned();
    let (status, order) = app
        .post(
            "/purchase-orders",
            &buyer,
            json!({"supplier_id": supplier, "lines": [
                {"medicine_id": mid, "quantity": 50, "unit_cost": "120"}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{order}");
    let oid = order["id"].as_str().unwrap().to_owned();
    let (status, _) = app
        .post(&format!("/purchase-orders/{oid}/submit"), &buyer, json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let stock_before = {
        let (_, med) = app
            .get(&format!("/medicines/{mid}?branch_id={a}"), &admin)
            .await;
        med["stock_quantity"].as_i64().unwrap()
    };
    let user = app.user(a, Role::BranchManager).await;
    b.c().set_window_size(1280, 1400).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/purchase-orders"]"#).await;
    b.see("h1", "Purchase orders").await;
    b.screenshot("purchase-orders").await;
    b.click(&format!(r#"a[href="/console/purchase-orders/{oid}"]"#))
        .await;
    b.click("#move-approve").await;
    b.see("#order-status", "approved").await;
    b.click("#move-send").await;
    b.see("#order-status", "sent").await;
    let line = order["lines"][0]["id"].as_str().unwrap();
    fill(&b, "delivery_reference", "DN-7781").await;
    fill(&b, &format!("batch-{line}"), "MF2031A").await;
    b.c()
        .execute(
            "document.getElementById(arguments[0]).value = '2031-06-30';",
            vec![json!(format!("expiry-{line}"))],
        )
        .await
        .unwrap();
    fill(&b, &format!("received-{line}"), "40").await;
    fill(&b, &format!("rejected-{line}"), "10").await;
    b.screenshot("receive-delivery").await;
    // A rejection without its reason is refused in words; nothing moves.
    b.click("#post-delivery").await;
    b.see_that("#page-error", "the missing reason", |t| {
        t.to_lowercase().contains("reason")
    })
    .await;
    fill(&b, &format!("reason-{line}"), "Crushed boxes").await;
    b.click("#post-delivery").await;
    b.see(
        "#notice-ok",
        "The delivery was received: its batches are in stock.",
    )
    .await;
    b.see("#order-status", "partially received").await;
    let (_, med) = app
        .get(&format!("/medicines/{mid}?branch_id={a}"), &admin)
        .await;
    assert_eq!(med["stock_quantity"].as_i64().unwrap(), stock_before + 40);
    let (_, notes) = app
        .get(&format!("/goods-received?purchase_order_id={oid}"), &admin)
        .await;
    assert_eq!(notes["total"], 1, "{notes}");
    assert_eq!(notes["items"][0]["status"], "posted");
    assert_eq!(notes["items"][0]["delivery_reference"], "DN-7781");
    assert_eq!(notes["items"][0]["lines"][0]["quantity_rejected"], 10);
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    assert_eq!(o["lines"][0]["outstanding"], 10);
    b.finish().await;
}

#[tokio::test]
async fn a_cashier_cannot_reach_buying_even_by_url() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, buyer) = app.signed_in(a, Role::InventoryManager).await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let supplier = app.supplier("Abacus").await;
    let m = app
        .medicine(&admin, json!({"name": "Salbutamol", "selling_price": 100}))
        .await;
    let (_, order) = app
        .post(
            "/purchase-orders",
            &buyer,
            json!({"supplier_id": supplier, "lines": [
                {"medicine_id": m["id"], "quantity": 5, "unit_cost": "10"}]}),
        )
        .await;
    let oid = order["id"].as_str().unwrap();
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (_, dashboard, _) = cashier.get("/console/dashboard").await;
    assert!(!dashboard.contains("/console/purchase-orders"));
    for path in [
        "/console/purchase-orders".to_owned(),
        format!("/console/purchase-orders/{oid}"),
    ] {
        let (status, html, _) = cashier.get(&path).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        assert!(!html.contains("Salbutamol"));
    }
    let (status, _, _) = cashier
        .post(&format!("/console/purchase-orders/{oid}/submit"), &[])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    assert_eq!(o["status"], "draft");
    // The buyer's submit without the form token changes nothing either.
    let (_, console) = Console::of(&app, a, Role::InventoryManager).await;
    let (status, _, _) = console
        .post_raw(&format!("/console/purchase-orders/{oid}/submit"), &[])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = console
        .post(&format!("/console/purchase-orders/{oid}/submit"), &[])
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (_, o) = app.get(&format!("/purchase-orders/{oid}"), &admin).await;
    assert_eq!(o["status"], "submitted");
}

#[tokio::test]
async fn a_rejected_invoice_is_read_and_retried_from_the_fiscal_queue() {
    use crate::fiscal::{all_accepted, app_on, shop, sim_faults, simulator, until_status};
    let Some(b) = Browser::start().await else {
        return;
    };
    let sim = simulator(pharmacy::fiscal_sim::Faults::default());
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    all_accepted(&app, std::time::Duration::from_secs(20)).await;
    sim_faults(&sim, json!({"reject_rate": 1.0})).await;
    let sale = crate::fiscal::sell(&app, &shop, 2).await;
    until_status(&app, "T109", &sale["id"], "rejected").await;
    let user = app.user(shop.branch, Role::BranchManager).await;
    b.c().set_window_size(1280, 1200).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/fiscal"]"#).await;
    b.see("h1", "Fiscal queue").await;
    b.see_containing("#fiscal-documents", "simulated rejection")
        .await;
    b.see_containing("#fiscal-summary", "KLA").await;
    b.screenshot("fiscal").await;
    b.goto(&app, "/console/fiscal?status=rejected").await;
    b.click("#fiscal-documents tbody a").await;
    b.see("#fiscal-status", "rejected").await;
    b.see_containing("#fiscal-attempts", "2124").await;
    sim_faults(&sim, json!({})).await;
    b.click("#retry").await;
    b.see_containing("#notice-ok", "new revision").await;
    let doc = until_status(&app, "T109", &sale["id"], "accepted").await;
    // The sale's page shows the FDN the authority gave.
    b.goto(
        &app,
        &format!("/console/sales/{}", sale["id"].as_str().unwrap()),
    )
    .await;
    b.see("#fiscal-status", "accepted").await;
    b.see("#fdn", doc["fdn"].as_str().unwrap()).await;
    b.screenshot("sale-fiscal").await;
    b.finish().await;
}

#[tokio::test]
async fn a_cashier_has_no_fiscal_queue() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, cashier) = Console::of(&app, a, Role::Cashier).await;
    let (status, _, _) = cashier.get("/console/fiscal").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (_, auditor) = Console::of(&app, a, Role::Auditor).await;
    let (status, html, _) = auditor.get("/console/fiscal").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!html.contains(r#"id="retry""#));
}

#[tokio::test]
async fn a_customers_payment_taken_in_the_browser_lowers_the_apis_balance() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, c) = app
        .post(
            "/customers",
            &admin,
            json!({"name": "Grace Namuli", "phone": "0772000111",
                   "credit_limit": 50000, "is_credit_allowed": true}),
        )
        .await;
    let cid = c["id"].as_str().unwrap().to_owned();
    let m = stocked(&app, &admin, a, "Insulin pen", 12000).await;
    let (status, sale) = app
        .post(
            "/sales",
            &admin,
            json!({"items": [{"medicine_id": m["id"], "quantity": 1}],
                   "payment_method": "credit", "customer_id": cid}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let user = app.user(a, Role::Cashier).await;
    b.c().set_window_size(1280, 1100).await.unwrap();
    b.sign_in(&app, &user.email).await;
    b.click(r#"a[href="/console/customers"]"#).await;
    fill(&b, "search", "Grace\n").await;
    b.screenshot("customers").await;
    b.click(&format!(r#"a[href="/console/customers/{cid}"]"#))
        .await;
    b.see("#customer-balance", "12,000.00").await;
    // More than is owed is refused beside the field.
    fill(&b, "amount", "20000").await;
    b.click("#take-payment").await;
    b.see_that("#amount-error", "a refusal", |t| !t.trim().is_empty())
        .await;
    fill(&b, "amount", "5000").await;
    b.click("#take-payment").await;
    b.see("#receipt-paid", "5,000.00").await;
    b.see("#customer-balance", "7,000.00").await;
    b.screenshot("customer").await;
    let (_, read) = app.get(&format!("/customers/{cid}"), &admin).await;
    assert_eq!(read["current_balance"], "7000.00", "{read}");
    b.finish().await;
}
