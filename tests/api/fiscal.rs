//! The fiscal outbox against the EFRIS simulator: documents accepted with
//! their identifiers, sales going on while the authority is down, one FDN
//! per invoice whatever the faults, credit notes waiting for their
//! invoice, and rejections shown with the authority's message.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::Role;
use pharmacy::config::FiscalMode;
use pharmacy::fiscal_sim::{self, Faults, Sim};
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::TestApp;

/// A simulator on its own thread; its base URL.
pub fn simulator(faults: Faults) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let key = fiscal_sim::taxpayer_key(None).expect("dev key");
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let port = listener.local_addr().expect("addr").port();
            let server = fiscal_sim::start(Arc::new(Sim::new(key, faults)), listener).expect("sim");
            tx.send(port).expect("send");
            let _ = server.await;
        })
    });
    format!("http://127.0.0.1:{}", rx.recv().expect("simulator started"))
}

/// An app whose outbox talks to the simulator at `sim`, quickly.
pub async fn app_on(sim: &str) -> TestApp {
    let url = format!("{sim}/efrisws/ws/taapp/getInformation");
    TestApp::spawn_with(|c| {
        c.fiscal.mode = Some(FiscalMode::Efris);
        let e = &mut c.fiscal.efris;
        e.url = url;
        e.tin = "1000000000".to_owned();
        e.default_device_no = "TEST-DEVICE".to_owned();
        e.simulated = true;
        e.idle_ms = 100;
        e.timeout_ms = 1_000;
        e.lease_secs = 3;
        e.backoff_base_ms = 100;
        e.backoff_cap_secs = 1;
    })
    .await
}

pub async fn sim_stats(sim: &str) -> Value {
    reqwest::get(format!("{sim}/sim/stats"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub async fn sim_faults(sim: &str, faults: Value) {
    let res = reqwest::Client::new()
        .post(format!("{sim}/sim/config"))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
}

/// A branch with an admin, a cashier and a medicine in stock.
pub struct Shop {
    pub branch: Uuid,
    pub admin: String,
    pub cashier: String,
    pub medicine: Value,
}

pub async fn shop(app: &TestApp, code: &str) -> Shop {
    let branch = app.branch(code).await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let medicine = app
        .medicine(
            &admin,
            json!({"name": format!("Amoxicillin {code}"), "selling_price": 1500}),
        )
        .await;
    app.receive(&admin, &medicine["id"], branch, 500, "2030-12-31")
        .await;
    Shop {
        branch,
        admin,
        cashier,
        medicine,
    }
}

pub async fn sell(app: &TestApp, shop: &Shop, qty: i64) -> Value {
    let body = json!({"items": [{"medicine_id": shop.medicine["id"], "quantity": qty}],
                      "payment_method": "cash"});
    let (status, sale) = app.post("/sales", &shop.cashier, body).await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    sale
}

/// The documents' statuses by kind and status.
pub async fn counts(app: &TestApp) -> Vec<(String, String, i64)> {
    let client = app.pool.get().await.unwrap();
    client
        .query(
            "SELECT kind, status, count(*) FROM fiscal_documents GROUP BY 1, 2 ORDER BY 1, 2",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// Waits until every document is accepted (or panics after `within`).
pub async fn all_accepted(app: &TestApp, within: Duration) {
    let start = Instant::now();
    loop {
        let c = counts(app).await;
        if !c.is_empty() && c.iter().all(|(_, s, _)| s == "accepted") {
            return;
        }
        assert!(start.elapsed() < within, "not all accepted: {c:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A document's row: status, fdn, verification code, qr, reference, error.
pub async fn document(app: &TestApp, kind: &str, source: &Value) -> Value {
    let client = app.pool.get().await.unwrap();
    let id = Uuid::parse_str(source.as_str().unwrap()).unwrap();
    let row = client
        .query_one(
            "SELECT status, fdn, verification_code, qr_code, reference_no, last_error, attempts
             FROM fiscal_documents WHERE kind = $1 AND source_id = $2
             ORDER BY revision DESC LIMIT 1",
            &[&kind, &id],
        )
        .await
        .unwrap();
    json!({
        "status": row.get::<_, String>(0),
        "fdn": row.get::<_, Option<String>>(1),
        "verification_code": row.get::<_, Option<String>>(2),
        "qr_code": row.get::<_, Option<String>>(3),
        "reference_no": row.get::<_, Option<String>>(4),
        "last_error": row.get::<_, Option<String>>(5),
        "attempts": row.get::<_, i32>(6),
    })
}

pub async fn until_status(app: &TestApp, kind: &str, source: &Value, status: &str) -> Value {
    let start = Instant::now();
    loop {
        let d = document(app, kind, source).await;
        if d["status"] == status {
            return d;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{kind} never {status}: {d}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_sale_is_accepted_with_an_fdn_within_seconds() {
    let sim = simulator(Faults::default());
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    let sale = sell(&app, &shop, 2).await;
    let doc = until_status(&app, "T109", &sale["id"], "accepted").await;
    assert!(doc["fdn"].as_str().is_some_and(|f| !f.is_empty()), "{doc}");
    assert!(doc["verification_code"].is_string(), "{doc}");
    assert!(
        doc["qr_code"].as_str().unwrap().starts_with("SIMULATED"),
        "{doc}"
    );
    // The goods were registered and the receipt reported before the sale.
    until_status(&app, "T130", &shop.medicine["id"], "accepted").await;
    all_accepted(&app, Duration::from_secs(20)).await;
    let stats = sim_stats(&sim).await;
    assert_eq!(stats["fdns_issued"], 1, "{stats}");
    let client = app.pool.get().await.unwrap();
    let attempts: i64 = client
        .query_one(
            "SELECT count(*) FROM fiscal_attempts WHERE outcome = 'accepted'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(attempts >= 3, "an attempt row per document");
}

#[tokio::test]
async fn with_the_authority_down_sales_go_on_and_every_invoice_gets_one_fdn_later() {
    let sim = simulator(Faults {
        fail_rate: 1.0,
        ..Faults::default()
    });
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    let started = Instant::now();
    let mut sales = Vec::new();
    for _ in 0..12 {
        sales.push(sell(&app, &shop, 1).await);
    }
    // Sales do not wait for the authority (it answers 503 to everything).
    assert!(started.elapsed() < Duration::from_secs(10));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let queued = counts(&app).await;
    assert!(
        queued.iter().all(|(_, s, _)| s != "accepted"),
        "nothing accepted while down: {queued:?}"
    );
    sim_faults(&sim, json!({})).await;
    all_accepted(&app, Duration::from_secs(30)).await;
    let stats = sim_stats(&sim).await;
    assert_eq!(stats["fdns_issued"], 12, "{stats}");
    let client = app.pool.get().await.unwrap();
    let distinct: i64 = client
        .query_one(
            "SELECT count(DISTINCT fdn) FROM fiscal_documents WHERE kind = 'T109'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(distinct, 12);
}

#[tokio::test]
async fn an_answer_lost_to_a_timeout_never_yields_a_second_fdn() {
    // Half the documents are recorded but answered after the client gave
    // up; the resubmission carries the same seller reference.
    let sim = simulator(Faults {
        timeout_rate: 0.5,
        hold_ms: 1_500,
        ..Faults::default()
    });
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    for _ in 0..8 {
        sell(&app, &shop, 1).await;
    }
    all_accepted(&app, Duration::from_secs(60)).await;
    let stats = sim_stats(&sim).await;
    assert_eq!(stats["fdns_issued"], 8, "{stats}");
}

#[tokio::test]
async fn an_already_received_answer_is_reconciled_by_a_query() {
    let sim = simulator(Faults::default());
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    all_accepted(&app, Duration::from_secs(20)).await;
    // The invoice's first answer is lost; the resend is told "already
    // received" (not the first document).
    sim_faults(
        &sim,
        json!({"timeout_rate": 1.0, "hold_ms": 1500, "repeat_as_error": true}),
    )
    .await;
    let sale = sell(&app, &shop, 1).await;
    let start = Instant::now();
    while sim_stats(&sim).await["timeouts"] == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "never submitted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sim_faults(&sim, json!({"repeat_as_error": true})).await;
    let doc = until_status(&app, "T109", &sale["id"], "accepted").await;
    assert!(doc["fdn"].is_string());
    let stats = sim_stats(&sim).await;
    assert_eq!(stats["fdns_issued"], 1, "{stats}");
    let client = app.pool.get().await.unwrap();
    let kinds: Vec<String> = client
        .query(
            "SELECT a.outcome FROM fiscal_attempts a JOIN fiscal_documents d ON d.id = a.document_id
             WHERE d.kind = 'T109' ORDER BY a.attempt",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("duplicate"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "rejected"), "{kinds:?}");
}

#[tokio::test]
async fn a_credit_note_waits_for_its_invoice() {
    let sim = simulator(Faults {
        fail_rate: 1.0,
        ..Faults::default()
    });
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    let sale = sell(&app, &shop, 3).await;
    let (_, manager) = app.signed_in(shop.branch, Role::BranchManager).await;
    let (status, note) = app
        .post(
            &format!("/sales/{}/returns", sale["id"].as_str().unwrap()),
            &manager,
            json!({"items": [{"sale_item_id": sale["items"][0]["id"], "quantity": 1}],
                   "reason": "Wrong strength dispensed"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        document(&app, "T110", &note["id"]).await["status"],
        "waiting"
    );
    sim_faults(&sim, json!({})).await;
    let cn = until_status(&app, "T110", &note["id"], "accepted").await;
    assert!(cn["reference_no"].is_string(), "{cn}");
    all_accepted(&app, Duration::from_secs(20)).await;
}

#[tokio::test]
async fn a_rejection_is_kept_with_the_authoritys_message() {
    let sim = simulator(Faults::default());
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    all_accepted(&app, Duration::from_secs(20)).await;
    sim_faults(&sim, json!({"reject_rate": 1.0})).await;
    let sale = sell(&app, &shop, 1).await;
    let doc = until_status(&app, "T109", &sale["id"], "rejected").await;
    assert!(
        doc["last_error"]
            .as_str()
            .unwrap()
            .contains("simulated rejection"),
        "{doc}"
    );
    assert_eq!(doc["attempts"], 1, "a rejection is not retried: {doc}");
    assert_eq!(sim_stats(&sim).await["fdns_issued"], 0);
    // The sale shows it, with the authority's message.
    let (_, shown) = app
        .get(
            &format!("/sales/{}", sale["id"].as_str().unwrap()),
            &shop.cashier,
        )
        .await;
    assert_eq!(shown["fiscal"]["status"], "rejected", "{shown}");
    assert!(shown["fiscal"]["last_error"]
        .as_str()
        .unwrap()
        .contains("simulated"));
    // The documents page lists it; the manager re-sends it once corrected.
    let (_, manager) = app.signed_in(shop.branch, Role::BranchManager).await;
    let (status, page) = app
        .get("/fiscal/documents?status=rejected&kind=T109", &manager)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["total"], 1, "{page}");
    let id = page["items"][0]["id"].as_str().unwrap().to_owned();
    let (status, detail) = app.get(&format!("/fiscal/documents/{id}"), &manager).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["attempts_log"][0]["outcome"], "rejected", "{detail}");
    assert_eq!(detail["attempts_log"][0]["return_code"], "2124", "{detail}");
    sim_faults(&sim, json!({})).await;
    let (status, retried) = app
        .post(
            &format!("/fiscal/documents/{id}/retry"),
            &manager,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{retried}");
    let doc = until_status(&app, "T109", &sale["id"], "accepted").await;
    assert!(doc["fdn"].is_string());
    let (_, shown) = app
        .get(
            &format!("/sales/{}", sale["id"].as_str().unwrap()),
            &shop.cashier,
        )
        .await;
    assert_eq!(shown["fiscal"]["status"], "accepted", "{shown}");
    assert_eq!(shown["fiscal"]["fdn"], doc["fdn"]);
    // An accepted document is not sent again.
    let new_id = retried["id"].as_str().unwrap();
    let (status, _) = app
        .post(
            &format!("/fiscal/documents/{new_id}/retry"),
            &manager,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, summary) = app.get("/fiscal/summary", &manager).await;
    assert_eq!(status, StatusCode::OK, "{summary}");
    let mine = summary["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["branch_id"] == shop.branch.to_string())
        .cloned()
        .unwrap();
    assert_eq!(mine["rejected"], 1, "{summary}");
    assert_eq!(sim_stats(&sim).await["fdns_issued"], 1);
}

#[tokio::test]
async fn write_offs_and_receipts_are_reported_as_stock_changes() {
    let sim = simulator(Faults::default());
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    let client = app.pool.get().await.unwrap();
    let batch: Uuid = client
        .query_one("SELECT id FROM batches LIMIT 1", &[])
        .await
        .unwrap()
        .get(0);
    let (status, w) = app
        .post(
            "/stock/write-offs",
            &shop.admin,
            json!({"branch_id": shop.branch, "reason": "expired",
                   "items": [{"batch_id": batch, "quantity": 3}]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{w}");
    all_accepted(&app, Duration::from_secs(20)).await;
    let ops: Vec<String> = client
        .query(
            "SELECT payload #>> '{goodsStockIn,operationType}' FROM fiscal_documents
             WHERE kind = 'T131' ORDER BY created_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ops, ["101", "102"]);
}

#[tokio::test]
async fn two_processes_share_the_outbox_without_doubling() {
    // Both processes run a worker; answers are slow or lost, so claims
    // overlap with leases running out: still one FDN per invoice.
    let sim = simulator(Faults {
        latency_ms: 50,
        timeout_rate: 0.3,
        hold_ms: 1_500,
        ..Faults::default()
    });
    let app = app_on(&sim).await;
    let _other = app.second_process();
    let shop = shop(&app, "KLA").await;
    for _ in 0..10 {
        sell(&app, &shop, 1).await;
    }
    all_accepted(&app, Duration::from_secs(60)).await;
    let stats = sim_stats(&sim).await;
    assert_eq!(stats["fdns_issued"], 10, "{stats}");
    let client = app.pool.get().await.unwrap();
    let claimers: i64 = client
        .query_one(
            "SELECT count(DISTINCT claimed_by) FROM fiscal_attempts",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(claimers >= 1);
}

/// The feed's changes after `since` matching `entity` and `id`, waiting up
/// to 20 s for one to settle.
async fn feed_update(app: &TestApp, token: &str, since: i64, entity: &str, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let (status, feed) = app
            .get(&format!("/sync/changes?since={since}&limit=5000"), token)
            .await;
        assert_eq!(status, StatusCode::OK, "{feed}");
        if let Some(c) = feed["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["entity"] == entity && c["entity_id"] == id && c["op"] == "update")
        {
            return c.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no {entity} update for {id} in the feed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn receipts_print_pending_then_the_fdn_and_the_feed_brings_it_to_the_tills() {
    let sim = simulator(Faults {
        fail_rate: 1.0,
        ..Faults::default()
    });
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    let sale = sell(&app, &shop, 3).await;
    let sale_id = sale["id"].as_str().unwrap().to_owned();
    let (_, manager) = app.signed_in(shop.branch, Role::BranchManager).await;
    let (status, note) = app
        .post(
            &format!("/sales/{sale_id}/returns"),
            &manager,
            json!({"items": [{"sale_item_id": sale["items"][0]["id"], "quantity": 1}],
                   "reason": "Wrong strength dispensed"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{note}");
    let note_id = note["id"].as_str().unwrap().to_owned();

    // The authority is down: both print "pending", with no identifiers.
    let (status, receipt) = app
        .get(&format!("/sales/{sale_id}/receipt"), &shop.cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    assert_eq!(receipt["document_type"], "receipt");
    assert_eq!(receipt["number"], sale["invoice_number"]);
    assert_eq!(receipt["total"], "4500.00", "{receipt}");
    assert_eq!(receipt["lines"][0]["quantity"], 3, "{receipt}");
    assert_eq!(receipt["fiscal"]["pending"], true, "{receipt}");
    assert_eq!(receipt["fiscal"]["fdn"], Value::Null);
    assert_eq!(receipt["fiscal"]["qr_code"], Value::Null);
    assert_eq!(
        receipt["fiscal"]["lines"],
        json!(["Fiscal document pending"])
    );
    let (status, shown) = app.get(&format!("/returns/{note_id}"), &shop.cashier).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["fiscal"]["status"], "waiting", "{shown}");
    assert_eq!(shown["fiscal"]["reference_no"], Value::Null);
    let (status, printed) = app
        .get(&format!("/returns/{note_id}/receipt"), &shop.cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{printed}");
    assert_eq!(printed["document_type"], "credit_note");
    assert_eq!(printed["original_invoice_number"], sale["invoice_number"]);
    assert_eq!(printed["total"], "1500.00", "{printed}");
    assert_eq!(printed["fiscal"]["pending"], true, "{printed}");
    assert_eq!(
        printed["fiscal"]["lines"],
        json!(["Fiscal document pending"])
    );
    let (_, feed) = app.get("/sync/changes?limit=5000", &shop.cashier).await;
    let since = feed["max_rev"].as_i64().unwrap();

    // The authority is back: the identifiers are printed and pulled.
    sim_faults(&sim, json!({})).await;
    all_accepted(&app, Duration::from_secs(30)).await;
    let invoice = document(&app, "T109", &sale["id"]).await;
    let fdn = invoice["fdn"].as_str().unwrap().to_owned();
    let (_, receipt) = app
        .get(&format!("/sales/{sale_id}/receipt"), &shop.cashier)
        .await;
    assert_eq!(receipt["fiscal"]["pending"], false, "{receipt}");
    assert_eq!(receipt["fiscal"]["status"], "accepted");
    assert_eq!(receipt["fiscal"]["fdn"], fdn.as_str());
    assert_eq!(
        receipt["fiscal"]["verification_code"],
        invoice["verification_code"]
    );
    assert_eq!(receipt["fiscal"]["qr_code"], invoice["qr_code"]);
    assert_eq!(receipt["fiscal"]["simulated"], true);
    assert_eq!(
        receipt["fiscal"]["lines"],
        json!([
            format!("FDN: {fdn}"),
            format!(
                "Verification code: {}",
                invoice["verification_code"].as_str().unwrap()
            ),
            "SIMULATED - not issued by URA"
        ])
    );
    let credit = document(&app, "T110", &note["id"]).await;
    let reference = credit["reference_no"].as_str().unwrap().to_owned();
    let (_, shown) = app.get(&format!("/returns/{note_id}"), &shop.cashier).await;
    assert_eq!(shown["fiscal"]["status"], "accepted", "{shown}");
    assert_eq!(shown["fiscal"]["reference_no"], reference.as_str());
    assert!(shown["fiscal"]["accepted_at"].is_string(), "{shown}");
    assert_eq!(shown["fiscal"]["last_error"], Value::Null);
    let (_, printed) = app
        .get(&format!("/returns/{note_id}/receipt"), &shop.cashier)
        .await;
    assert_eq!(printed["fiscal"]["pending"], false, "{printed}");
    assert!(
        printed["fiscal"]["lines"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("EFRIS reference: {reference}"))),
        "{printed}"
    );

    // The till pulls the sale and the credit note again, with identifiers.
    let change = feed_update(&app, &shop.cashier, since, "sale", &sale_id).await;
    assert_eq!(change["branch_id"], shop.branch.to_string());
    assert_eq!(change["payload"]["fiscal"]["fdn"], fdn.as_str(), "{change}");
    assert_eq!(
        change["payload"]["fiscal"]["verification_code"],
        invoice["verification_code"]
    );
    assert_eq!(change["payload"]["fiscal"]["qr_code"], invoice["qr_code"]);
    assert_eq!(change["payload"]["rev"], change["rev"], "{change}");
    assert_eq!(change["payload"]["items"][0]["quantity"], 3, "{change}");
    let change = feed_update(&app, &shop.cashier, since, "credit_note", &note_id).await;
    assert_eq!(
        change["payload"]["fiscal"]["reference_no"],
        reference.as_str(),
        "{change}"
    );
    // And GET /sales/{id} carries the same rev as the feed's change.
    let (_, shown) = app.get(&format!("/sales/{sale_id}"), &shop.cashier).await;
    assert_eq!(shown["fiscal"]["fdn"], fdn.as_str());
    // Another branch's cashier sees neither receipt.
    let other = app.branch("EBB").await;
    let (_, stranger) = app.signed_in(other, Role::Cashier).await;
    let (status, _) = app
        .get(&format!("/sales/{sale_id}/receipt"), &stranger)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .get(&format!("/returns/{note_id}/receipt"), &stranger)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_pushed_sale_reaches_the_till_again_with_its_fdn() {
    let sim = simulator(Faults::default());
    let app = app_on(&sim).await;
    let shop = shop(&app, "KLA").await;
    let (status, device) = app
        .post(
            "/devices",
            &shop.admin,
            json!({"name": "Till 1", "branch_id": shop.branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{device}");
    let (_, feed) = app.get("/sync/changes?limit=5000", &shop.cashier).await;
    let since = feed["max_rev"].as_i64().unwrap();
    let (status, pushed) = app
        .post(
            "/sync/push",
            &shop.cashier,
            json!({"device_id": device["id"], "changes": [
                {"client_mutation_id": "till-sale-1", "entity": "sale", "op": "create",
                 "payload": {"items": [{"medicine_id": shop.medicine["id"], "quantity": 1}],
                             "payment_method": "cash"}}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{pushed}");
    let sale_id = pushed["accepted"][0]["id"].as_str().unwrap().to_owned();
    let doc = until_status(&app, "T109", &json!(sale_id), "accepted").await;
    let change = feed_update(&app, &shop.cashier, since, "sale", &sale_id).await;
    assert_eq!(change["payload"]["fiscal"]["fdn"], doc["fdn"], "{change}");
    assert_eq!(change["payload"]["fiscal"]["qr_code"], doc["qr_code"]);
}

#[tokio::test]
async fn every_document_of_the_demo_chain_is_accepted_by_the_simulator() {
    // What `serve` in development shows after the README's run command:
    // the demo chain seeded the same way, its outbox drained by the
    // simulator with nothing left waiting, retrying or rejected.
    let sim = simulator(Faults::default());
    let app = app_on(&sim).await;
    assert!(pharmacy::seed::seed_demo(&app.pool).await.unwrap());
    let queued = counts(&app).await;
    for kind in ["T109", "T130", "T131"] {
        assert!(
            queued.iter().any(|(k, _, n)| k == kind && *n > 0),
            "the demo queues {kind}: {queued:?}"
        );
    }
    all_accepted(&app, Duration::from_secs(240)).await;
    let client = app.pool.get().await.unwrap();
    let (sales, invoices): (i64, i64) = {
        let r = client
            .query_one(
                "SELECT (SELECT count(*) FROM sales),
                        (SELECT count(*) FROM fiscal_documents WHERE kind = 'T109')",
                &[],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(sales, invoices, "one invoice per demo sale");
    let stats = sim_stats(&sim).await;
    assert_eq!(stats["fdns_issued"], invoices, "{stats}");
    assert_eq!(stats["rejections"], 0, "{stats}");
}
