use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_problem, Role, TestApp};

async fn put(app: &TestApp, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(Method::PUT, "/settings", Some(token), Some(body))
        .await
}

fn defaults() -> Value {
    json!({
        "name": "Pharmacy Operations Service",
        "legal_name": null, "phone": null, "email": null, "address": null, "tin": null,
        "vat_number": null, "nda_license_no": null, "premise_no": null,
        "receipt_header": null, "receipt_footer": null, "return_policy": null,
        "show_vat_breakdown": null, "show_pharmacist_on_receipt": null,
        "auto_print_receipt": true,
        "base_currency": "UGX",
        "rate_staleness_days": 7,
        "server_mode": "hosted",
        "server_url": "",
        "default_low_stock_threshold": 10,
        "expiry_warning_days": "30,60,90",
        "default_copies": 1,
        "tax_enabled": false,
        "tax_rate": 0.18,
        "time_zone": "Africa/Kampala",
        // The buying rules' settings (not in the spec).
        "min_shelf_life_days": 90,
        "invoice_price_tolerance_percent": 2.0,
        "updated_at": null,
        "updated_by": null,
    })
}

#[tokio::test]
async fn without_a_record_every_user_reads_the_spec_defaults() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (status, s) = app.get("/settings", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s, defaults());
    let (status, _) = app.call(Method::GET, "/settings", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_admin_updates_settings_and_the_change_is_audited() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (admin_user, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, auditor) = app.signed_in(branch, Role::Auditor).await;
    let (status, s) = put(
        &app,
        &admin,
        json!({"name": "Mulago Pharmacy", "legal_name": "Mulago Pharmacy Ltd", "tin": "1000123456",
               "nda_license_no": "NDA/2026/11", "email": "info@mulago.example",
               "show_vat_breakdown": true, "auto_print_receipt": 0, "base_currency": "kes",
               "rate_staleness_days": 14, "server_mode": "custom",
               "server_url": "https://pos.mulago.example:8443/", "default_low_stock_threshold": 0,
               "expiry_warning_days": "90, 30,60,30", "default_copies": 3, "tax_enabled": true,
               "tax_rate": "0.18", "time_zone": "Africa/Nairobi", "unknown": "ignored"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["name"], "Mulago Pharmacy");
    assert_eq!(s["legal_name"], "Mulago Pharmacy Ltd");
    assert_eq!(s["show_vat_breakdown"], true);
    assert_eq!(s["show_pharmacist_on_receipt"], Value::Null);
    assert_eq!(s["auto_print_receipt"], false);
    assert_eq!(s["base_currency"], "KES");
    assert_eq!(s["rate_staleness_days"], 14);
    assert_eq!(s["server_mode"], "custom");
    assert_eq!(s["server_url"], "https://pos.mulago.example:8443");
    assert_eq!(s["default_low_stock_threshold"], 0);
    assert_eq!(s["expiry_warning_days"], "30,60,90");
    assert_eq!(s["default_copies"], 3);
    assert_eq!(s["tax_enabled"], true);
    assert_eq!(s["tax_rate"], 0.18);
    assert_eq!(s["time_zone"], "Africa/Nairobi");
    assert_eq!(s["updated_by"], admin_user.id.to_string());
    assert!(s["updated_at"].as_str().unwrap().ends_with('Z'));
    let (_, read) = app.get("/settings", &auditor).await;
    assert_eq!(read, s, "GET answers the stored record");
    // The database's "today" follows the zone.
    let client = app.pool.get().await.unwrap();
    client.query_one("SELECT org_today()", &[]).await.unwrap();
    // One audit entry with the record before (the defaults) and after.
    let rows = client
        .query(
            "SELECT actor_id, action, entity_id, before, after FROM audit_log WHERE entity_type = 'settings'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        row.get::<_, Option<uuid::Uuid>>("actor_id"),
        Some(admin_user.id)
    );
    assert_eq!(row.get::<_, String>("action"), "settings.update");
    assert_eq!(row.get::<_, String>("entity_id"), app.org_id.to_string());
    let before: Value = row.get("before");
    let after: Value = row.get("after");
    assert_eq!(before["tax_enabled"], false);
    assert_eq!(before["base_currency"], "UGX");
    assert_eq!(before, defaults(), "before the first change: the defaults");
    assert_eq!(after["tax_enabled"], true);
    assert_eq!(after["base_currency"], "KES");
    // A second change audits the first change's result as "before"; null clears.
    let (status, s) = put(&app, &admin, json!({"legal_name": null, "name": null})).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["legal_name"], Value::Null);
    assert_eq!(s["name"], "Pharmacy Operations Service");
    assert_eq!(s["tin"], "1000123456");
    let before: Value = client
        .query_one(
            "SELECT before FROM audit_log WHERE entity_type = 'settings' ORDER BY created_at DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(before["legal_name"], "Mulago Pharmacy Ltd");
}

#[tokio::test]
async fn only_admins_change_settings() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    for role in [
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
        Role::Cashier,
        Role::Auditor,
    ] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, body) = put(&app, &token, json!({"tax_enabled": true})).await;
        assert_problem(status, &body, StatusCode::FORBIDDEN);
        let (status, _) = app.get("/settings", &token).await;
        assert_eq!(status, StatusCode::OK, "{role} reads the settings");
    }
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM settings", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn every_settings_field_is_validated_with_its_name() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE currencies SET is_active = false WHERE code = 'SAR'",
            &[],
        )
        .await
        .unwrap();
    let cases = [
        (json!({"base_currency": "XYZ"}), "base_currency"),
        (json!({"base_currency": "SAR"}), "base_currency"),
        (json!({"base_currency": "US"}), "base_currency"),
        (json!({"rate_staleness_days": 0}), "rate_staleness_days"),
        (json!({"rate_staleness_days": 91}), "rate_staleness_days"),
        (json!({"rate_staleness_days": 7.5}), "rate_staleness_days"),
        (json!({"server_mode": "cloud"}), "server_mode"),
        (json!({"server_url": "ftp://pos.example.org"}), "server_url"),
        (
            json!({"server_url": "https://pos.example.org/api"}),
            "server_url",
        ),
        (
            json!({"server_url": "https://pos.example.org?x=1"}),
            "server_url",
        ),
        (json!({"server_url": "https://"}), "server_url"),
        (
            json!({"server_url": "https://pos.example.org:99999"}),
            "server_url",
        ),
        (json!({"server_url": "pos.example.org"}), "server_url"),
        (
            json!({"server_url": "https://user@pos.example.org"}),
            "server_url",
        ),
        (json!({"default_copies": 0}), "default_copies"),
        (json!({"default_copies": 21}), "default_copies"),
        (json!({"tax_rate": 1.5}), "tax_rate"),
        (json!({"tax_rate": -0.1}), "tax_rate"),
        (json!({"tax_rate": "0.123456"}), "tax_rate"),
        (json!({"expiry_warning_days": ""}), "expiry_warning_days"),
        (
            json!({"expiry_warning_days": "30,abc"}),
            "expiry_warning_days",
        ),
        (
            json!({"expiry_warning_days": "0,30"}),
            "expiry_warning_days",
        ),
        (
            json!({"expiry_warning_days": "30,,60"}),
            "expiry_warning_days",
        ),
        (json!({"expiry_warning_days": "-30"}), "expiry_warning_days"),
        (
            json!({"default_low_stock_threshold": -1}),
            "default_low_stock_threshold",
        ),
        (json!({"time_zone": "Mars/Olympus_Mons"}), "time_zone"),
        (json!({"time_zone": ""}), "time_zone"),
        (json!({"email": "not an email"}), "email"),
        (json!({"name": "  "}), "name"),
        (json!({"tax_enabled": "yes"}), "tax_enabled"),
        (json!({"show_vat_breakdown": 2}), "show_vat_breakdown"),
    ];
    for (body, field) in cases {
        let (status, problem) = put(&app, &admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    for body in [
        json!({}),
        json!({"colour": "green"}),
        json!({"tax_rate": null}),
    ] {
        let (status, problem) = put(&app, &admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["detail"], "No fields to update", "{body}");
    }
    let (status, _) = app.call(Method::PUT, "/settings", Some(&admin), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Nothing was stored by the refusals.
    let (_, s) = app.get("/settings", &admin).await;
    assert_eq!(s, defaults());
    // The edges of each range are accepted.
    for body in [
        json!({"rate_staleness_days": 1}),
        json!({"rate_staleness_days": 90}),
        json!({"default_copies": 20}),
        json!({"tax_rate": 0}),
        json!({"tax_rate": 1}),
        json!({"server_url": ""}),
        json!({"server_url": "http://10.0.0.5:8080"}),
        json!({"server_mode": "hosted"}),
        json!({"expiry_warning_days": "7"}),
        json!({"time_zone": "UTC"}),
        json!({"email": ""}),
    ] {
        let (status, s) = put(&app, &admin, body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{body}: {s}");
    }
}

#[tokio::test]
async fn sale_vat_follows_the_tax_settings() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin", "selling_price": 1180}),
        )
        .await;
    app.receive(&admin, &m["id"], branch, 10, "2030-12-31")
        .await;
    let sell = || {
        app.post(
            "/sales",
            &admin,
            json!({"items": [{"medicine_id": m["id"], "quantity": 1}], "payment_method": "cash"}),
        )
    };
    let (status, sale) = sell().await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["vat"], "0.00", "tax is off by default");
    let (status, _) = put(&app, &admin, json!({"tax_enabled": true, "tax_rate": 0.18})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, sale) = sell().await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    assert_eq!(sale["total"], "1180.00");
    assert_eq!(sale["vat"], "180.00");
    assert_eq!(sale["subtotal"], "1000.00");
}

#[tokio::test]
async fn new_medicines_take_the_default_low_stock_threshold() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, _) = put(&app, &admin, json!({"default_low_stock_threshold": 25})).await;
    assert_eq!(status, StatusCode::OK);
    let m = app
        .medicine(&admin, json!({"name": "Cetirizine", "selling_price": 300}))
        .await;
    assert_eq!(m["low_stock_threshold"], 25);
}

#[tokio::test]
async fn the_openapi_document_describes_printing_settings_currency_and_audit() {
    let app = TestApp::spawn().await;
    let doc: Value = app
        .http
        .get(format!("{}/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for (path, methods) in [
        ("/api/v1/printing/printers", &["get", "post"][..]),
        ("/api/v1/printing/printers/{id}", &["put", "delete"]),
        ("/api/v1/printing/receipt-templates", &["get", "post"]),
        (
            "/api/v1/printing/receipt-templates/{id}",
            &["put", "delete"],
        ),
        ("/api/v1/printing/print-jobs", &["get", "post"]),
        ("/api/v1/settings", &["get", "put"]),
        ("/api/v1/currencies", &["get"]),
        ("/api/v1/currency/rates", &["post"]),
        ("/api/v1/currency/branch", &["get"]),
        ("/api/v1/audit-log", &["get"]),
    ] {
        for method in methods {
            assert!(
                doc["paths"][path].get(*method).is_some(),
                "missing {method} {path}"
            );
        }
    }
    let schemas = &doc["components"]["schemas"];
    for name in [
        "Printer",
        "ReceiptTemplate",
        "PrintJob",
        "Settings",
        "BranchCurrency",
        "AuditRow",
    ] {
        assert!(schemas.get(name).is_some(), "missing schema {name}");
    }
    assert!(schemas["PrinterWrite"]["properties"]
        .get("device_path")
        .is_none());
}
