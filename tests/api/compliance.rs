//! `/compliance`: the prescription book, the classified-drugs register (JSON
//! and CSV) and the fiscal preview. The device register is in `devices.rs`.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

struct Books {
    app: TestApp,
    branch: Uuid,
    admin: String,
    pharmacist: String,
    controlled: Value,
    plain: Value,
}

impl Books {
    async fn open() -> Books {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let controlled = app
            .medicine(
                &admin,
                json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                       "requires_prescription": true, "control_schedule": "Class A"}),
            )
            .await;
        let plain = app
            .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
            .await;
        for m in [&controlled, &plain] {
            app.receive(&admin, &m["id"], branch, 50, "2030-12-31")
                .await;
        }
        Books {
            app,
            branch,
            admin,
            pharmacist,
            controlled,
            plain,
        }
    }

    async fn prescription(&self, token: &str, branch: Option<Uuid>, patient: &str) -> Value {
        let mut body = json!({
            "patient_name": patient, "patient_id_number": "CM900", "prescriber_name": "Dr Okello",
            "prescriber_license": "UMDPC-77",
            "items": [
                {"medicine_id": self.controlled["id"], "quantity": 2, "dosage_instructions": "at night"},
                {"medicine_id": self.plain["id"], "quantity": 1},
            ],
        });
        if let Some(b) = branch {
            body["branch_id"] = json!(b);
        }
        let (status, rx) = self.app.post("/prescriptions", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "{rx}");
        rx
    }

    async fn csv(&self, path: &str, accept: Option<&str>) -> (StatusCode, String, String) {
        let mut req = self
            .app
            .http
            .get(format!("{}{path}", self.app.base))
            .bearer_auth(&self.admin);
        if let Some(a) = accept {
            req = req.header("Accept", a);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        let ctype = res
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, ctype, res.text().await.unwrap())
    }
}

#[tokio::test]
async fn the_prescription_book_lists_live_prescriptions_with_line_counts_and_the_note() {
    let b = Books::open().await;
    let other = b.app.branch("EBB").await;
    let kept = b.prescription(&b.pharmacist, None, "Amina").await;
    let gone = b.prescription(&b.pharmacist, None, "Brian").await;
    b.prescription(&b.admin, Some(other), "Other Branch").await;
    let (status, _) = b
        .app
        .call(
            Method::DELETE,
            &format!("/prescriptions/{}", gone["id"].as_str().unwrap()),
            Some(&b.admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let (status, book) = b
        .app
        .get("/compliance/prescription-book", &b.pharmacist)
        .await;
    assert_eq!(status, StatusCode::OK, "{book}");
    assert_eq!(book["total"], 1);
    assert_eq!(book["page"], 1);
    assert_eq!(book["page_size"], 50);
    assert!(book["retention_note"].as_str().unwrap().contains("2 years"));
    let row = &book["items"][0];
    assert_eq!(row["rx_number"], kept["rx_number"]);
    assert_eq!(row["patient_name"], "Amina");
    assert_eq!(row["patient_id_number"], "CM900");
    assert_eq!(row["prescriber_name"], "Dr Okello");
    assert_eq!(row["prescriber_license"], "UMDPC-77");
    assert_eq!(row["status"], "PENDING");
    assert!(row["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(!row["created_by_name"].as_str().unwrap().is_empty());
    assert_eq!(row["line_count"], 2);

    // An admin sees every branch; a window after today sees nothing.
    let (_, all) = b.app.get("/compliance/prescription-book", &b.admin).await;
    assert_eq!(all["total"], 2);
    let (_, none) = b
        .app
        .get(
            "/compliance/prescription-book?from_date=2099-01-01",
            &b.admin,
        )
        .await;
    assert_eq!(none["total"], 0);
    // A non-admin may not read another branch's book.
    let (s, body) = b
        .app
        .get(
            &format!("/compliance/prescription-book?branch_id={other}"),
            &b.pharmacist,
        )
        .await;
    assert_problem(s, &body, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn book_windows_are_validated() {
    let b = Books::open().await;
    for (query, field) in [
        ("from_date=2026-13-01", "from_date"),
        ("to_date=yesterday", "to_date"),
        ("from_date=2026-05-02&to_date=2026-05-01", "from_date"),
        ("format=xml", "format"),
    ] {
        for book in ["prescription-book", "classified-drugs-book"] {
            let (s, body) = b
                .app
                .get(&format!("/compliance/{book}?{query}"), &b.admin)
                .await;
            assert_problem(s, &body, StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], field, "{book}?{query}");
        }
    }
}

#[tokio::test]
async fn the_classified_drugs_book_holds_only_controlled_medicines() {
    let b = Books::open().await;
    let rx = b.prescription(&b.pharmacist, None, "Amina").await;
    let (status, sale) = b
        .app
        .post(
            "/sales",
            &b.pharmacist,
            json!({"items": [{"medicine_id": b.controlled["id"], "quantity": 2},
                             {"medicine_id": b.plain["id"], "quantity": 1}],
                   "payment_method": "cash", "prescription_id": rx["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let (status, book) = b
        .app
        .get("/compliance/classified-drugs-book", &b.pharmacist)
        .await;
    assert_eq!(status, StatusCode::OK, "{book}");
    assert_eq!(book["total"], 1);
    let note = book["retention_note"].as_str().unwrap();
    assert!(note.contains("statutory record"), "{note}");
    assert!(
        note.contains("A, B and C") && note.contains("group II"),
        "{note}"
    );
    let row = &book["items"][0];
    assert_eq!(row["medicine_name"], "Morphine 10mg");
    assert_eq!(row["quantity"], 2);
    assert_eq!(row["patient_national_id"], "CM900");
    assert_eq!(row["doctor_license"], "UMDPC-77");
    assert_eq!(row["sale_id"], sale["id"]);
    assert!(!row["dispensed_by_name"].as_str().unwrap().is_empty());
    assert!(row["dispensed_at"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test]
async fn both_books_export_as_csv() {
    let b = Books::open().await;
    b.prescription(&b.pharmacist, None, "Amina, \"Mama\" K")
        .await;
    b.prescription(&b.pharmacist, None, "Brian").await;
    let (status, ctype, text) = b
        .csv("/compliance/prescription-book", Some("text/csv"))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(ctype.starts_with("text/csv"), "{ctype}");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    for h in [
        "rx_number",
        "patient_name",
        "patient_id_number",
        "prescriber_name",
        "prescriber_license",
        "status",
        "created_at",
        "created_by_name",
        "line_count",
    ] {
        assert!(headers.contains(&h.to_owned()), "{headers:?}");
    }
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    let name = headers.iter().position(|h| h == "patient_name").unwrap();
    assert_eq!(&rows[1][name], "Amina, \"Mama\" K");

    let (status, ctype, text) = b
        .csv("/compliance/classified-drugs-book?format=csv", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(ctype.starts_with("text/csv"));
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("medicine_name") && first.contains("sale_id"),
        "{first}"
    );
    assert_eq!(
        text.lines().count(),
        1,
        "header only: nothing dispensed yet"
    );
}

#[tokio::test]
async fn the_fiscal_preview_of_a_mixed_vat_sale() {
    let b = Books::open().await;
    let (s, settings) = b
        .app
        .call(
            Method::PUT,
            "/settings",
            Some(&b.admin),
            Some(json!({"tax_enabled": true, "tax_rate": 0.18, "tin": "1000123456"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{settings}");
    let standard = b
        .app
        .medicine(
            &b.admin,
            json!({"name": "Vitamin C", "selling_price": 1180}),
        )
        .await;
    let zero = b
        .app
        .medicine(
            &b.admin,
            json!({"name": "ORS", "selling_price": 500, "vat_category": "zero"}),
        )
        .await;
    for m in [&standard, &zero] {
        b.app
            .receive(&b.admin, &m["id"], b.branch, 10, "2030-12-31")
            .await;
    }
    let (status, sale) = b
        .app
        .post(
            "/sales",
            &b.pharmacist,
            json!({"items": [{"medicine_id": standard["id"], "quantity": 1},
                             {"medicine_id": zero["id"], "quantity": 2}],
                   "payment_method": "cash"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let id = sale["id"].as_str().unwrap();
    let (status, p) = b
        .app
        .get(&format!("/compliance/fiscal-preview/{id}"), &b.pharmacist)
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(p["seller"]["tin"], "1000123456");
    assert_eq!(p["seller"]["branch_id"], json!(b.branch));
    assert_eq!(p["seller"]["invoice_number"], sale["invoice_number"]);
    assert_eq!(p["seller"]["icv"], json!(1));
    assert!(p["buyer"]["tin"].is_string() && p["buyer"]["name"].is_string());
    assert_eq!(p["totals"]["total"], json!(2180.0));
    assert_eq!(p["totals"]["vat"], json!(180.0));
    assert_eq!(p["totals"]["subtotal"], json!(2000.0));
    assert_eq!(
        p["totals"]["vat_breakdown"],
        json!([
            {"rate": 0, "taxable_amount": 1000.0, "vat_amount": 0.0},
            {"rate": 18, "taxable_amount": 1000.0, "vat_amount": 180.0},
        ])
    );
    let items = p["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    for item in items {
        assert_eq!(item["sale_id"], sale["id"]);
        assert!(item["id"].is_string() && item["batch_id"].is_string());
        assert!(item["quantity"].is_i64() && item["vat_rate"].is_i64());
        assert_eq!(item["cost_at_sale"], json!(100.0));
    }
    assert_eq!(items[0]["vat_rate"], 18);
    assert_eq!(items[0]["vat_amount"], json!(180.0));
    assert_eq!(items[1]["vat_rate"], 0);
    assert_eq!(items[1]["unit_price"], json!(500.0));
    assert!(p["fiscalization"]["mode"].is_string());
    let note = p["fiscalization"]["note"].as_str().unwrap();
    for words in [
        "fiscal document number",
        "verification code",
        "QR code",
        "submitted",
    ] {
        assert!(note.contains(words), "{note}");
    }

    // Unknown sale, or another branch's: 404 with the spec's text.
    let (s, body) = b
        .app
        .get(
            &format!("/compliance/fiscal-preview/{}", Uuid::now_v7()),
            &b.pharmacist,
        )
        .await;
    assert_problem(s, &body, StatusCode::NOT_FOUND);
    assert_eq!(body["detail"], "Sale not found");
    let other = b.app.branch("EBB").await;
    let (_, stranger) = b.app.signed_in(other, Role::Cashier).await;
    let (s, body) = b
        .app
        .get(&format!("/compliance/fiscal-preview/{id}"), &stranger)
        .await;
    assert_problem(s, &body, StatusCode::NOT_FOUND);
    assert_eq!(body["detail"], "Sale not found");
}
