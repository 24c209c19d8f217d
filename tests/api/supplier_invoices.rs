//! `/supplier-finance/invoices` and their payments.

use reqwest::{Method, StatusCode};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use uuid::Uuid;

use domain::suppliers::invoices::PaySupplierInvoice;
use domain::Command;

use crate::common::{assert_problem, Role, TestApp};

const INVOICES: &str = "/supplier-finance/invoices";

fn pay_path(invoice: &Value) -> String {
    format!("{INVOICES}/{}/payments", invoice["id"].as_str().unwrap())
}

async fn invoice(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, b) = app.post(INVOICES, token, body).await;
    assert_eq!(status, StatusCode::CREATED, "create invoice: {b}");
    b
}

#[tokio::test]
async fn create_answers_the_invoice_shape_with_defaults() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, manager) = app.signed_in(branch, Role::InventoryManager).await;
    let supplier = app.supplier("Quality Chemicals").await;
    let (status, b) = app
        .post(
            INVOICES,
            &manager,
            json!({"supplier_id": supplier, "total_amount": "1500000", "invoice_no": " QC-77 ",
                   "due_date": "2026-12-31", "notes": "December order"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert!(Uuid::parse_str(b["id"].as_str().unwrap()).is_ok());
    assert_eq!(b["supplier_id"], supplier.to_string());
    assert_eq!(b["supplier_name"], "Quality Chemicals");
    assert_eq!(b["branch_id"], branch.to_string());
    assert_eq!(b["invoice_no"], "QC-77");
    assert_eq!(b["total_amount"], "1500000.00");
    assert_eq!(b["paid_amount"], "0.00");
    assert_eq!(b["balance"], "1500000.00");
    assert_eq!(b["status"], "unpaid");
    assert_eq!(b["due_date"], "2026-12-31");
    assert_eq!(b["notes"], "December order");
    assert_eq!(b["created_by"], user.id.to_string());
    assert!(b["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(b["updated_at"].is_string());

    // Optional fields default; a number works as well as a string.
    let b = invoice(
        &app,
        &manager,
        json!({"supplier_id": supplier, "total_amount": 250.5}),
    )
    .await;
    assert_eq!(b["total_amount"], "250.50");
    assert_eq!(b["invoice_no"], "");
    assert_eq!(b["notes"], "");
    assert_eq!(b["due_date"], Value::Null);
    assert_eq!(b["status"], "unpaid");
}

#[tokio::test]
async fn create_rejects_bad_bodies() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let supplier = app.supplier("Abacus").await;
    let cases = [
        (json!({"total_amount": 100}), "supplier_id"),
        (json!({"supplier_id": supplier}), "total_amount"),
        (
            json!({"supplier_id": supplier, "total_amount": 0}),
            "total_amount",
        ),
        (
            json!({"supplier_id": supplier, "total_amount": "-5"}),
            "total_amount",
        ),
        (
            json!({"supplier_id": supplier, "total_amount": 100, "due_date": "31/12/2026"}),
            "due_date",
        ),
        (
            json!({"supplier_id": supplier, "total_amount": 100, "due_date": "2026-02-30"}),
            "due_date",
        ),
        (
            json!({"supplier_id": Uuid::now_v7(), "total_amount": 100}),
            "supplier_id",
        ),
        (
            json!({"supplier_id": supplier, "total_amount": 100, "branch_id": Uuid::now_v7()}),
            "branch_id",
        ),
    ];
    for (body, field) in cases {
        let (status, b) = app.post(INVOICES, &admin, body.clone()).await;
        assert_problem(status, &b, StatusCode::BAD_REQUEST);
        assert_eq!(b["field"], field, "{body} -> {b}");
    }
    // A deleted supplier is unknown.
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE suppliers SET is_deleted = true WHERE id = $1",
            &[&supplier],
        )
        .await
        .unwrap();
    let (status, b) = app
        .post(
            INVOICES,
            &admin,
            json!({"supplier_id": supplier, "total_amount": 100}),
        )
        .await;
    assert_problem(status, &b, StatusCode::BAD_REQUEST);
    assert_eq!(b["field"], "supplier_id");
}

#[tokio::test]
async fn payments_move_unpaid_to_partial_to_paid() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, manager) = app.signed_in(branch, Role::BranchManager).await;
    let supplier = app.supplier("Surgipharm").await;
    let inv = invoice(
        &app,
        &manager,
        json!({"supplier_id": supplier, "total_amount": 1000, "invoice_no": "S-1"}),
    )
    .await;
    let path = pay_path(&inv);

    let (status, b) = app
        .post(
            &path,
            &manager,
            json!({"amount": "400", "method": "bank_transfer", "reference": "TT-9"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    let p = &b["payment"];
    assert!(Uuid::parse_str(p["id"].as_str().unwrap()).is_ok());
    assert_eq!(p["invoice_id"], inv["id"]);
    assert_eq!(p["amount"], "400.00");
    assert_eq!(p["method"], "bank_transfer");
    assert_eq!(p["reference"], "TT-9");
    assert_eq!(p["paid_by"], user.id.to_string());
    assert_eq!(p["paid_by_name"], user.full_name);
    assert!(p["created_at"].is_string());
    assert_eq!(b["invoice"]["status"], "partial");
    assert_eq!(b["invoice"]["paid_amount"], "400.00");
    assert_eq!(b["invoice"]["balance"], "600.00");

    // Above the outstanding balance: 400 naming both figures, nothing moves.
    let (status, b) = app.post(&path, &manager, json!({"amount": 700})).await;
    assert_problem(status, &b, StatusCode::BAD_REQUEST);
    assert_eq!(b["field"], "amount");
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.contains("700.00") && detail.contains("600.00"),
        "{detail}"
    );

    // Zero, negative and malformed amounts; an unknown method.
    for body in [
        json!({"amount": 0}),
        json!({"amount": -10}),
        json!({"amount": "-0.01"}),
        json!({}),
        json!({"amount": 10.001}),
    ] {
        let (status, b) = app.post(&path, &manager, body.clone()).await;
        assert_problem(status, &b, StatusCode::BAD_REQUEST);
        assert_eq!(b["field"], "amount", "{body} -> {b}");
    }
    let (status, b) = app
        .post(&path, &manager, json!({"amount": 10, "method": "barter"}))
        .await;
    assert_problem(status, &b, StatusCode::BAD_REQUEST);
    assert_eq!(b["field"], "method");

    let (status, b) = app.post(&path, &manager, json!({"amount": 600})).await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["payment"]["method"], "cash");
    assert_eq!(b["payment"]["reference"], "");
    assert_eq!(b["invoice"]["status"], "paid");
    assert_eq!(b["invoice"]["paid_amount"], "1000.00");
    assert_eq!(b["invoice"]["balance"], "0.00");

    let (status, b) = app.post(&path, &manager, json!({"amount": 1})).await;
    assert_problem(status, &b, StatusCode::CONFLICT);

    let (status, b) = app
        .post(
            &format!("{INVOICES}/{}/payments", Uuid::now_v7()),
            &manager,
            json!({"amount": 1}),
        )
        .await;
    assert_problem(status, &b, StatusCode::NOT_FOUND);

    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*), sum(amount) FROM supplier_payments WHERE invoice_id = $1",
            &[&Uuid::parse_str(inv["id"].as_str().unwrap()).unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 2);
    assert_eq!(row.get::<_, Decimal>(1), Decimal::from(1000));
}

#[tokio::test]
async fn concurrent_payments_never_overpay() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let supplier = app.supplier("Kampala Pharma").await;
    let inv = invoice(
        &app,
        &manager,
        json!({"supplier_id": supplier, "total_amount": 100}),
    )
    .await;
    let path = pay_path(&inv);
    let calls = (0..20).map(|_| app.post(&path, &manager, json!({"amount": 10})));
    let results = futures_util::future::join_all(calls).await;
    let mut ok = 0;
    for (status, b) in &results {
        match *status {
            StatusCode::CREATED => ok += 1,
            StatusCode::BAD_REQUEST | StatusCode::CONFLICT => assert_problem(*status, b, *status),
            other => panic!("unexpected {other}: {b}"),
        }
    }
    assert_eq!(ok, 10);
    let (_, list) = app.get(INVOICES, &manager).await;
    assert_eq!(list["items"][0]["paid_amount"], "100.00");
    assert_eq!(list["items"][0]["status"], "paid");
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT count(*), sum(amount) FROM supplier_payments WHERE invoice_id = $1",
            &[&Uuid::parse_str(inv["id"].as_str().unwrap()).unwrap()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 10);
    assert_eq!(row.get::<_, Decimal>(1), Decimal::from(100));

    // Without the actor's queue (as from several server processes), the
    // conditional update alone still never overpays.
    let inv = invoice(
        &app,
        &manager,
        json!({"supplier_id": supplier, "total_amount": 100}),
    )
    .await;
    let invoice_id = Uuid::parse_str(inv["id"].as_str().unwrap()).unwrap();
    let user_id: Uuid = Uuid::parse_str(inv["created_by"].as_str().unwrap()).unwrap();
    let runs = (0..20).map(|_| {
        let cmd = PaySupplierInvoice {
            invoice_id,
            amount: Decimal::from(10),
            method: "cash".to_owned(),
            reference: String::new(),
            user_id,
        };
        cmd.run(app.pool.clone())
    });
    let results = futures_util::future::join_all(runs).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 10);
    let row = client
        .query_one(
            "SELECT i.paid_amount, i.status, (SELECT sum(amount) FROM supplier_payments p
                                              WHERE p.invoice_id = i.id)
             FROM supplier_invoices i WHERE i.id = $1",
            &[&invoice_id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Decimal>(0), Decimal::from(100));
    assert_eq!(row.get::<_, String>(1), "paid");
    assert_eq!(row.get::<_, Decimal>(2), Decimal::from(100));
}

#[tokio::test]
async fn list_is_newest_first_filtered_and_capped_at_50() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, manager) = app.signed_in(branch, Role::InventoryManager).await;
    let s1 = app.supplier("Alpha").await;
    let s2 = app.supplier("Beta").await;
    let mut created = Vec::new();
    for i in 0..55 {
        let supplier = if i % 5 == 0 { s2 } else { s1 };
        let b = invoice(
            &app,
            &manager,
            json!({"supplier_id": supplier, "total_amount": 100 + i, "invoice_no": format!("N-{i}")}),
        )
        .await;
        created.push(b["id"].clone());
    }
    let (status, b) = app.get(INVOICES, &manager).await;
    assert_eq!(status, StatusCode::OK, "{b}");
    let items = b["items"].as_array().unwrap();
    assert_eq!(items.len(), 50);
    assert_eq!(b["total"], 50);
    let newest: Vec<Value> = created.iter().rev().take(50).cloned().collect();
    let got: Vec<Value> = items.iter().map(|i| i["id"].clone()).collect();
    assert_eq!(got, newest, "newest first");

    let (status, b) = app
        .get(&format!("{INVOICES}?supplier_id={s2}"), &manager)
        .await;
    assert_eq!(status, StatusCode::OK, "{b}");
    assert_eq!(b["total"], 11);
    let items = b["items"].as_array().unwrap();
    assert_eq!(items.len(), 11);
    assert!(items.iter().all(|i| i["supplier_name"] == "Beta"));
    assert_eq!(items[0]["invoice_no"], "N-50");

    // Status filter.
    let (status, _) = app
        .post(&pay_path(&items[0]), &manager, json!({"amount": 1}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, b) = app
        .get(&format!("{INVOICES}?status=partial"), &manager)
        .await;
    assert_eq!(b["total"], 1);
    assert_eq!(b["items"][0]["id"], items[0]["id"]);
    let (status, b) = app.get(&format!("{INVOICES}?status=void"), &manager).await;
    assert_problem(status, &b, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn branches_are_isolated() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b_branch = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, manager_a) = app.signed_in(a, Role::BranchManager).await;
    let (_, manager_b) = app.signed_in(b_branch, Role::BranchManager).await;
    let supplier = app.supplier("Shared Supplier").await;
    let inv_a = invoice(
        &app,
        &manager_a,
        json!({"supplier_id": supplier, "total_amount": 500}),
    )
    .await;
    // An admin may record an invoice for any branch.
    let inv_b = invoice(
        &app,
        &admin,
        json!({"supplier_id": supplier, "total_amount": 300, "branch_id": b_branch}),
    )
    .await;
    assert_eq!(inv_b["branch_id"], b_branch.to_string());

    let (_, list) = app.get(INVOICES, &manager_b).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["id"], inv_b["id"]);
    let (status, b) = app
        .get(&format!("{INVOICES}?branch_id={a}"), &manager_b)
        .await;
    assert_problem(status, &b, StatusCode::FORBIDDEN);

    let (status, b) = app
        .post(&pay_path(&inv_a), &manager_b, json!({"amount": 10}))
        .await;
    assert_problem(status, &b, StatusCode::NOT_FOUND);

    let (status, b) = app
        .post(
            INVOICES,
            &manager_b,
            json!({"supplier_id": supplier, "total_amount": 10, "branch_id": a}),
        )
        .await;
    assert_problem(status, &b, StatusCode::FORBIDDEN);

    // The admin sees both, or one branch on request.
    let (_, list) = app.get(INVOICES, &admin).await;
    assert_eq!(list["total"], 2);
    let (_, list) = app.get(&format!("{INVOICES}?branch_id={a}"), &admin).await;
    assert_eq!(list["total"], 1);
    assert_eq!(list["items"][0]["id"], inv_a["id"]);
    // And may pay another branch's invoice.
    let (status, b) = app
        .post(&pay_path(&inv_b), &admin, json!({"amount": 300}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{b}");
    assert_eq!(b["invoice"]["status"], "paid");
}

#[tokio::test]
async fn other_roles_are_forbidden() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
    let supplier = app.supplier("Abacus").await;
    let inv = invoice(
        &app,
        &manager,
        json!({"supplier_id": supplier, "total_amount": 100}),
    )
    .await;
    for role in [Role::Cashier, Role::Pharmacist] {
        let (_, token) = app.signed_in(branch, role).await;
        let (status, b) = app
            .post(
                INVOICES,
                &token,
                json!({"supplier_id": supplier, "total_amount": 100}),
            )
            .await;
        assert_problem(status, &b, StatusCode::FORBIDDEN);
        let (status, b) = app.get(INVOICES, &token).await;
        assert_problem(status, &b, StatusCode::FORBIDDEN);
        let (status, b) = app
            .post(&pay_path(&inv), &token, json!({"amount": 10}))
            .await;
        assert_problem(status, &b, StatusCode::FORBIDDEN);
    }
    let (status, b) = app.call(Method::GET, INVOICES, None, None).await;
    assert_problem(status, &b, StatusCode::UNAUTHORIZED);
}
