use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A branch with an admin and a cashier signed in.
struct Desk {
    app: TestApp,
    branch: Uuid,
    admin: String,
    cashier: String,
}

impl Desk {
    async fn open() -> Desk {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        Desk {
            app,
            branch,
            admin,
            cashier,
        }
    }

    async fn printer(&self, body: Value) -> Value {
        let (status, p) = self.app.post("/printing/printers", &self.admin, body).await;
        assert_eq!(status, StatusCode::CREATED, "{p}");
        p
    }

    async fn template(&self, body: Value) -> Value {
        let (status, t) = self
            .app
            .post("/printing/receipt-templates", &self.admin, body)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{t}");
        t
    }

    async fn put(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.app
            .call(Method::PUT, path, Some(token), Some(body))
            .await
    }

    async fn delete(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.app.call(Method::DELETE, path, Some(token), None).await
    }

    async fn names(&self, path: &str) -> Vec<(String, bool)> {
        let (status, list) = self.app.get(path, &self.cashier).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["is_default"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    async fn scalar(&self, sql: &str, branch: Uuid) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[&branch]).await.unwrap().get(0)
    }

    async fn defaults(&self, table: &str) -> i64 {
        let sql = format!(
            "SELECT count(*) FROM {table} WHERE branch_id = $1 AND is_default AND NOT is_deleted"
        );
        self.scalar(&sql, self.branch).await
    }
}

fn printer_path(p: &Value) -> String {
    format!("/printing/printers/{}", p["id"].as_str().unwrap())
}

fn template_path(t: &Value) -> String {
    format!("/printing/receipt-templates/{}", t["id"].as_str().unwrap())
}

fn pairs(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    v.iter().map(|(n, d)| ((*n).to_owned(), *d)).collect()
}

#[tokio::test]
async fn the_first_printer_becomes_default_and_a_new_default_clears_the_old() {
    let desk = Desk::open().await;
    let zeta = desk.printer(json!({"name": "Zeta"})).await;
    assert_eq!(zeta["is_default"], true, "the first printer is the default");
    assert_eq!(zeta["kind"], "receipt_80mm");
    assert_eq!(zeta["copies"], 1);
    assert_eq!(zeta["connection"], "browser");
    assert_eq!(zeta["auto_print"], false);
    assert_eq!(zeta["kick_drawer"], false);
    assert_eq!(zeta["branch_id"], desk.branch.to_string());
    assert!(zeta["created_at"].as_str().unwrap().ends_with('Z'));
    let alpha = desk
        .printer(
            json!({"name": "Alpha", "kind": "a4_invoice", "copies": 2, "is_default": false,
                        "auto_print": true, "kick_drawer": 1, "connection": "browser"}),
        )
        .await;
    assert_eq!(alpha["is_default"], false);
    assert_eq!(alpha["kick_drawer"], true);
    assert_eq!(
        desk.names("/printing/printers").await,
        pairs(&[("Zeta", true), ("Alpha", false)])
    );
    desk.printer(json!({"name": "Beta", "is_default": true}))
        .await;
    assert_eq!(
        desk.names("/printing/printers").await,
        pairs(&[("Beta", true), ("Alpha", false), ("Zeta", false)])
    );
    // Making an existing printer default by update clears the old one too.
    let (status, a) = desk
        .put(
            &printer_path(&alpha),
            &desk.admin,
            json!({"is_default": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert_eq!(a["is_default"], true);
    assert_eq!(
        desk.names("/printing/printers").await,
        pairs(&[("Alpha", true), ("Beta", false), ("Zeta", false)])
    );
    assert_eq!(desk.defaults("printers").await, 1);
}

#[tokio::test]
async fn the_last_default_printer_cannot_be_removed_or_unset() {
    let desk = Desk::open().await;
    let only = desk.printer(json!({"name": "Counter"})).await;
    // Deleting the default, even the only printer, is refused.
    let (status, body) = desk.delete(&printer_path(&only), &desk.admin).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    let (status, body) = desk
        .put(
            &printer_path(&only),
            &desk.admin,
            json!({"is_default": false}),
        )
        .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "is_default");
    // Another printer made default frees the first one.
    let back = desk.printer(json!({"name": "Back office"})).await;
    assert_eq!(back["is_default"], false);
    let (status, _) = desk
        .put(
            &printer_path(&back),
            &desk.admin,
            json!({"is_default": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = desk.delete(&printer_path(&only), &desk.admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(body, Value::Null);
    assert_eq!(
        desk.names("/printing/printers").await,
        pairs(&[("Back office", true)])
    );
    // Gone: a second delete or an update is 404.
    let (status, _) = desk.delete(&printer_path(&only), &desk.admin).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = desk
        .put(&printer_path(&only), &desk.admin, json!({"name": "X"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = desk.delete(&printer_path(&back), &desk.admin).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    // Unsetting a non-default printer's flag changes nothing.
    let spare = desk.printer(json!({"name": "Spare"})).await;
    let (status, s) = desk
        .put(
            &printer_path(&spare),
            &desk.admin,
            json!({"is_default": false}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(desk.defaults("printers").await, 1);
}

#[tokio::test]
async fn the_database_refuses_a_second_default_printer() {
    let desk = Desk::open().await;
    desk.printer(json!({"name": "One"})).await;
    let client = desk.app.pool.get().await.unwrap();
    let err = client
        .execute(
            "INSERT INTO printers (id, branch_id, name, is_default) VALUES ($1, $2, 'Two', true)",
            &[&Uuid::now_v7(), &desk.branch],
        )
        .await
        .unwrap_err();
    let constraint = err.as_db_error().and_then(|e| e.constraint());
    assert_eq!(
        constraint,
        Some("printers_one_default_per_branch"),
        "{err:?}"
    );
}

#[tokio::test]
async fn concurrent_make_default_requests_leave_exactly_one_default() {
    let desk = Desk::open().await;
    let mut printers = Vec::new();
    for i in 0..6 {
        printers.push(desk.printer(json!({"name": format!("P{i}")})).await);
    }
    let paths: Vec<String> = printers.iter().map(printer_path).collect();
    for round in 0..3 {
        let calls = paths
            .iter()
            .map(|p| desk.put(p, &desk.admin, json!({"is_default": true})));
        for (status, body) in join_all(calls).await {
            assert_eq!(status, StatusCode::OK, "round {round}: {body}");
        }
        assert_eq!(desk.defaults("printers").await, 1, "round {round}");
    }
    // Racing deletes of every printer: the default survives.
    let calls = paths.iter().map(|p| desk.delete(p, &desk.admin));
    let results = join_all(calls).await;
    let refused = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::BAD_REQUEST)
        .count();
    assert_eq!(refused, 1, "{results:?}");
    assert_eq!(desk.defaults("printers").await, 1);
}

#[tokio::test]
async fn concurrent_first_printers_of_a_branch_make_one_default() {
    let desk = Desk::open().await;
    let calls = (0..6).map(|i| {
        desk.app.post(
            "/printing/printers",
            &desk.admin,
            json!({"name": format!("Till {i}")}),
        )
    });
    for (status, body) in join_all(calls).await {
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    assert_eq!(desk.defaults("printers").await, 1);
}

#[tokio::test]
async fn printer_input_is_validated_field_by_field() {
    let desk = Desk::open().await;
    let cases = [
        (json!({}), "name"),
        (json!({"name": "  "}), "name"),
        (json!({"name": "P", "kind": "thermal"}), "kind"),
        (json!({"name": "P", "copies": 0}), "copies"),
        (json!({"name": "P", "copies": 21}), "copies"),
        (json!({"name": "P", "copies": 1.5}), "copies"),
        (json!({"name": "P", "connection": "usb"}), "connection"),
        (
            json!({"name": "P", "device_path": "/dev/usb/lp0"}),
            "device_path",
        ),
        (json!({"name": "P", "device_path": null}), "device_path"),
        (json!({"name": "P", "device_path": ""}), "device_path"),
        (json!({"name": "P", "is_default": "yes"}), "is_default"),
        (
            json!({"name": "P", "branch_id": Uuid::now_v7()}),
            "branch_id",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = desk
            .app
            .post("/printing/printers", &desk.admin, body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    let p = desk.printer(json!({"name": "Counter", "copies": 20})).await;
    let path = printer_path(&p);
    let updates = [
        (json!({"device_path": "COM3"}), "device_path"),
        (json!({"copies": 0}), "copies"),
        (json!({"kind": "laser"}), "kind"),
        (json!({"connection": "network"}), "connection"),
        (json!({"name": ""}), "name"),
        (
            json!({"branch_id": desk.app.branch("EBB").await}),
            "branch_id",
        ),
    ];
    for (body, field) in updates {
        let (status, problem) = desk.put(&path, &desk.admin, body.clone()).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}: {problem}");
    }
    let (status, problem) = desk.put(&path, &desk.admin, json!({})).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["detail"], "No fields to update");
    let (status, problem) = desk.put(&path, &desk.admin, json!({"colour": "red"})).await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["detail"], "No fields to update");
    let (status, p) = desk
        .put(
            &path,
            &desk.admin,
            json!({"name": "Front", "kind": "label", "copies": 3, "auto_print": true,
                   "branch_id": desk.branch}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{p}");
    assert_eq!(
        (&p["name"], &p["kind"], &p["copies"], &p["auto_print"]),
        (&json!("Front"), &json!("label"), &json!(3), &json!(true))
    );
    let (status, _) = desk
        .put(
            "/printing/printers/not-an-id",
            &desk.admin,
            json!({"name": "X"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_printer_takes_the_settings_default_copies() {
    let desk = Desk::open().await;
    let (status, _) = desk
        .put("/settings", &desk.admin, json!({"default_copies": 2}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let p = desk.printer(json!({"name": "Counter"})).await;
    assert_eq!(p["copies"], 2);
}

#[tokio::test]
async fn only_admins_write_printers_and_templates() {
    let desk = Desk::open().await;
    let p = desk.printer(json!({"name": "Counter"})).await;
    let t = desk.template(json!({"name": "Standard"})).await;
    for role in [
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
        Role::Cashier,
        Role::Auditor,
    ] {
        let (_, token) = desk.app.signed_in(desk.branch, role).await;
        let (status, body) = desk
            .app
            .post("/printing/printers", &token, json!({"name": "X"}))
            .await;
        assert_problem(status, &body, StatusCode::FORBIDDEN);
        let (status, _) = desk
            .put(&printer_path(&p), &token, json!({"name": "X"}))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role}");
        let (status, _) = desk.delete(&printer_path(&p), &token).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role}");
        let (status, _) = desk
            .app
            .post("/printing/receipt-templates", &token, json!({"name": "X"}))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role}");
        let (status, _) = desk
            .put(&template_path(&t), &token, json!({"name": "X"}))
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role}");
        let (status, _) = desk.delete(&template_path(&t), &token).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{role}");
        // Reading the own branch's lists is open to every role.
        let (status, _) = desk.app.get("/printing/printers", &token).await;
        assert_eq!(status, StatusCode::OK, "{role}");
        let (status, _) = desk.app.get("/printing/receipt-templates", &token).await;
        assert_eq!(status, StatusCode::OK, "{role}");
    }
    let (status, _) = desk
        .app
        .call(Method::GET, "/printing/printers", None, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn branches_are_isolated() {
    let desk = Desk::open().await;
    let other = desk.app.branch("EBB").await;
    let (status, p) = desk
        .app
        .post(
            "/printing/printers",
            &desk.admin,
            json!({"name": "EBB counter", "branch_id": other}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{p}");
    assert_eq!(p["branch_id"], other.to_string());
    assert_eq!(p["is_default"], true);
    desk.template(json!({"name": "EBB receipt", "branch_id": other}))
        .await;
    // The admin reads any branch; others only their own.
    let (status, list) = desk
        .app
        .get(
            &format!("/printing/printers?branch_id={other}"),
            &desk.admin,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 1);
    assert!(desk.names("/printing/printers").await.is_empty());
    for path in [
        format!("/printing/printers?branch_id={other}"),
        format!("/printing/receipt-templates?branch_id={other}"),
        format!("/printing/print-jobs?branch_id={other}"),
    ] {
        let (status, body) = desk.app.get(&path, &desk.cashier).await;
        assert_problem(status, &body, StatusCode::FORBIDDEN);
    }
    let (status, list) = desk
        .app
        .get(
            &format!("/printing/printers?branch_id={}", desk.branch),
            &desk.cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["total"], 0);
    let (status, body) = desk
        .app
        .post(
            "/printing/print-jobs",
            &desk.cashier,
            json!({"branch_id": other, "reference_id": "S-1", "document_type": "receipt"}),
        )
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    let (status, _) = desk
        .app
        .get("/printing/printers?branch_id=nope", &desk.admin)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn receipt_templates_keep_one_default_per_branch() {
    let desk = Desk::open().await;
    let standard = desk.template(json!({"name": "Standard"})).await;
    assert_eq!(standard["paper"], "mm80");
    assert_eq!(standard["is_default"], true);
    assert_eq!(standard["show_logo"], true);
    assert_eq!(standard["show_vat"], true);
    assert_eq!(standard["show_batch"], false);
    assert_eq!(standard["header_text"], "");
    let a4 = desk
        .template(
            json!({"name": "A4 invoice", "paper": "a4", "header_text": "Kampala Road",
                         "footer_text": "Thank you", "show_batch": true, "show_logo": 0,
                         "is_default": true}),
        )
        .await;
    assert_eq!(a4["is_default"], true);
    assert_eq!(a4["show_logo"], false);
    assert_eq!(a4["footer_text"], "Thank you");
    assert_eq!(
        desk.names("/printing/receipt-templates").await,
        pairs(&[("A4 invoice", true), ("Standard", false)])
    );
    let (status, body) = desk.delete(&template_path(&a4), &desk.admin).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    let (status, body) = desk
        .put(
            &template_path(&a4),
            &desk.admin,
            json!({"is_default": false}),
        )
        .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "is_default");
    let (status, t) = desk
        .put(
            &template_path(&standard),
            &desk.admin,
            json!({"is_default": true, "paper": "mm58", "footer_text": "Get well soon"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{t}");
    assert_eq!(t["paper"], "mm58");
    assert_eq!(t["is_default"], true);
    let (status, _) = desk.delete(&template_path(&a4), &desk.admin).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        desk.names("/printing/receipt-templates").await,
        pairs(&[("Standard", true)])
    );
    assert_eq!(desk.defaults("receipt_templates").await, 1);
    for (body, field) in [
        (json!({"paper": "letter"}), "paper"),
        (json!({"name": ""}), "name"),
        (json!({"show_vat": "no"}), "show_vat"),
    ] {
        let (status, problem) = desk
            .put(&template_path(&standard), &desk.admin, body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}");
    }
    let (status, problem) = desk
        .put(&template_path(&standard), &desk.admin, json!({}))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["detail"], "No fields to update");
    let (status, problem) = desk
        .app
        .post(
            "/printing/receipt-templates",
            &desk.admin,
            json!({"paper": "mm80"}),
        )
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "name");
}

#[tokio::test]
async fn concurrent_template_defaults_leave_exactly_one() {
    let desk = Desk::open().await;
    let mut templates = Vec::new();
    for i in 0..5 {
        templates.push(desk.template(json!({"name": format!("T{i}")})).await);
    }
    let paths: Vec<String> = templates.iter().map(template_path).collect();
    let calls = paths
        .iter()
        .map(|t| desk.put(t, &desk.admin, json!({"is_default": true})));
    for (status, body) in join_all(calls).await {
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    assert_eq!(desk.defaults("receipt_templates").await, 1);
}

async fn log(desk: &Desk, token: &str, body: Value) -> Value {
    let (status, job) = desk.app.post("/printing/print-jobs", token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    job
}

#[tokio::test]
async fn a_reprint_is_a_new_row_and_the_failed_job_is_untouched() {
    let desk = Desk::open().await;
    let failed = log(
        &desk,
        &desk.cashier,
        json!({"reference_id": "SALE-1", "document_type": "receipt", "copies": 2, "status": "failed"}),
    )
    .await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["copies"], 2);
    assert_eq!(failed["branch_id"], desk.branch.to_string());
    assert_eq!(failed["reprint_of"], Value::Null);
    // A reprint naming the failed job takes its reference.
    let reprint = log(&desk, &desk.cashier, json!({"reprint_of": failed["id"]})).await;
    assert_eq!(reprint["status"], "reprint");
    assert_eq!(reprint["reference_id"], "SALE-1");
    assert_eq!(reprint["document_type"], "receipt");
    assert_eq!(reprint["reprint_of"], failed["id"]);
    assert_ne!(reprint["id"], failed["id"]);
    // A till that does not know the id sends the status and reference.
    let again = log(
        &desk,
        &desk.cashier,
        json!({"reference_id": "SALE-1", "document_type": "receipt", "status": "reprint"}),
    )
    .await;
    assert_eq!(again["status"], "reprint");
    log(&desk, &desk.cashier, json!({"reference_id": "SALE-2"})).await;
    let (status, list) = desk
        .app
        .get("/printing/print-jobs?reference_id=SALE-1", &desk.cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["total"], 3);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items[0]["id"], again["id"], "newest first");
    assert_eq!(items[1]["id"], reprint["id"]);
    assert_eq!(items[2], failed, "the failed row reads exactly as logged");
    // A reprint cannot change the reference nor take another status.
    for (body, field) in [
        (
            json!({"reprint_of": failed["id"], "reference_id": "SALE-9"}),
            "reference_id",
        ),
        (
            json!({"reprint_of": failed["id"], "status": "completed"}),
            "status",
        ),
        (json!({"reprint_of": Uuid::now_v7()}), "reprint_of"),
    ] {
        let (status, problem) = desk
            .app
            .post("/printing/print-jobs", &desk.cashier, body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}");
    }
}

#[tokio::test]
async fn a_legacy_printed_status_reads_as_completed() {
    let desk = Desk::open().await;
    let client = desk.app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO print_jobs (id, branch_id, reference_id, document_type, copies, status)
             VALUES ($1, $2, 'OLD-1', 'receipt', 1, 'printed')",
            &[&Uuid::now_v7(), &desk.branch],
        )
        .await
        .unwrap();
    let (status, list) = desk
        .app
        .get("/printing/print-jobs?reference_id=OLD-1", &desk.cashier)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"][0]["status"], "completed");
    // A till still sending the legacy spelling has it stored as `completed`.
    let job = log(
        &desk,
        &desk.cashier,
        json!({"reference_id": "NEW-1", "status": "printed"}),
    )
    .await;
    assert_eq!(job["status"], "completed");
    let stored: String = client
        .query_one(
            "SELECT status FROM print_jobs WHERE reference_id = 'NEW-1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, "completed");
}

#[tokio::test]
async fn print_jobs_are_validated_and_paged_twenty_at_a_time() {
    let desk = Desk::open().await;
    for (body, field) in [
        (json!({"document_type": "receipt"}), "reference_id"),
        (json!({"reference_id": " "}), "reference_id"),
        (
            json!({"reference_id": "S", "document_type": "poster"}),
            "document_type",
        ),
        (json!({"reference_id": "S", "status": "done"}), "status"),
        (json!({"reference_id": "S", "copies": 0}), "copies"),
        (json!({"reference_id": "S", "copies": 21}), "copies"),
        (json!({"reference_id": "S", "branch_id": "x"}), "branch_id"),
    ] {
        let (status, problem) = desk
            .app
            .post("/printing/print-jobs", &desk.cashier, body.clone())
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}");
    }
    let first = log(&desk, &desk.cashier, json!({"reference_id": "S-0"})).await;
    assert_eq!(first["status"], "queued");
    assert_eq!(first["document_type"], "receipt");
    assert_eq!(first["copies"], 1);
    for i in 1..=21 {
        let doc = ["invoice_a4", "credit_note", "label", "report"][i % 4];
        log(
            &desk,
            &desk.cashier,
            json!({"reference_id": format!("S-{i}"), "document_type": doc, "status": "completed"}),
        )
        .await;
    }
    let (status, page) = desk.app.get("/printing/print-jobs", &desk.cashier).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["total"], 22);
    assert_eq!(page["page"], 1);
    assert_eq!(page["page_size"], 20);
    assert_eq!(page["items"].as_array().unwrap().len(), 20);
    assert_eq!(page["items"][0]["reference_id"], "S-21");
    let (_, page2) = desk
        .app
        .get("/printing/print-jobs?page=2", &desk.cashier)
        .await;
    assert_eq!(page2["items"].as_array().unwrap().len(), 2);
    assert_eq!(page2["items"][1]["id"], first["id"]);
    // Another branch's jobs stay out of a branch user's list; the admin sees all.
    let other = desk.app.branch("EBB").await;
    log(
        &desk,
        &desk.admin,
        json!({"reference_id": "E-1", "branch_id": other}),
    )
    .await;
    let (_, mine) = desk.app.get("/printing/print-jobs", &desk.cashier).await;
    assert_eq!(mine["total"], 22);
    let (_, all) = desk.app.get("/printing/print-jobs", &desk.admin).await;
    assert_eq!(all["total"], 23);
    let (_, theirs) = desk
        .app
        .get(
            &format!("/printing/print-jobs?branch_id={other}"),
            &desk.admin,
        )
        .await;
    assert_eq!(theirs["total"], 1);
}
