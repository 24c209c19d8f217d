//! Branch isolation and role matrices, generated from tables.
//!
//! Isolation: a non-admin of branch A, in every role the route admits, aims
//! at branch B's objects (ids in the path, `branch_id` in the query or body,
//! B's ids inside bodies and push payloads): the answer is a problem body
//! (403 or 404; 400 where the id sits inside a body and the service's rule
//! is "names no record of your branch"), and nothing in the database moves.
//! A's lists, snapshot and change feed carry none of B's own records.
//!
//! Roles: every route × every role against the spec's role rules (its
//! Endpoints section and the conventions' role list): an allowed role never
//! gets 401/403, any other role gets 403 with a problem body.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp};

const ALL: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::InventoryManager,
    Role::Pharmacist,
    Role::Cashier,
    Role::Auditor,
];
const ADMIN: &[Role] = &[Role::Admin];
const MANAGERS: &[Role] = &[Role::Admin, Role::BranchManager];
const CATALOGUE: &[Role] = &[Role::Admin, Role::BranchManager, Role::InventoryManager];
const REPORTS: &[Role] = &[Role::Admin, Role::BranchManager, Role::Auditor];
const STOCK_VALUE: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::InventoryManager,
    Role::Auditor,
];
const SELLERS: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::Pharmacist,
    Role::Cashier,
];
const RX_WRITERS: &[Role] = &[Role::Admin, Role::BranchManager, Role::Pharmacist];
const QUARANTINE: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::InventoryManager,
    Role::Pharmacist,
];
const TRANSFER_READERS: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::InventoryManager,
    Role::Auditor,
];
/// Purchase orders: the buyers write, the managers decide, and the
/// auditors read too.
const PO_WRITERS: &[Role] = CATALOGUE;
const PO_READERS: &[Role] = TRANSFER_READERS;
/// Stock write-offs: the stock keepers and the pharmacists.
const WRITE_OFF: &[Role] = QUARANTINE;
/// Goods received: whoever is at the back door; auditors read them.
const RECEIVERS: &[Role] = QUARANTINE;
const RECEIPT_READERS: &[Role] = &[
    Role::Admin,
    Role::BranchManager,
    Role::InventoryManager,
    Role::Pharmacist,
    Role::Auditor,
];
/// Supplier returns: sent back by the stock keepers, read by them and the
/// auditors.
const SUPPLIER_RETURNS: &[Role] = CATALOGUE;
const SUPPLIER_RETURN_READERS: &[Role] = STOCK_VALUE;
const PUSHERS: &[Role] = &[Role::Admin, Role::Cashier];
const PURCHASERS: &[Role] = &[Role::Admin, Role::Pharmacist];
const AUDIT: &[Role] = &[Role::Admin, Role::Auditor];
const PACKS: &[Role] = &[Role::Admin, Role::InventoryManager];

/// Every table a request could write, each as a digest of its rows.
/// `skip` leaves out tables a refused push writes by design (the stored
/// rejection answers and the device's `last_seen_at`).
async fn fingerprint(app: &TestApp, skip: &[&str]) -> BTreeMap<String, String> {
    let client = app.pool.get().await.unwrap();
    let tables: Vec<String> = client
        .query(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'
               AND tablename NOT IN ('rate_limits', 'refresh_tokens', 'schema_migrations')
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .filter(|t: &String| !skip.contains(&t.as_str()))
        .collect();
    let mut out = BTreeMap::new();
    for t in tables {
        let digest: String = client
            .query_one(
                &format!(
                    "SELECT count(*)::text || ':' || md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) FROM {t} x"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        out.insert(t, digest);
    }
    out
}

/// Branch A (the callers), branch B (the target), branch C (B's transfer
/// partner) and the objects of B every case aims at.
struct World {
    app: TestApp,
    a: Uuid,
    b: Uuid,
    /// A's users, one per role: (user id, token).
    tokens: BTreeMap<&'static str, (Uuid, String)>,
    admin: String,
    /// B's objects by name.
    of_b: BTreeMap<&'static str, String>,
    /// A's objects by name.
    of_a: BTreeMap<&'static str, String>,
}

impl World {
    fn token(&self, role: Role) -> &str {
        &self.tokens[role.as_str()].1
    }

    fn b(&self, name: &str) -> &str {
        self.of_b
            .get(name)
            .unwrap_or_else(|| panic!("no B object {name}"))
    }

    fn a(&self, name: &str) -> &str {
        self.of_a
            .get(name)
            .unwrap_or_else(|| panic!("no A object {name}"))
    }
}

async fn created(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let (status, v) = app.post(path, token, body).await;
    assert!(
        status == StatusCode::CREATED || status == StatusCode::OK,
        "{path}: {status} {v}"
    );
    v
}

fn id(v: &Value) -> String {
    v["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {v}"))
        .to_owned()
}

async fn world() -> World {
    let app = TestApp::spawn().await;
    let a = app.branch("AAA").await;
    let b = app.branch("BBB").await;
    let c = app.branch("CCC").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let mut tokens = BTreeMap::new();
    for role in ALL {
        let (user, token) = app.signed_in(a, *role).await;
        tokens.insert(role.as_str(), (user.id, token));
    }
    let medicine = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin", "selling_price": 1000}),
        )
        .await;
    let m = medicine["id"].clone();
    app.receive(&admin, &m, a, 100, "2035-01-01").await;
    let batch_b = app.receive(&admin, &m, b, 100, "2035-01-01").await;

    let mut of_b = BTreeMap::new();
    let mut of_a = BTreeMap::new();
    of_a.insert("medicine", m.as_str().unwrap().to_owned());
    of_b.insert("batch", id(&batch_b));
    // Cash sessions first, so the sales count into them.
    created(&app, &admin, "/sessions/open", json!({"branch_id": a})).await;
    let session_b = created(&app, &admin, "/sessions/open", json!({"branch_id": b})).await;
    of_b.insert("session", id(&session_b));
    let sale_a = created(
        &app,
        &admin,
        "/sales",
        json!({"branch_id": a, "items": [{"medicine_id": m, "quantity": 1}], "payment_method": "cash"}),
    )
    .await;
    of_a.insert("sale", id(&sale_a));
    let sale_b = created(
        &app,
        &admin,
        "/sales",
        json!({"branch_id": b, "items": [{"medicine_id": m, "quantity": 1}], "payment_method": "cash"}),
    )
    .await;
    of_b.insert("sale", id(&sale_b));
    let rx = |branch: Uuid| {
        json!({"branch_id": branch, "patient_name": "Patient", "prescriber_name": "Dr Who",
               "items": [{"medicine_id": m, "quantity": 1}]})
    };
    of_b.insert(
        "prescription",
        id(&created(&app, &admin, "/prescriptions", rx(b)).await),
    );
    of_a.insert(
        "prescription",
        id(&created(&app, &admin, "/prescriptions", rx(a)).await),
    );
    let will_call = created(
        &app,
        &admin,
        "/dispensing/will-call",
        json!({"branch_id": b, "patient_name": "Waiting"}),
    )
    .await;
    of_b.insert("will_call", id(&will_call));
    // An approval filed by one of B's users.
    let (_, b_cashier) = app.signed_in(b, Role::Cashier).await;
    let approval = created(
        &app,
        &b_cashier,
        "/approvals",
        json!({"kind": "price_override", "reference_id": "x", "reason": "test"}),
    )
    .await;
    of_b.insert("approval", id(&approval));
    let printer = created(
        &app,
        &admin,
        "/printing/printers",
        json!({"branch_id": b, "name": "B printer"}),
    )
    .await;
    of_b.insert("printer", id(&printer));
    let template = created(
        &app,
        &admin,
        "/printing/receipt-templates",
        json!({"branch_id": b, "name": "B template"}),
    )
    .await;
    of_b.insert("template", id(&template));
    let job = created(
        &app,
        &admin,
        "/printing/print-jobs",
        json!({"branch_id": b, "reference_id": of_b["sale"]}),
    )
    .await;
    of_b.insert("print_job", id(&job));
    let supplier = app.supplier("Supplier").await;
    of_a.insert("supplier", supplier.to_string());
    let invoice = created(
        &app,
        &admin,
        "/supplier-finance/invoices",
        json!({"branch_id": b, "supplier_id": supplier, "total_amount": 5000}),
    )
    .await;
    of_b.insert("invoice", id(&invoice));
    // A supplier return of B (its debit note), and an invoice of A from
    // the same supplier that B's note must not pay.
    let batch_supplier = batch_b["supplier_id"].as_str().unwrap().to_owned();
    let supplier_return = created(
        &app,
        &admin,
        "/supplier-returns",
        json!({"branch_id": b, "supplier_id": batch_supplier, "reason": "damaged",
               "lines": [{"batch_id": id(&batch_b), "quantity": 1}]}),
    )
    .await;
    of_b.insert("supplier_return", id(&supplier_return));
    of_b.insert(
        "debit_note",
        supplier_return["debit_note_number"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    of_b.insert("batch_supplier", batch_supplier.clone());
    let invoice_a = created(
        &app,
        &admin,
        "/supplier-finance/invoices",
        json!({"branch_id": a, "supplier_id": batch_supplier, "total_amount": 5000}),
    )
    .await;
    of_a.insert("invoice", id(&invoice_a));
    let device_b = created(
        &app,
        &admin,
        "/devices",
        json!({"name": "B till", "branch_id": b}),
    )
    .await;
    of_b.insert("device", id(&device_b));
    let device_a = created(
        &app,
        &admin,
        "/devices",
        json!({"name": "A till", "branch_id": a}),
    )
    .await;
    of_a.insert("device", id(&device_a));
    let transfer = created(
        &app,
        &admin,
        "/transfers",
        json!({"medicine_id": m, "from_branch_id": b, "to_branch_id": c, "qty": 2}),
    )
    .await;
    of_b.insert("transfer", id(&transfer));
    let order_b = created(
        &app,
        &admin,
        "/purchase-orders",
        json!({"branch_id": b, "supplier_id": supplier,
               "lines": [{"medicine_id": m, "quantity": 10, "unit_cost": "100.00"}]}),
    )
    .await;
    of_b.insert("purchase_order", id(&order_b));
    let user_b = app.user(b, Role::Pharmacist).await;
    of_b.insert("user", user_b.id.to_string());
    of_b.insert("branch", b.to_string());
    let fiscal: String = {
        let client = app.pool.get().await.unwrap();
        let sale = Uuid::parse_str(&of_b["sale"]).unwrap();
        client
            .query_one(
                "SELECT id::text FROM fiscal_documents WHERE kind = 'T109' AND source_id = $1",
                &[&sale],
            )
            .await
            .unwrap()
            .get(0)
    };
    of_b.insert("fiscal_document", fiscal);
    World {
        app,
        a,
        b,
        tokens,
        admin,
        of_b,
        of_a,
    }
}

/// One isolation case: a request, the roles of A that may call the route,
/// and the statuses that count as refused.
struct Case {
    method: Method,
    path: String,
    body: Option<Value>,
    roles: &'static [Role],
    refused: &'static [u16],
}

const HIDDEN: &[u16] = &[403, 404];
/// An id of B inside a body: "names no record of your branch" may be a 400.
const REFERENCE: &[u16] = &[400, 403, 404];

fn case(method: Method, path: String, body: Option<Value>, roles: &'static [Role]) -> Case {
    Case {
        method,
        path,
        body,
        roles,
        refused: HIDDEN,
    }
}

fn isolation_cases(w: &World) -> Vec<Case> {
    let b = w.b.to_string();
    let m = w.a("medicine").to_owned();
    let mut cases = vec![
        // B's objects by id in the path.
        case(Method::GET, format!("/sales/{}", w.b("sale")), None, ALL),
        case(
            Method::GET,
            format!("/sales/{}/receipt", w.b("sale")),
            None,
            ALL,
        ),
        case(
            Method::GET,
            format!("/fiscal/documents/{}", w.b("fiscal_document")),
            None,
            REPORTS,
        ),
        case(
            Method::POST,
            format!("/fiscal/documents/{}/retry", w.b("fiscal_document")),
            None,
            MANAGERS,
        ),
        case(
            Method::GET,
            format!("/compliance/fiscal-preview/{}", w.b("sale")),
            None,
            ALL,
        ),
        case(
            Method::GET,
            format!("/prescriptions/{}", w.b("prescription")),
            None,
            ALL,
        ),
        case(
            Method::POST,
            format!("/prescriptions/{}/dispense", w.b("prescription")),
            Some(json!({"sale_id": w.a("sale")})),
            RX_WRITERS,
        ),
        case(
            Method::POST,
            format!("/prescriptions/{}/cancel", w.b("prescription")),
            None,
            RX_WRITERS,
        ),
        case(
            Method::DELETE,
            format!("/prescriptions/{}", w.b("prescription")),
            None,
            RX_WRITERS,
        ),
        case(
            Method::POST,
            format!("/dispensing/will-call/{}/pickup", w.b("will_call")),
            Some(json!({"signature_captured": true})),
            ALL,
        ),
        case(
            Method::POST,
            format!("/dispensing/will-call/{}/cancel", w.b("will_call")),
            None,
            ALL,
        ),
        case(
            Method::POST,
            format!("/approvals/{}/approve", w.b("approval")),
            None,
            MANAGERS,
        ),
        case(
            Method::POST,
            format!("/approvals/{}/reject", w.b("approval")),
            None,
            MANAGERS,
        ),
        case(
            Method::POST,
            format!("/sessions/{}/close", w.b("session")),
            Some(json!({"counted_cash": 0})),
            SELLERS,
        ),
        case(
            Method::GET,
            format!("/supplier-returns/{}", w.b("supplier_return")),
            None,
            SUPPLIER_RETURN_READERS,
        ),
        case(
            Method::POST,
            format!("/supplier-finance/invoices/{}/payments", w.b("invoice")),
            Some(json!({"amount": 1, "method": "cash"})),
            CATALOGUE,
        ),
        case(
            Method::POST,
            format!("/supplier-finance/batches/{}/quarantine", w.b("batch")),
            Some(json!({"status": "quarantined"})),
            QUARANTINE,
        ),
        case(
            Method::GET,
            format!("/transfers/{}", w.b("transfer")),
            None,
            TRANSFER_READERS,
        ),
        case(
            Method::POST,
            format!("/transfers/{}/receive", w.b("transfer")),
            None,
            CATALOGUE,
        ),
        case(
            Method::POST,
            format!("/transfers/{}/cancel", w.b("transfer")),
            None,
            CATALOGUE,
        ),
        case(
            Method::GET,
            format!("/purchase-orders/{}", w.b("purchase_order")),
            None,
            PO_READERS,
        ),
        case(
            Method::PUT,
            format!("/purchase-orders/{}", w.b("purchase_order")),
            Some(json!({"supplier_id": w.a("supplier"),
                        "lines": [{"medicine_id": m, "quantity": 1, "unit_cost": 1}]})),
            PO_WRITERS,
        ),
        case(Method::GET, format!("/users/{}", w.b("user")), None, ALL),
        case(
            Method::PUT,
            format!("/users/{}", w.b("user")),
            Some(json!({"full_name": "Taken over"})),
            MANAGERS,
        ),
        case(
            Method::DELETE,
            format!("/users/{}", w.b("user")),
            None,
            MANAGERS,
        ),
        case(Method::GET, format!("/branches/{b}"), None, ALL),
        case(
            Method::POST,
            format!("/devices/{}/revoke", w.b("device")),
            None,
            MANAGERS,
        ),
    ];
    for (step, roles) in [
        ("submit", PO_WRITERS),
        ("approve", MANAGERS),
        ("reject", MANAGERS),
        ("send", PO_WRITERS),
        ("close", PO_WRITERS),
        ("cancel", PO_WRITERS),
    ] {
        cases.push(case(
            Method::POST,
            format!("/purchase-orders/{}/{step}", w.b("purchase_order")),
            None,
            roles,
        ));
    }
    // `branch_id` of B in the query.
    for path in [
        "/sales",
        "/sales/verify-chain",
        "/dashboard/summary",
        "/reports/sales",
        "/reports/sales/by-pharmacist",
        "/reports/inventory",
        "/reports/purchases",
        "/reports/vat",
        "/reports/stock-valuation",
        "/reports/margins",
        "/goods-received",
        "/audit-log",
        "/fiscal/documents",
        "/fiscal/summary",
        "/compliance/devices",
        "/compliance/prescription-book",
        "/compliance/classified-drugs-book",
        "/printing/printers",
        "/printing/receipt-templates",
        "/printing/print-jobs",
        "/prescriptions",
        "/dispensing/will-call",
        "/approvals",
        "/supplier-finance/invoices",
        "/supplier-finance/reorder-suggestions",
        "/transfers",
        "/medicines",
        "/sessions/current",
        "/users",
        "/returns",
        "/stock/write-offs",
        "/stock/expired",
        "/compliance/destruction-register",
        "/purchase-orders",
        "/supplier-returns",
        "/compliance/supplier-returns",
    ] {
        let roles: &'static [Role] = match path {
            "/purchase-orders" => PO_READERS,
            "/sales/verify-chain" => REPORTS,
            "/audit-log" => AUDIT,
            p if p.starts_with("/fiscal") => REPORTS,
            p if p.starts_with("/reports") => REPORTS,
            "/supplier-finance/invoices" => CATALOGUE,
            "/supplier-finance/reorder-suggestions" => QUARANTINE,
            "/transfers" => TRANSFER_READERS,
            "/supplier-returns" => SUPPLIER_RETURN_READERS,
            "/users" => MANAGERS,
            _ => ALL,
        };
        cases.push(case(
            Method::GET,
            format!("{path}?branch_id={b}"),
            None,
            roles,
        ));
    }
    cases.push(case(
        Method::GET,
        format!("/medicines/{m}?branch_id={b}"),
        None,
        ALL,
    ));
    // `branch_id` of B in the body.
    let item = json!([{"medicine_id": m, "quantity": 1}]);
    let bodies: Vec<(&str, Value, &'static [Role])> = vec![
        (
            "/sales",
            json!({"branch_id": b, "items": item, "payment_method": "cash"}),
            SELLERS,
        ),
        (
            "/stockcount/submit",
            json!({"branch_id": b, "items": [{"medicine_id": m, "counted_quantity": 0}]}),
            MANAGERS,
        ),
        ("/sessions/open", json!({"branch_id": b}), SELLERS),
        (
            "/dispensing/will-call",
            json!({"branch_id": b, "patient_name": "X"}),
            ALL,
        ),
        (
            "/prescriptions",
            json!({"branch_id": b, "patient_name": "X", "prescriber_name": "Dr", "items": item}),
            RX_WRITERS,
        ),
        (
            "/approvals",
            json!({"branch_id": b, "kind": "price_override", "reference_id": "r"}),
            ALL,
        ),
        (
            "/printing/print-jobs",
            json!({"branch_id": b, "reference_id": "r"}),
            ALL,
        ),
        (
            "/supplier-finance/invoices",
            json!({"branch_id": b, "supplier_id": w.a("supplier"), "total_amount": 10}),
            CATALOGUE,
        ),
        (
            "/goods-received",
            json!({"branch_id": b, "supplier_id": w.a("supplier"), "delivery_reference": "D",
                   "lines": [{"medicine_id": m, "batch_number": "X-1", "expiry_date": "2035-01-01",
                              "quantity_received": 5, "unit_cost": 10}]}),
            RECEIVERS,
        ),
        (
            "/purchases",
            json!({"branch_id": b, "supplier_id": w.a("supplier"), "medicine_id": m,
                   "batch_number": "X-1", "expiry_date": "2035-01-01", "quantity": 5, "unit_cost": 10}),
            PURCHASERS,
        ),
        (
            "/devices",
            json!({"branch_id": b, "name": "Rogue till"}),
            MANAGERS,
        ),
        (
            "/users",
            json!({"branch_id": b, "email": "rogue@test.pharmacy", "password": "long-enough-1",
                   "full_name": "Rogue", "role": "cashier"}),
            MANAGERS,
        ),
        (
            "/transfers",
            json!({"medicine_id": m, "from_branch_id": b, "to_branch_id": w.a.to_string(), "qty": 1}),
            CATALOGUE,
        ),
        (
            "/stock/write-offs",
            json!({"branch_id": b, "reason": "damaged",
                   "items": [{"batch_id": w.b("batch"), "quantity": 1}]}),
            WRITE_OFF,
        ),
        (
            "/purchase-orders",
            json!({"branch_id": b, "supplier_id": w.a("supplier"),
                   "lines": [{"medicine_id": m, "quantity": 1, "unit_cost": 1}]}),
            PO_WRITERS,
        ),
        (
            "/purchase-orders/from-reorder",
            json!({"branch_id": b, "supplier_id": w.a("supplier")}),
            PO_WRITERS,
        ),
        (
            "/supplier-returns",
            json!({"branch_id": b, "supplier_id": w.b("batch_supplier"), "reason": "damaged",
                   "lines": [{"batch_id": w.b("batch"), "quantity": 1}]}),
            SUPPLIER_RETURNS,
        ),
    ];
    for (path, body, roles) in bodies {
        cases.push(case(Method::POST, path.to_owned(), Some(body), roles));
    }
    // B's sale taken back, and its returns read.
    cases.push(case(
        Method::POST,
        format!("/sales/{}/returns", w.b("sale")),
        Some(json!({"items": [{"sale_item_id": Uuid::now_v7(), "quantity": 1}], "reason": "r"})),
        SELLERS,
    ));
    cases.push(case(
        Method::GET,
        format!("/sales/{}/returns", w.b("sale")),
        None,
        ALL,
    ));
    // B's ids inside bodies.
    let references: Vec<(Method, String, Value, &'static [Role])> = vec![
        (
            Method::POST,
            "/stock/write-offs".into(),
            json!({"reason": "damaged", "items": [{"batch_id": w.b("batch"), "quantity": 1}]}),
            WRITE_OFF,
        ),
        (
            Method::POST,
            "/supplier-returns".into(),
            json!({"supplier_id": w.b("batch_supplier"), "reason": "damaged",
                   "lines": [{"batch_id": w.b("batch"), "quantity": 1}]}),
            SUPPLIER_RETURNS,
        ),
        (
            Method::POST,
            format!("/supplier-finance/invoices/{}/payments", w.a("invoice")),
            json!({"amount": 1, "method": "debit_note", "reference": w.b("debit_note")}),
            CATALOGUE,
        ),
        (
            Method::POST,
            "/sales".into(),
            json!({"items": item, "payment_method": "cash", "prescription_id": w.b("prescription")}),
            SELLERS,
        ),
        (
            Method::POST,
            "/dispensing/will-call".into(),
            json!({"patient_name": "X", "prescription_id": w.b("prescription")}),
            ALL,
        ),
        (
            Method::POST,
            "/dispensing/will-call".into(),
            json!({"patient_name": "X", "sale_id": w.b("sale")}),
            ALL,
        ),
        (
            Method::POST,
            format!("/prescriptions/{}/dispense", w.a("prescription")),
            json!({"sale_id": w.b("sale")}),
            RX_WRITERS,
        ),
        (
            Method::POST,
            "/printing/print-jobs".into(),
            json!({"reference_id": "r", "reprint_of": w.b("print_job")}),
            ALL,
        ),
    ];
    for (method, path, body, roles) in references {
        cases.push(Case {
            method,
            path,
            body: Some(body),
            roles,
            refused: REFERENCE,
        });
    }
    cases
}

#[tokio::test]
async fn a_branch_user_cannot_reach_another_branchs_objects() {
    let w = world().await;
    let cases = isolation_cases(&w);
    let mut checked = 0;
    let mut leaks = Vec::new();
    for c in &cases {
        for role in c.roles.iter().filter(|r| **r != Role::Admin) {
            let before = fingerprint(&w.app, &[]).await;
            let (status, body) = w
                .app
                .call(
                    c.method.clone(),
                    &c.path,
                    Some(w.token(*role)),
                    c.body.clone(),
                )
                .await;
            let after = fingerprint(&w.app, &[]).await;
            let what = format!("{} {} as {}", c.method, c.path, role.as_str());
            if !c.refused.contains(&status.as_u16()) {
                leaks.push(format!("{what}: {status} {body}"));
            } else if !body["detail"].is_string() {
                leaks.push(format!("{what}: no problem body: {body}"));
            }
            if before != after {
                let moved: Vec<&String> = before
                    .keys()
                    .filter(|k| before.get(*k) != after.get(*k))
                    .collect();
                leaks.push(format!("{what}: changed {moved:?}"));
            }
            checked += 1;
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
    eprintln!("isolation: {checked} cross-branch calls refused, nothing changed");
    // Still there and untouched for their own branch's admin view.
    let (status, _) = w
        .app
        .get(&format!("/sales/{}", w.b("sale")), &w.admin)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn pushes_cannot_reach_another_branch() {
    let w = world().await;
    let cashier = w.token(Role::Cashier);
    let m = w.a("medicine");
    let sale = |cmid: &str, extra: Value| {
        let mut payload =
            json!({"items": [{"medicine_id": m, "quantity": 1}], "payment_method": "cash"});
        for (k, v) in extra.as_object().unwrap() {
            payload[k] = v.clone();
        }
        json!({"client_mutation_id": cmid, "entity": "sale", "op": "create", "payload": payload})
    };
    // Another branch's device: refused whole.
    let before = fingerprint(&w.app, &[]).await;
    let (status, body) = w
        .app
        .post(
            "/sync/push",
            cashier,
            json!({"device_id": w.b("device"), "changes": [sale("x-1", json!({}))]}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["detail"].is_string());
    assert_eq!(
        before,
        fingerprint(&w.app, &[]).await,
        "a refused push wrote"
    );
    // Own device, payloads naming B: each change is rejected, nothing applied.
    let changes = vec![
        sale("x-2", json!({"branch_id": w.b.to_string()})),
        sale("x-3", json!({"prescription_id": w.b("prescription")})),
    ];
    let skip = &["push_mutations", "devices"];
    let before = fingerprint(&w.app, skip).await;
    let (status, body) = w
        .app
        .post(
            "/sync/push",
            cashier,
            json!({"device_id": w.a("device"), "changes": changes}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["accepted"], json!([]), "{body}");
    let rejected = body["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 2, "{body}");
    for r in rejected {
        assert!(
            ["forbidden", "not_found", "validation_failed"].contains(&r["code"].as_str().unwrap()),
            "{r}"
        );
    }
    assert_eq!(
        before,
        fingerprint(&w.app, skip).await,
        "a rejected change wrote"
    );
    w.app.assert_invariants().await;
}

/// What a branch caller reads carries none of another branch's own records.
#[tokio::test]
async fn a_branch_users_reads_carry_nothing_of_another_branch() {
    let w = world().await;
    let secrets: Vec<(&str, String)> = [
        "sale",
        "prescription",
        "will_call",
        "approval",
        "printer",
        "template",
        "print_job",
        "invoice",
        "device",
        "transfer",
        "user",
        "batch",
        "session",
        "purchase_order",
    ]
    .iter()
    .map(|k| (*k, w.b(k).to_owned()))
    .collect();
    let reads: Vec<(&str, &'static [Role])> = vec![
        ("/sales", ALL),
        ("/prescriptions", ALL),
        ("/dispensing/will-call", ALL),
        ("/approvals", ALL),
        ("/printing/printers", ALL),
        ("/printing/receipt-templates", ALL),
        ("/printing/print-jobs", ALL),
        ("/supplier-finance/invoices", CATALOGUE),
        ("/supplier-finance/reorder-suggestions", QUARANTINE),
        ("/compliance/devices", ALL),
        ("/compliance/prescription-book", ALL),
        ("/compliance/classified-drugs-book", ALL),
        ("/transfers", TRANSFER_READERS),
        ("/purchase-orders", PO_READERS),
        ("/users", MANAGERS),
        ("/branches", ALL),
        ("/sessions/current", ALL),
        ("/reports/sales", REPORTS),
        ("/reports/sales/by-pharmacist", REPORTS),
        ("/reports/inventory", REPORTS),
        ("/reports/purchases", REPORTS),
        ("/reports/vat", REPORTS),
        ("/reports/stock-valuation", STOCK_VALUE),
        ("/reports/margins", STOCK_VALUE),
        ("/goods-received", RECEIPT_READERS),
        ("/dashboard/branch-comparison", ALL),
        ("/dashboard/summary", ALL),
        ("/sync/snapshot", ALL),
        ("/sync/changes?limit=5000", ALL),
        ("/audit-log", AUDIT),
    ];
    let mut leaks = Vec::new();
    let mut checked = 0;
    for (path, roles) in reads {
        for role in roles.iter().filter(|r| **r != Role::Admin) {
            let (status, body) = w.app.get(path, w.token(*role)).await;
            assert!(
                status.is_success(),
                "GET {path} as {}: {status} {body}",
                role.as_str()
            );
            let text = body.to_string();
            for (what, id) in &secrets {
                if text.contains(id.as_str()) {
                    leaks.push(format!("GET {path} as {} shows B's {what}", role.as_str()));
                }
            }
            if text.contains(&w.b.to_string()) {
                leaks.push(format!("GET {path} as {} names branch B", role.as_str()));
            }
            checked += 1;
        }
    }
    assert!(
        leaks.is_empty(),
        "{} leaks:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
    eprintln!("isolation: {checked} reads carry nothing of branch B");
}

/// One role-matrix row: the request and the roles the spec admits.
struct Rule {
    method: Method,
    path: &'static str,
    body: Option<Value>,
    allowed: &'static [Role],
}

fn rule(method: Method, path: &'static str, body: Option<Value>, allowed: &'static [Role]) -> Rule {
    Rule {
        method,
        path,
        body,
        allowed,
    }
}

/// Every route under `/api/v1` that takes a token. Ids are `{rand}` (names
/// nothing, so an allowed role gets 404 and nothing is touched), `{me}`
/// (the caller), `{branch}` (the caller's branch) or `{medicine}`.
fn role_rules() -> Vec<Rule> {
    use Method as M;
    let none = || None;
    let b = |v: Value| Some(v);
    vec![
        rule(M::GET, "/auth/me", none(), ALL),
        rule(M::GET, "/branches", none(), ALL),
        rule(M::GET, "/branches/{branch}", none(), ALL),
        rule(
            M::POST,
            "/branches",
            b(json!({"code": "R{n}", "name": "Role test"})),
            ADMIN,
        ),
        rule(M::PUT, "/branches/{rand}", b(json!({"name": "X"})), ADMIN),
        rule(M::DELETE, "/branches/{rand}", none(), ADMIN),
        rule(M::GET, "/users", none(), MANAGERS),
        rule(M::GET, "/users/{me}", none(), ALL),
        rule(
            M::POST,
            "/users",
            b(
                json!({"email": "u{n}@test.pharmacy", "password": "long-enough-1", "full_name": "U",
                     "role": "cashier", "branch_id": "{branch}"}),
            ),
            MANAGERS,
        ),
        rule(
            M::PUT,
            "/users/{rand}",
            b(json!({"full_name": "X"})),
            MANAGERS,
        ),
        rule(M::DELETE, "/users/{rand}", none(), MANAGERS),
        rule(M::POST, "/sessions/open", none(), SELLERS),
        rule(M::GET, "/sessions/current", none(), ALL),
        rule(
            M::POST,
            "/sessions/{rand}/close",
            b(json!({"counted_cash": 0})),
            SELLERS,
        ),
        rule(M::GET, "/medicines", none(), ALL),
        rule(M::GET, "/medicines/{medicine}", none(), ALL),
        rule(
            M::POST,
            "/medicines",
            b(json!({"name": "M{n}", "selling_price": 10})),
            CATALOGUE,
        ),
        rule(
            M::PUT,
            "/medicines/{rand}",
            b(json!({"name": "X"})),
            CATALOGUE,
        ),
        rule(M::DELETE, "/medicines/{rand}", none(), CATALOGUE),
        rule(M::GET, "/medicines/{medicine}/packs", none(), ALL),
        rule(
            M::POST,
            "/medicines/{rand}/packs",
            b(json!({"name": "box", "units": 10})),
            PACKS,
        ),
        rule(
            M::PUT,
            "/medicines/{rand}/packs/{rand}",
            b(json!({"name": "X"})),
            PACKS,
        ),
        rule(M::DELETE, "/medicines/{rand}/packs/{rand}", none(), PACKS),
        rule(M::GET, "/scan", none(), ALL),
        rule(
            M::POST,
            "/goods-received",
            b(
                json!({"supplier_id": "{rand}", "delivery_reference": "D", "lines": [
                {"medicine_id": "{medicine}", "batch_number": "B", "expiry_date": "2035-01-01",
                 "quantity_received": 1, "unit_cost": 1}]}),
            ),
            RECEIVERS,
        ),
        rule(
            M::POST,
            "/goods-received/{rand}/post",
            b(json!({})),
            RECEIVERS,
        ),
        rule(M::GET, "/goods-received", none(), RECEIPT_READERS),
        rule(
            M::POST,
            "/supplier-finance/invoices/{rand}/release",
            b(json!({"reason": "agreed"})),
            MANAGERS,
        ),
        rule(M::GET, "/goods-received/{rand}", none(), RECEIPT_READERS),
        rule(
            M::PUT,
            "/goods-received/{rand}",
            b(
                json!({"supplier_id": "{rand}", "delivery_reference": "D", "lines": [
                {"medicine_id": "{medicine}", "batch_number": "B", "expiry_date": "2035-01-01",
                 "quantity_received": 1, "unit_cost": 1}]}),
            ),
            RECEIVERS,
        ),
        rule(M::DELETE, "/goods-received/{rand}", none(), RECEIVERS),
        rule(
            M::POST,
            "/purchases",
            b(
                json!({"supplier_id": "{rand}", "medicine_id": "{medicine}", "branch_id": "{branch}",
                     "batch_number": "B", "expiry_date": "2035-01-01", "quantity": 1, "unit_cost": 1}),
            ),
            PURCHASERS,
        ),
        rule(M::GET, "/customers", none(), ALL),
        rule(M::GET, "/customers/{rand}", none(), ALL),
        rule(M::POST, "/customers", b(json!({"name": "C{n}"})), SELLERS),
        rule(
            M::PUT,
            "/customers/{rand}",
            b(json!({"name": "X"})),
            SELLERS,
        ),
        rule(M::DELETE, "/customers/{rand}", none(), SELLERS),
        rule(M::GET, "/customers/{rand}/ledger", none(), ALL),
        rule(
            M::POST,
            "/customers/{rand}/payments",
            b(json!({"amount": 1})),
            SELLERS,
        ),
        rule(M::GET, "/suppliers", none(), ALL),
        rule(M::GET, "/suppliers/{rand}", none(), ALL),
        rule(M::POST, "/suppliers", b(json!({"name": "S{n}"})), CATALOGUE),
        rule(
            M::PUT,
            "/suppliers/{rand}",
            b(json!({"name": "X"})),
            CATALOGUE,
        ),
        rule(M::DELETE, "/suppliers/{rand}", none(), CATALOGUE),
        rule(
            M::POST,
            "/sales",
            b(
                json!({"items": [{"medicine_id": "{rand}", "quantity": 1}], "payment_method": "cash"}),
            ),
            SELLERS,
        ),
        rule(M::GET, "/sales", none(), ALL),
        rule(M::GET, "/sales/{rand}", none(), ALL),
        rule(M::GET, "/sales/{rand}/receipt", none(), ALL),
        rule(M::GET, "/sales/verify-chain", none(), REPORTS),
        // Returns: anyone who sells takes back (a cashier's waits for an
        // approval); anyone reads them, within the branch.
        rule(
            M::POST,
            "/sales/{rand}/returns",
            b(json!({"items": [{"sale_item_id": "{rand}", "quantity": 1}], "reason": "r"})),
            SELLERS,
        ),
        rule(M::GET, "/sales/{rand}/returns", none(), ALL),
        rule(M::GET, "/returns", none(), ALL),
        rule(M::GET, "/returns/{rand}", none(), ALL),
        rule(M::GET, "/returns/{rand}/receipt", none(), ALL),
        rule(
            M::GET,
            "/compliance/fiscal-preview/credit-notes/{rand}",
            none(),
            ALL,
        ),
        rule(
            M::POST,
            "/stock/write-offs",
            b(json!({"reason": "damaged", "items": [{"batch_id": "{rand}", "quantity": 1}]})),
            WRITE_OFF,
        ),
        rule(M::GET, "/stock/write-offs", none(), ALL),
        rule(M::GET, "/stock/write-offs/{rand}", none(), ALL),
        rule(M::GET, "/stock/expired", none(), ALL),
        rule(M::GET, "/compliance/destruction-register", none(), ALL),
        rule(
            M::POST,
            "/supplier-returns",
            b(json!({"supplier_id": "{rand}", "reason": "expired",
                     "lines": [{"batch_id": "{rand}", "quantity": 1}]})),
            SUPPLIER_RETURNS,
        ),
        rule(M::GET, "/supplier-returns", none(), SUPPLIER_RETURN_READERS),
        rule(
            M::GET,
            "/supplier-returns/{rand}",
            none(),
            SUPPLIER_RETURN_READERS,
        ),
        rule(M::GET, "/compliance/supplier-returns", none(), ALL),
        rule(
            M::POST,
            "/coupons",
            b(json!({"code": "C{n}", "discount_type": "fixed", "discount_value": 1})),
            MANAGERS,
        ),
        rule(M::GET, "/coupons", none(), ALL),
        rule(
            M::POST,
            "/stockcount/submit",
            b(json!({"items": [{"medicine_id": "{rand}", "counted_quantity": 1}]})),
            MANAGERS,
        ),
        rule(
            M::POST,
            "/transfers",
            b(
                json!({"medicine_id": "{rand}", "from_branch_id": "{branch}", "to_branch_id": "{rand}", "qty": 1}),
            ),
            CATALOGUE,
        ),
        rule(
            M::POST,
            "/purchase-orders",
            b(json!({"supplier_id": "{rand}",
                     "lines": [{"medicine_id": "{medicine}", "quantity": 1, "unit_cost": 1}]})),
            PO_WRITERS,
        ),
        rule(
            M::POST,
            "/purchase-orders/from-reorder",
            b(json!({"supplier_id": "{rand}"})),
            PO_WRITERS,
        ),
        rule(M::GET, "/purchase-orders", none(), PO_READERS),
        rule(M::GET, "/purchase-orders/{rand}", none(), PO_READERS),
        rule(
            M::PUT,
            "/purchase-orders/{rand}",
            b(json!({"supplier_id": "{rand}",
                     "lines": [{"medicine_id": "{medicine}", "quantity": 1, "unit_cost": 1}]})),
            PO_WRITERS,
        ),
        rule(
            M::POST,
            "/purchase-orders/{rand}/submit",
            none(),
            PO_WRITERS,
        ),
        rule(M::POST, "/purchase-orders/{rand}/approve", none(), MANAGERS),
        rule(M::POST, "/purchase-orders/{rand}/reject", none(), MANAGERS),
        rule(M::POST, "/purchase-orders/{rand}/send", none(), PO_WRITERS),
        rule(M::POST, "/purchase-orders/{rand}/close", none(), PO_WRITERS),
        rule(
            M::POST,
            "/purchase-orders/{rand}/cancel",
            none(),
            PO_WRITERS,
        ),
        rule(M::GET, "/transfers", none(), TRANSFER_READERS),
        rule(M::GET, "/transfers/{rand}", none(), TRANSFER_READERS),
        rule(M::POST, "/transfers/{rand}/receive", none(), CATALOGUE),
        rule(M::POST, "/transfers/{rand}/cancel", none(), CATALOGUE),
        rule(
            M::POST,
            "/supplier-finance/batches/{rand}/quarantine",
            b(json!({"status": "quarantined"})),
            QUARANTINE,
        ),
        rule(
            M::GET,
            "/supplier-finance/reorder-suggestions",
            none(),
            QUARANTINE,
        ),
        rule(
            M::POST,
            "/supplier-finance/invoices",
            b(json!({"supplier_id": "{rand}", "total_amount": 10})),
            CATALOGUE,
        ),
        rule(M::GET, "/supplier-finance/invoices", none(), CATALOGUE),
        rule(
            M::POST,
            "/supplier-finance/invoices/{rand}/payments",
            b(json!({"amount": 1})),
            CATALOGUE,
        ),
        rule(
            M::POST,
            "/sync/push",
            b(json!({"device_id": "{rand}", "changes": []})),
            PUSHERS,
        ),
        rule(M::GET, "/sync/snapshot", none(), ALL),
        rule(M::GET, "/sync/changes", none(), ALL),
        rule(M::GET, "/sync/conflicts", none(), ADMIN),
        rule(
            M::POST,
            "/sync/conflicts/{rand}/resolve",
            b(json!({"strategy": "server"})),
            ADMIN,
        ),
        rule(M::GET, "/printing/printers", none(), ALL),
        rule(
            M::POST,
            "/printing/printers",
            b(json!({"name": "P{n}"})),
            ADMIN,
        ),
        rule(
            M::PUT,
            "/printing/printers/{rand}",
            b(json!({"name": "X"})),
            ADMIN,
        ),
        rule(M::DELETE, "/printing/printers/{rand}", none(), ADMIN),
        rule(M::GET, "/printing/receipt-templates", none(), ALL),
        rule(
            M::POST,
            "/printing/receipt-templates",
            b(json!({"name": "T{n}"})),
            ADMIN,
        ),
        rule(
            M::PUT,
            "/printing/receipt-templates/{rand}",
            b(json!({"name": "X"})),
            ADMIN,
        ),
        rule(
            M::DELETE,
            "/printing/receipt-templates/{rand}",
            none(),
            ADMIN,
        ),
        rule(
            M::POST,
            "/printing/print-jobs",
            b(json!({"reference_id": "r{n}"})),
            ALL,
        ),
        rule(M::GET, "/printing/print-jobs", none(), ALL),
        rule(M::GET, "/settings", none(), ALL),
        rule(
            M::PUT,
            "/settings",
            b(json!({"receipt_footer": "Thanks"})),
            ADMIN,
        ),
        rule(M::GET, "/currencies", none(), ALL),
        rule(
            M::POST,
            "/currency/rates",
            b(json!({"currency_code": "USD", "rate": 3700})),
            ADMIN,
        ),
        rule(M::GET, "/currency/branch", none(), ALL),
        rule(M::GET, "/audit-log", none(), AUDIT),
        rule(M::GET, "/fiscal/documents", none(), REPORTS),
        rule(M::GET, "/fiscal/documents/{rand}", none(), REPORTS),
        rule(M::GET, "/fiscal/summary", none(), REPORTS),
        rule(M::POST, "/fiscal/documents/{rand}/retry", none(), MANAGERS),
        rule(M::GET, "/ops/actors", none(), ADMIN),
        rule(M::GET, "/ops/actors/branches/{branch}", none(), ADMIN),
        rule(
            M::PUT,
            "/ops/actors/branches/{rand}",
            b(json!({"mailbox": 8})),
            ADMIN,
        ),
        rule(M::DELETE, "/ops/actors/branches/{rand}", none(), ADMIN),
        rule(
            M::POST,
            "/prescriptions",
            b(json!({"patient_name": "P", "prescriber_name": "Dr",
                     "items": [{"medicine_id": "{rand}", "quantity": 1}]})),
            RX_WRITERS,
        ),
        rule(M::GET, "/prescriptions", none(), ALL),
        rule(M::GET, "/prescriptions/{rand}", none(), ALL),
        rule(
            M::POST,
            "/prescriptions/{rand}/dispense",
            b(json!({"sale_id": "{rand}"})),
            RX_WRITERS,
        ),
        rule(M::POST, "/prescriptions/{rand}/cancel", none(), RX_WRITERS),
        rule(M::DELETE, "/prescriptions/{rand}", none(), RX_WRITERS),
        rule(
            M::POST,
            "/dispensing/will-call",
            b(json!({"patient_name": "W{n}"})),
            ALL,
        ),
        rule(M::GET, "/dispensing/will-call", none(), ALL),
        rule(M::POST, "/dispensing/will-call/{rand}/pickup", none(), ALL),
        rule(M::POST, "/dispensing/will-call/{rand}/cancel", none(), ALL),
        rule(
            M::POST,
            "/approvals",
            b(json!({"kind": "price_override", "reference_id": "r{n}"})),
            ALL,
        ),
        rule(M::GET, "/approvals", none(), ALL),
        rule(M::POST, "/approvals/{rand}/approve", none(), MANAGERS),
        rule(M::POST, "/approvals/{rand}/reject", none(), MANAGERS),
        rule(M::POST, "/devices", b(json!({"name": "D{n}"})), MANAGERS),
        rule(M::POST, "/devices/{rand}/revoke", none(), MANAGERS),
        rule(M::GET, "/compliance/devices", none(), ALL),
        rule(M::GET, "/compliance/prescription-book", none(), ALL),
        rule(M::GET, "/compliance/classified-drugs-book", none(), ALL),
        rule(M::GET, "/compliance/fiscal-preview/{rand}", none(), ALL),
        rule(M::GET, "/dashboard/summary", none(), ALL),
        rule(M::GET, "/dashboard/branch-comparison", none(), ALL),
        rule(M::GET, "/reports/sales", none(), REPORTS),
        rule(M::GET, "/reports/sales/by-pharmacist", none(), REPORTS),
        rule(M::GET, "/reports/inventory", none(), REPORTS),
        rule(M::GET, "/reports/purchases", none(), REPORTS),
        rule(M::GET, "/reports/vat", none(), REPORTS),
        rule(M::GET, "/reports/stock-valuation", none(), STOCK_VALUE),
        rule(M::GET, "/reports/margins", none(), STOCK_VALUE),
        // Every signed-in user changes its own password (a wrong current
        // one here: 400, nothing changes).
        rule(
            M::POST,
            "/auth/password",
            b(json!({"current_password": "not-the-password", "new_password": "long-enough-2"})),
            ALL,
        ),
        // Last: logging out ends the caller's token for every later rule.
        rule(M::POST, "/auth/logout", none(), ALL),
    ]
}

fn fill(template: &str, me: Uuid, branch: Uuid, medicine: &str, n: usize) -> String {
    template
        .replace("{rand}", &Uuid::now_v7().to_string())
        .replace("{me}", &me.to_string())
        .replace("{branch}", &branch.to_string())
        .replace("{medicine}", medicine)
        .replace("{n}", &n.to_string())
}

fn fill_value(v: &Value, me: Uuid, branch: Uuid, medicine: &str, n: usize) -> Value {
    match v {
        Value::String(s) => Value::String(fill(s, me, branch, medicine, n)),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| fill_value(x, me, branch, medicine, n))
                .collect(),
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), fill_value(x, me, branch, medicine, n)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[tokio::test]
async fn every_route_admits_exactly_the_spec_roles() {
    let app = TestApp::spawn().await;
    let branch = app.branch("AAA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let medicine = app
        .medicine(&admin, json!({"name": "Role test", "selling_price": 10}))
        .await;
    let medicine = medicine["id"].as_str().unwrap().to_owned();
    let mut callers = Vec::new();
    for role in ALL {
        let (user, token) = app.signed_in(branch, *role).await;
        callers.push((*role, user.id, token));
    }
    let rules = role_rules();
    // Every documented route with a token is in the table.
    let doc = pharmacy::http::openapi::document();
    let mut documented = 0;
    for (path, item) in &doc.paths.paths {
        for (method, op) in [
            ("GET", &item.get),
            ("POST", &item.post),
            ("PUT", &item.put),
            ("DELETE", &item.delete),
        ] {
            let Some(op) = op else { continue };
            if op.security.as_ref().is_none_or(|s| s.is_empty()) {
                continue;
            }
            documented += 1;
            let local = path.trim_start_matches("/api/v1");
            let covered = rules.iter().any(|r| {
                r.method.as_str() == method
                    && r.path.split('/').count() == local.split('/').count()
                    && r.path
                        .split('/')
                        .zip(local.split('/'))
                        .all(|(a, b)| a == b || (a.starts_with('{') && b.starts_with('{')))
            });
            assert!(covered, "{method} {path} is missing from the role table");
        }
    }
    let mut wrong = Vec::new();
    let mut calls = 0;
    for (n, r) in rules.iter().enumerate() {
        for (role, me, token) in &callers {
            let path = fill(r.path, *me, branch, &medicine, n);
            let body = r
                .body
                .as_ref()
                .map(|b| fill_value(b, *me, branch, &medicine, n));
            let (status, answer) = app.call(r.method.clone(), &path, Some(token), body).await;
            calls += 1;
            let allowed = r.allowed.contains(role);
            let what = format!(
                "{} {} as {}: {status} {answer}",
                r.method,
                r.path,
                role.as_str()
            );
            if status.is_server_error() || status == StatusCode::UNAUTHORIZED {
                wrong.push(format!("{what} (never expected)"));
            } else if allowed && status == StatusCode::FORBIDDEN {
                wrong.push(format!("{what} (role should be allowed)"));
            } else if !allowed && status != StatusCode::FORBIDDEN {
                wrong.push(format!("{what} (role should get 403)"));
            } else if !allowed && !answer["detail"].is_string() {
                wrong.push(format!("{what} (403 without detail)"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} mismatches:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    eprintln!(
        "role matrix: {} routes ({documented} documented with a token) x {} roles = {calls} calls",
        rules.len(),
        ALL.len()
    );
    app.assert_invariants().await;
}
