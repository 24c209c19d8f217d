//! Supplier invoices matched three ways: lines bill goods received lines
//! for at most what was received less what was billed (even with twenty
//! invoices at once), the total equals lines and charges to the cent, a
//! price beyond the tolerance or goods billed before they were received
//! hold the invoice, and a held invoice takes no payment until someone
//! other than its creator releases it.

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

struct Books {
    app: TestApp,
    branch: Uuid,
    admin: String,
    manager: String,
    clerk: String,
    supplier: Uuid,
    medicine: String,
}

fn in_a_year() -> String {
    (chrono::Utc::now().date_naive() + chrono::Duration::days(365)).to_string()
}

impl Books {
    async fn open() -> Books {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (_, clerk) = app.signed_in(branch, Role::InventoryManager).await;
        let supplier = app.supplier("Quality Chemicals").await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin 500mg", "selling_price": 3}),
            )
            .await;
        Books {
            app,
            branch,
            admin,
            manager,
            clerk,
            supplier,
            medicine: medicine["id"].as_str().unwrap().to_owned(),
        }
    }

    /// A note of `qty` units at `cost` from `supplier`, posted unless
    /// `draft`; answers the note.
    async fn receipt(&self, supplier: Uuid, qty: i64, cost: &str, draft: bool) -> Value {
        let body = json!({"supplier_id": supplier, "delivery_reference": "DN",
            "lines": [{"medicine_id": self.medicine, "batch_number": format!("B-{}", Uuid::now_v7()),
                       "expiry_date": in_a_year(), "quantity_received": qty, "unit_cost": cost}]});
        let (status, note) = self.app.post("/goods-received", &self.clerk, body).await;
        assert_eq!(status, StatusCode::CREATED, "{note}");
        if draft {
            return note;
        }
        let path = format!("/goods-received/{}/post", note["id"].as_str().unwrap());
        let (status, note) = self.app.post(&path, &self.clerk, json!({})).await;
        assert_eq!(status, StatusCode::OK, "{note}");
        note
    }

    async fn invoice(
        &self,
        token: &str,
        total: &str,
        lines: Value,
        charges: Value,
    ) -> (StatusCode, Value) {
        let body = json!({"supplier_id": self.supplier, "total_amount": total, "invoice_no": "INV-1",
                          "lines": lines, "charges": charges});
        self.app
            .post("/supplier-finance/invoices", token, body)
            .await
    }

    async fn billed(&self, line: &Value) -> i32 {
        let client = self.app.pool.get().await.unwrap();
        let id: Uuid = line.as_str().unwrap().parse().unwrap();
        client
            .query_one(
                "SELECT quantity_invoiced FROM goods_received_lines WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0)
    }
}

#[tokio::test]
async fn a_line_bills_at_most_what_was_received_and_the_total_is_the_lines_and_charges() {
    let b = Books::open().await;
    let note = b.receipt(b.supplier, 100, "2.00", false).await;
    let line = &note["lines"][0]["id"];
    let lines = json!([{"goods_received_line_id": line, "quantity": 60, "unit_cost": "2.00"}]);
    let freight = json!([{"kind": "freight", "amount": "5.00"}]);
    // 60 × 2.00 + 5.00 = 125.00, not 120.00.
    let (status, p) = b
        .invoice(&b.clerk, "120.00", lines.clone(), freight.clone())
        .await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "total_amount");
    assert!(p["detail"].as_str().unwrap().contains("125.00"), "{p}");
    let (status, inv) = b.invoice(&b.clerk, "125.00", lines, freight).await;
    assert_eq!(status, StatusCode::CREATED, "{inv}");
    assert_eq!(inv["match_status"], "matched");
    assert_eq!(inv["charges_total"], "5.00");
    assert_eq!(inv["lines"][0]["quantity"], 60);
    assert_eq!(inv["lines"][0]["price_difference"], "0.00");
    assert_eq!(inv["lines"][0]["grn_number"], note["grn_number"]);
    assert_eq!(b.billed(line).await, 60);

    // 40 are left; 50 is refused, naming the line and what is left.
    let lines = json!([{"goods_received_line_id": line, "quantity": 50, "unit_cost": "2.00"}]);
    let (status, p) = b.invoice(&b.clerk, "100.00", lines, json!([])).await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "lines[0].quantity");
    assert!(p["detail"].as_str().unwrap().contains("40 left"), "{p}");
    assert_eq!(b.billed(line).await, 60);

    // A payment to a matched invoice goes through as before.
    let path = format!(
        "/supplier-finance/invoices/{}/payments",
        inv["id"].as_str().unwrap()
    );
    let (status, paid) = b
        .app
        .post(&path, &b.clerk, json!({"amount": "125.00"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{paid}");
    // An invoice without lines keeps today's behaviour.
    let body = json!({"supplier_id": b.supplier, "total_amount": 10});
    let (status, plain) = b
        .app
        .post("/supplier-finance/invoices", &b.clerk, body)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{plain}");
    assert_eq!(plain["match_status"], "unmatched");
    assert_eq!(plain["lines"], json!([]));
}

#[tokio::test]
async fn a_price_beyond_the_tolerance_holds_the_invoice_until_someone_else_releases_it() {
    let b = Books::open().await;
    let note = b.receipt(b.supplier, 10, "2.00", false).await;
    let line = &note["lines"][0]["id"];
    // 2.04 is 2 % off: within the tolerance.
    let lines = json!([{"goods_received_line_id": line, "quantity": 5, "unit_cost": "2.04"}]);
    let (_, inv) = b.invoice(&b.manager, "10.20", lines, json!([])).await;
    assert_eq!(inv["match_status"], "matched", "{inv}");
    // 2.10 is 5 % off.
    let lines = json!([{"goods_received_line_id": line, "quantity": 5, "unit_cost": "2.10"}]);
    let (status, inv) = b.invoice(&b.manager, "10.50", lines, json!([])).await;
    assert_eq!(status, StatusCode::CREATED, "{inv}");
    assert_eq!(inv["match_status"], "on_hold");
    assert_eq!(inv["lines"][0]["price_difference"], "0.10");
    assert_eq!(inv["lines"][0]["price_difference_percent"], "5.00");
    assert!(inv["lines"][0]["hold_reason"].is_string());
    let id = inv["id"].as_str().unwrap();
    let pay = format!("/supplier-finance/invoices/{id}/payments");
    let (status, p) = b.app.post(&pay, &b.clerk, json!({"amount": 1})).await;
    assert_problem(status, &p, StatusCode::CONFLICT);
    assert_eq!(p["code"], "invoice_on_hold");

    let release = format!("/supplier-finance/invoices/{id}/release");
    let (status, p) = b
        .app
        .post(&release, &b.clerk, json!({"reason": "agreed"}))
        .await;
    assert_problem(status, &p, StatusCode::FORBIDDEN);
    let (status, p) = b
        .app
        .post(&release, &b.manager, json!({"reason": "agreed"}))
        .await;
    assert_problem(status, &p, StatusCode::FORBIDDEN);
    let (status, p) = b.app.post(&release, &b.admin, json!({"reason": " "})).await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "reason");
    let (status, released) = b
        .app
        .post(
            &release,
            &b.admin,
            json!({"reason": "Price rise agreed by phone"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{released}");
    assert_eq!(released["match_status"], "released");
    assert_eq!(released["release_reason"], "Price rise agreed by phone");
    let (status, p) = b
        .app
        .post(&release, &b.admin, json!({"reason": "again"}))
        .await;
    assert_problem(status, &p, StatusCode::CONFLICT);
    let (_, log) = b
        .app
        .get("/audit-log?action=supplier_invoice.release", &b.admin)
        .await;
    assert!(
        log.to_string().contains("supplier_invoice.release"),
        "{log}"
    );
    let (status, paid) = b.app.post(&pay, &b.clerk, json!({"amount": "10.50"})).await;
    assert_eq!(status, StatusCode::CREATED, "{paid}");
}

#[tokio::test]
async fn goods_billed_before_they_were_received_hold_the_invoice() {
    let b = Books::open().await;
    let note = b.receipt(b.supplier, 10, "2.00", true).await;
    let line = &note["lines"][0]["id"];
    let lines = json!([{"goods_received_line_id": line, "quantity": 10, "unit_cost": "2.00"}]);
    let (status, inv) = b.invoice(&b.clerk, "20.00", lines, json!([])).await;
    assert_eq!(status, StatusCode::CREATED, "{inv}");
    assert_eq!(inv["match_status"], "on_hold");
    assert_eq!(inv["lines"][0]["received"], false);
    assert!(inv["lines"][0]["hold_reason"]
        .as_str()
        .unwrap()
        .contains("not posted"));
}

#[tokio::test]
async fn twenty_invoices_at_once_never_bill_more_than_was_received() {
    let b = Books::open().await;
    let note = b.receipt(b.supplier, 100, "2.00", false).await;
    let line = note["lines"][0]["id"].clone();
    let second = b.app.second_process();
    let body = json!({"supplier_id": b.supplier, "total_amount": "20.00",
        "lines": [{"goods_received_line_id": line, "quantity": 10, "unit_cost": "2.00"}]});
    let answers = b
        .app
        .post_through_both(&second, 20, "/supplier-finance/invoices", &b.clerk, &body)
        .await;
    let made = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .count();
    assert_eq!(made, 10, "{answers:?}");
    assert!(answers
        .iter()
        .all(|(s, _)| *s == StatusCode::CREATED || *s == StatusCode::BAD_REQUEST));
    assert_eq!(b.billed(&line).await, 100);
}

#[tokio::test]
async fn bad_invoice_lines_name_their_field_and_record_nothing() {
    let b = Books::open().await;
    let elsewhere = b.app.supplier("Another Supplier").await;
    let theirs = b.receipt(elsewhere, 10, "2.00", false).await;
    let ours = b.receipt(b.supplier, 10, "2.00", false).await;
    let line = |id: &Value, qty: Value| json!([{"goods_received_line_id": id, "quantity": qty, "unit_cost": "2.00"}]);
    let cases = [
        (
            line(&theirs["lines"][0]["id"], json!(1)),
            json!([]),
            "2.00",
            "lines[0].goods_received_line_id",
        ),
        (
            line(&json!(Uuid::now_v7()), json!(1)),
            json!([]),
            "2.00",
            "lines[0].goods_received_line_id",
        ),
        (
            line(&ours["lines"][0]["id"], json!(0)),
            json!([]),
            "2.00",
            "lines[0].quantity",
        ),
        (
            line(&ours["lines"][0]["id"], json!("1")),
            json!([]),
            "2.00",
            "",
        ),
        (
            line(&ours["lines"][0]["id"], json!(1)),
            json!([{"kind": "tips", "amount": 1}]),
            "3.00",
            "charges[0].kind",
        ),
        (json!([]), json!([]), "2.00", "lines"),
    ];
    for (lines, charges, total, field) in cases {
        let (status, p) = b.invoice(&b.clerk, total, lines, charges).await;
        assert_problem(status, &p, StatusCode::BAD_REQUEST);
        if !field.is_empty() {
            assert_eq!(p["field"], field, "{p}");
        }
    }
    let body = json!({"supplier_id": b.supplier, "total_amount": 5,
                      "charges": [{"kind": "freight", "amount": 5}]});
    let (status, p) = b
        .app
        .post("/supplier-finance/invoices", &b.clerk, body)
        .await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "charges");
    let client = b.app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM supplier_invoices", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    assert_eq!(b.billed(&ours["lines"][0]["id"]).await, 0);
    let _ = b.branch;
}
