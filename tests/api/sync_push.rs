//! `POST /sync/push` and `/sync/conflicts`.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A branch with an admin, a cashier, a till and a stocked medicine.
struct Till {
    app: TestApp,
    branch: Uuid,
    admin: String,
    cashier: String,
    device: String,
    medicine: Value,
}

impl Till {
    async fn open(stock: i64) -> Till {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let device = device(&app, &admin, branch).await;
        let medicine = app
            .medicine(
                &admin,
                json!({"name": "Paracetamol 500mg", "selling_price": 500}),
            )
            .await;
        if stock > 0 {
            app.receive(&admin, &medicine["id"], branch, stock, "2030-12-31")
                .await;
        }
        Till {
            app,
            branch,
            admin,
            cashier,
            device,
            medicine,
        }
    }

    async fn push(&self, token: &str, device: &str, changes: Vec<Value>) -> (StatusCode, Value) {
        let body = json!({"device_id": device, "changes": changes});
        self.app.post("/sync/push", token, body).await
    }

    async fn scalar(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    fn sale(&self, cmid: &str, qty: i64) -> Value {
        sale_of(&self.medicine, cmid, qty)
    }
}

async fn device(app: &TestApp, admin: &str, branch: Uuid) -> String {
    let (status, d) = app
        .post(
            "/devices",
            admin,
            json!({"name": "Till", "branch_id": branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "device: {d}");
    d["id"].as_str().unwrap().to_owned()
}

fn sale_of(medicine: &Value, cmid: &str, qty: i64) -> Value {
    json!({
        "client_mutation_id": cmid, "entity": "sale", "op": "create",
        "payload": {"items": [{"medicine_id": medicine["id"], "quantity": qty}], "payment_method": "cash"},
    })
}

fn customer_change(cmid: &str, op: &str, payload: Value) -> Value {
    json!({"client_mutation_id": cmid, "entity": "customer", "op": op, "payload": payload})
}

#[tokio::test]
async fn a_pushed_sale_answers_its_invoice_and_follows_the_sale_rules() {
    let t = Till::open(10).await;
    let (status, body) = t
        .push(
            &t.cashier,
            &t.device,
            vec![t.sale("s-1", 3), t.sale("s-2", 50)],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let accepted = body["accepted"].as_array().unwrap();
    assert_eq!(accepted.len(), 1);
    let a = &accepted[0];
    assert_eq!(a["client_mutation_id"], "s-1");
    assert!(a["id"].is_string());
    assert_eq!(a["icv"], 1);
    assert_eq!(a["invoice_number"], "KLA-00000001");
    // Not enough stock: rejected like POST /sales would refuse it.
    let rejected = body["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1);
    assert_eq!(rejected[0]["client_mutation_id"], "s-2");
    assert_eq!(rejected[0]["code"], "insufficient_stock");
    assert!(rejected[0]["message"].as_str().unwrap().len() > 5);
    // The sale is a real sale of the device's branch.
    let (status, sale) = t
        .app
        .get(&format!("/sales/{}", a["id"].as_str().unwrap()), &t.admin)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sale["branch_id"], json!(t.branch));
    assert_eq!(sale["total"], "1500.00");
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn the_same_batch_pushed_twice_has_one_effect_and_the_same_answer() {
    let t = Till::open(100).await;
    let batch: Vec<Value> = (0..5).map(|i| t.sale(&format!("m-{i}"), 2)).collect();
    let mut batch = batch;
    batch.push(t.sale("too-many", 1000));
    let first = t.push(&t.cashier, &t.device, batch.clone()).await;
    let second = t.push(&t.cashier, &t.device, batch.clone()).await;
    assert_eq!(first.0, StatusCode::OK);
    assert_eq!(first, second, "a replay answers exactly as the first push");
    // Pushed concurrently twice more: still identical, still one effect.
    let (a, b) = tokio::join!(
        t.push(&t.cashier, &t.device, batch.clone()),
        t.push(&t.cashier, &t.device, batch.clone())
    );
    assert_eq!(a, first);
    assert_eq!(b, first);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 5);
    assert_eq!(
        t.scalar("SELECT coalesce(sum(qty_remaining),0)::bigint FROM batches")
            .await,
        90
    );
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn a_rejected_change_replays_as_rejected_even_after_it_could_succeed() {
    let t = Till::open(0).await;
    let (_, first) = t
        .push(&t.cashier, &t.device, vec![t.sale("early", 1)])
        .await;
    assert_eq!(first["rejected"][0]["code"], "insufficient_stock");
    t.app
        .receive(&t.admin, &t.medicine["id"], t.branch, 10, "2030-12-31")
        .await;
    let (_, again) = t
        .push(&t.cashier, &t.device, vec![t.sale("early", 1)])
        .await;
    assert_eq!(again, first);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 0);
}

#[tokio::test]
async fn the_same_mutation_id_with_another_payload_is_an_idempotency_mismatch() {
    let t = Till::open(10).await;
    let (_, first) = t.push(&t.cashier, &t.device, vec![t.sale("x", 1)]).await;
    assert_eq!(first["accepted"].as_array().unwrap().len(), 1);
    let (status, other) = t.push(&t.cashier, &t.device, vec![t.sale("x", 2)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(other["accepted"], json!([]));
    assert_eq!(other["rejected"][0]["code"], "idempotency_mismatch");
    assert_eq!(other["rejected"][0]["client_mutation_id"], "x");
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 1);
    // The same id on another device is another mutation.
    let other_device = device(&t.app, &t.admin, t.branch).await;
    let (_, b) = t
        .push(&t.cashier, &other_device, vec![t.sale("x", 2)])
        .await;
    assert_eq!(b["accepted"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_unsupported_change_is_rejected_while_the_rest_applies() {
    let t = Till::open(10).await;
    let changes = vec![
        t.sale("a", 1),
        json!({"client_mutation_id": "b", "entity": "branch", "op": "create", "payload": {"code": "X"}}),
        json!({"client_mutation_id": "c", "entity": "sale", "op": "delete", "payload": {}}),
        json!({"client_mutation_id": "d", "entity": "customer", "op": "merge", "payload": {}}),
        t.sale("e", 1),
    ];
    let (status, body) = t.push(&t.cashier, &t.device, changes).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let accepted: Vec<&str> = body["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["client_mutation_id"].as_str().unwrap())
        .collect();
    assert_eq!(accepted, ["a", "e"]);
    let codes: Vec<(Value, &str)> = body["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["client_mutation_id"].clone(), r["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            (json!("b"), "unsupported"),
            (json!("c"), "unsupported"),
            (json!("d"), "unsupported"),
        ]
    );
}

#[tokio::test]
async fn a_change_of_the_wrong_shape_is_a_400_naming_it_and_nothing_applies() {
    let t = Till::open(10).await;
    let cases = [
        (
            json!({"entity": "sale", "op": "create", "payload": {}}),
            "changes[1].client_mutation_id",
        ),
        (
            json!({"client_mutation_id": "", "entity": "sale", "op": "create", "payload": {}}),
            "changes[1].client_mutation_id",
        ),
        (
            json!({"client_mutation_id": "x", "entity": 5, "op": "create", "payload": {}}),
            "changes[1].entity",
        ),
        (
            json!({"client_mutation_id": "x", "entity": "sale", "payload": {}}),
            "changes[1].op",
        ),
        (
            json!({"client_mutation_id": "x", "entity": "sale", "op": "create", "payload": [1]}),
            "changes[1].payload",
        ),
        (json!("not a change"), "changes[1].client_mutation_id"),
    ];
    for (bad, field) in cases {
        let (status, body) = t
            .push(&t.cashier, &t.device, vec![t.sale("ok", 1), bad])
            .await;
        assert_problem(status, &body, StatusCode::BAD_REQUEST);
        assert_eq!(body["field"], field);
    }
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 0);
}

#[tokio::test]
async fn push_is_refused_for_bad_requests_roles_and_devices() {
    let t = Till::open(10).await;
    let sale = t.sale("r", 1);
    // 400: missing device_id or changes.
    let (s, b) = t
        .app
        .post("/sync/push", &t.cashier, json!({"changes": [sale]}))
        .await;
    assert_problem(s, &b, StatusCode::BAD_REQUEST);
    assert_eq!(b["field"], "device_id");
    let (s, b) = t
        .app
        .post("/sync/push", &t.cashier, json!({"device_id": t.device}))
        .await;
    assert_problem(s, &b, StatusCode::BAD_REQUEST);
    assert_eq!(b["field"], "changes");
    // 404: unknown device.
    let (s, b) = t
        .push(&t.cashier, &Uuid::now_v7().to_string(), vec![sale.clone()])
        .await;
    assert_problem(s, &b, StatusCode::NOT_FOUND);
    // 403: a role other than admin or cashier.
    let (_, pharmacist) = t.app.signed_in(t.branch, Role::Pharmacist).await;
    let (s, b) = t.push(&pharmacist, &t.device, vec![sale.clone()]).await;
    assert_problem(s, &b, StatusCode::FORBIDDEN);
    // 403: a device of another branch.
    let other = t.app.branch("EBB").await;
    let foreign = device(&t.app, &t.admin, other).await;
    let (s, b) = t.push(&t.cashier, &foreign, vec![sale.clone()]).await;
    assert_problem(s, &b, StatusCode::FORBIDDEN);
    // 413: more than 500 changes, naming the limit.
    let many: Vec<Value> = (0..501).map(|i| t.sale(&format!("n{i}"), 1)).collect();
    let (s, b) = t.push(&t.cashier, &t.device, many).await;
    assert_problem(s, &b, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(b["detail"].as_str().unwrap().contains("500"));
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 0);
}

#[tokio::test]
async fn a_revoked_device_is_refused_and_nothing_is_applied() {
    let t = Till::open(10).await;
    let (s, _) = t
        .app
        .post(
            &format!("/devices/{}/revoke", t.device),
            &t.admin,
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, b) = t.push(&t.cashier, &t.device, vec![t.sale("late", 1)]).await;
    assert_problem(s, &b, StatusCode::FORBIDDEN);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 0);
    assert_eq!(t.scalar("SELECT count(*) FROM push_mutations").await, 0);
}

#[tokio::test]
async fn five_concurrent_batches_of_one_device_never_interleave() {
    let t = Till::open(1000).await;
    let batches: Vec<Vec<Value>> = (0..5)
        .map(|b| (0..10).map(|i| t.sale(&format!("b{b}-{i}"), 1)).collect())
        .collect();
    let answers = join_all(
        batches
            .iter()
            .map(|batch| t.push(&t.cashier, &t.device, batch.clone())),
    )
    .await;
    let mut ranges = Vec::new();
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::OK, "{body}");
        let icvs: Vec<i64> = body["accepted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["icv"].as_i64().unwrap())
            .collect();
        assert_eq!(icvs.len(), 10);
        // Applied in order and contiguously: consecutive icvs.
        assert!(icvs.windows(2).all(|w| w[1] == w[0] + 1), "{icvs:?}");
        ranges.push((icvs[0], icvs[9]));
    }
    ranges.sort();
    let starts: Vec<i64> = ranges.iter().map(|r| r.0).collect();
    assert_eq!(starts, [1, 11, 21, 31, 41]);
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn eight_devices_pushing_fifty_sales_each_keep_icv_gapless_and_stock_exact() {
    let t = Till::open(0).await;
    let second = t.app.branch("EBB").await;
    for branch in [t.branch, second] {
        t.app
            .receive(&t.admin, &t.medicine["id"], branch, 500, "2030-12-31")
            .await;
    }
    let (_, cashier_two) = t.app.signed_in(second, Role::Cashier).await;
    let mut tills = Vec::new();
    for i in 0..8 {
        let (branch, token) = if i % 2 == 0 {
            (t.branch, t.cashier.clone())
        } else {
            (second, cashier_two.clone())
        };
        tills.push((device(&t.app, &t.admin, branch).await, token));
    }
    let answers = join_all(tills.iter().enumerate().map(|(d, (device, token))| {
        let batch = (0..50).map(|i| t.sale(&format!("d{d}-{i}"), 2)).collect();
        t.push(token, device, batch)
    }))
    .await;
    let mut icvs: HashMap<String, Vec<i64>> = HashMap::new();
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::OK, "{body}");
        assert_eq!(body["rejected"], json!([]));
        for a in body["accepted"].as_array().unwrap() {
            let prefix = a["invoice_number"].as_str().unwrap()[..3].to_owned();
            icvs.entry(prefix)
                .or_default()
                .push(a["icv"].as_i64().unwrap());
        }
    }
    for (branch, mut list) in icvs {
        list.sort();
        assert_eq!(list, (1..=200).collect::<Vec<_>>(), "icv of {branch}");
    }
    assert_eq!(
        t.scalar("SELECT coalesce(sum(qty_remaining),0)::bigint FROM batches")
            .await,
        200
    );
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn customers_created_offline_keep_their_id_and_can_buy_on_credit_in_the_same_batch() {
    let t = Till::open(10).await;
    let id = Uuid::now_v7();
    let changes = vec![
        customer_change(
            "c-1",
            "create",
            json!({"id": id, "name": "Amina", "is_credit_allowed": 1, "credit_limit": 5000}),
        ),
        json!({
            "client_mutation_id": "c-2", "entity": "sale", "op": "create",
            "payload": {"items": [{"medicine_id": t.medicine["id"], "quantity": 2}],
                        "payment_method": "credit", "customer_id": id},
        }),
    ];
    // Giving credit takes an admin (or branch manager); a cashier's push of
    // this customer is refused (tests/api/input_controls.rs).
    let (status, body) = t.push(&t.admin, &t.device, changes).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"], json!([]));
    assert_eq!(body["accepted"][0]["id"], json!(id));
    assert_eq!(body["accepted"][0]["icv"], Value::Null);
    let (_, customer) = t.app.get(&format!("/customers/{id}"), &t.admin).await;
    assert_eq!(customer["current_balance"], "1000.00");
}

#[tokio::test]
async fn a_cashier_may_push_customers_but_not_catalogue_changes() {
    let t = Till::open(0).await;
    let changes = vec![
        json!({"client_mutation_id": "m", "entity": "medicine", "op": "create",
               "payload": {"name": "Ibuprofen", "selling_price": 300}}),
        json!({"client_mutation_id": "s", "entity": "supplier", "op": "create",
               "payload": {"name": "Quality Chemicals"}}),
        customer_change("c", "create", json!({"name": "Okello"})),
    ];
    let (_, body) = t.push(&t.cashier, &t.device, changes.clone()).await;
    let codes: Vec<&str> = body["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["forbidden", "forbidden"]);
    assert_eq!(body["accepted"][0]["client_mutation_id"], "c");
    // An admin pushing for the same device may.
    let renamed: Vec<Value> = changes[..2]
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c["client_mutation_id"] = json!(format!("admin-{}", c["client_mutation_id"]));
            c
        })
        .collect();
    let (_, body) = t.push(&t.admin, &t.device, renamed).await;
    assert_eq!(body["accepted"].as_array().unwrap().len(), 2, "{body}");
}

/// A customer, its rev, and a till's stale update of `fields`.
async fn stale_update(t: &Till, server_change: Value, client_fields: Value) -> (String, Value) {
    let (_, c) = t
        .app
        .post(
            "/customers",
            &t.admin,
            json!({"name": "Sarah", "phone": "0700000001", "notes": "regular"}),
        )
        .await;
    let id = c["id"].as_str().unwrap().to_owned();
    let base_rev = c["rev"].as_i64().unwrap();
    let (s, _) = t
        .app
        .call(
            reqwest::Method::PUT,
            &format!("/customers/{id}"),
            Some(&t.admin),
            Some(server_change),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let mut payload = client_fields;
    payload["id"] = json!(id);
    payload["base_rev"] = json!(base_rev);
    let (status, body) = t
        .push(
            &t.cashier,
            &t.device,
            vec![customer_change(&format!("u-{id}"), "update", payload)],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (id, body)
}

fn conflict_of(push_answer: &Value) -> String {
    let r = &push_answer["rejected"][0];
    assert_eq!(r["code"], "conflict", "{push_answer}");
    let id = r["message"].as_str().unwrap().to_owned();
    assert_eq!(r["conflict_id"], json!(id));
    id
}

async fn customer(t: &Till, id: &str) -> Value {
    t.app.get(&format!("/customers/{id}"), &t.admin).await.1
}

async fn resolve(t: &Till, conflict: &str, strategy: &str) -> (StatusCode, Value) {
    t.app
        .post(
            &format!("/sync/conflicts/{conflict}/resolve"),
            &t.admin,
            json!({"strategy": strategy}),
        )
        .await
}

#[tokio::test]
async fn a_stale_update_becomes_a_conflict_and_overwrites_nothing() {
    let t = Till::open(0).await;
    let (id, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let conflict = conflict_of(&body);
    assert_eq!(customer(&t, &id).await["name"], "Sarah N.");
    let (status, list) = t.app.get("/sync/conflicts", &t.admin).await;
    assert_eq!(status, StatusCode::OK);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    let c = &items[0];
    assert_eq!(c["id"], json!(conflict));
    assert_eq!(c["entity_type"], "customer");
    assert_eq!(c["entity_id"], json!(id));
    assert_eq!(c["branch_id"], json!(t.branch));
    assert!(c["org_id"].is_string());
    assert_eq!(c["client_mutation_id"], json!(format!("u-{id}")));
    assert_eq!(c["server_version"]["name"], "Sarah N.");
    assert_eq!(c["client_version"]["name"], "Sara");
    assert_eq!(c["payload"]["name"], "Sara");
    assert_eq!(c["status"], "pending");
    assert!(c["created_at"].is_string());
    assert_eq!(c["resolved_at"], Value::Null);
    assert_eq!(c["resolved_by"], Value::Null);
    // Only admins see conflicts.
    let (s, b) = t.app.get("/sync/conflicts", &t.cashier).await;
    assert_problem(s, &b, StatusCode::FORBIDDEN);
    // A fresh base_rev applies without a conflict.
    let rev = customer(&t, &id).await["rev"].clone();
    let (_, b) = t
        .push(
            &t.cashier,
            &t.device,
            vec![customer_change(
                "fresh",
                "update",
                json!({"id": id, "base_rev": rev, "name": "Sara"}),
            )],
        )
        .await;
    assert_eq!(b["accepted"].as_array().unwrap().len(), 1, "{b}");
    assert_eq!(customer(&t, &id).await["name"], "Sara");
}

#[tokio::test]
async fn resolving_with_client_applies_the_till_version_and_emits_a_change() {
    let t = Till::open(0).await;
    let (id, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let conflict = conflict_of(&body);
    let before = t.scalar("SELECT max(rev) FROM change_log").await;
    let (status, r) = resolve(&t, &conflict, "client").await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["id"], json!(conflict));
    assert_eq!(r["strategy"], "client");
    assert_eq!(r["applied"], true);
    assert_eq!(r["payload"]["name"], "Sara");
    assert_eq!(customer(&t, &id).await["name"], "Sara");
    let after = t.scalar("SELECT max(rev) FROM change_log").await;
    assert!(after > before);
    // Resolved: gone from the pending list, recorded, never resolved again.
    let (_, list) = t.app.get("/sync/conflicts", &t.admin).await;
    assert_eq!(list["items"], json!([]));
    let client = t.app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT status, resolved_at IS NOT NULL, resolved_by IS NOT NULL FROM sync_conflicts",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "resolved");
    assert!(row.get::<_, bool>(1) && row.get::<_, bool>(2));
    let (status, b) = resolve(&t, &conflict, "server").await;
    assert_problem(status, &b, StatusCode::CONFLICT);
    assert_eq!(customer(&t, &id).await["name"], "Sara");
}

#[tokio::test]
async fn resolving_with_server_keeps_the_server_row() {
    let t = Till::open(0).await;
    let (id, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let conflict = conflict_of(&body);
    let before = t.scalar("SELECT max(rev) FROM change_log").await;
    let (status, r) = resolve(&t, &conflict, "server").await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["applied"], false);
    assert_eq!(r["payload"]["name"], "Sarah N.");
    assert_eq!(customer(&t, &id).await["name"], "Sarah N.");
    assert_eq!(t.scalar("SELECT max(rev) FROM change_log").await, before);
}

#[tokio::test]
async fn last_write_wins_keeps_the_later_side() {
    let t = Till::open(0).await;
    // The till's change is dated before the server's: the server wins.
    let (id, body) = stale_update(
        &t,
        json!({"name": "Sarah N."}),
        json!({"name": "Sara", "updated_at": "2020-01-01T00:00:00.000Z"}),
    )
    .await;
    let (_, r) = resolve(&t, &conflict_of(&body), "last_write_wins").await;
    assert_eq!(r["applied"], false, "{r}");
    assert_eq!(customer(&t, &id).await["name"], "Sarah N.");
    // Undated, the till's change counts from its arrival, after the server's.
    let (id, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let (_, r) = resolve(&t, &conflict_of(&body), "last_write_wins").await;
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(customer(&t, &id).await["name"], "Sara");
}

#[tokio::test]
async fn merge_applies_fields_only_the_till_changed_and_refuses_a_clash() {
    let t = Till::open(0).await;
    // Server changed the phone, the till the name: both survive.
    let (id, body) = stale_update(
        &t,
        json!({"phone": "0777000000"}),
        json!({"name": "Sara", "phone": "0700000001"}),
    )
    .await;
    let (status, r) = resolve(&t, &conflict_of(&body), "merge").await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["applied"], true);
    let c = customer(&t, &id).await;
    assert_eq!(c["name"], "Sara");
    assert_eq!(c["phone"], "0777000000");
    // Both changed the name: 409, and the conflict stays pending.
    let (id, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let conflict = conflict_of(&body);
    let (status, b) = resolve(&t, &conflict, "merge").await;
    assert_problem(status, &b, StatusCode::CONFLICT);
    assert_eq!(customer(&t, &id).await["name"], "Sarah N.");
    let (_, list) = t.app.get("/sync/conflicts", &t.admin).await;
    assert_eq!(list["items"][0]["id"], json!(conflict));
}

#[tokio::test]
async fn resolve_validates_strategy_id_and_role() {
    let t = Till::open(0).await;
    let (_, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let conflict = conflict_of(&body);
    for bad in [
        json!({}),
        json!({"strategy": "newest"}),
        json!({"strategy": 3}),
    ] {
        let (s, b) = t
            .app
            .post(
                &format!("/sync/conflicts/{conflict}/resolve"),
                &t.admin,
                bad,
            )
            .await;
        assert_problem(s, &b, StatusCode::BAD_REQUEST);
    }
    let (s, b) = resolve(&t, &Uuid::now_v7().to_string(), "server").await;
    assert_problem(s, &b, StatusCode::NOT_FOUND);
    let (s, b) = t
        .app
        .post(
            &format!("/sync/conflicts/{conflict}/resolve"),
            &t.cashier,
            json!({"strategy": "server"}),
        )
        .await;
    assert_problem(s, &b, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn concurrent_resolves_of_one_conflict_resolve_it_once() {
    let t = Till::open(0).await;
    let (_, body) = stale_update(&t, json!({"name": "Sarah N."}), json!({"name": "Sara"})).await;
    let conflict = conflict_of(&body);
    let answers = join_all((0..6).map(|_| resolve(&t, &conflict, "client"))).await;
    let statuses: HashSet<StatusCode> = answers.iter().map(|a| a.0).collect();
    assert_eq!(
        answers.iter().filter(|a| a.0 == StatusCode::OK).count(),
        1,
        "{statuses:?}"
    );
    assert!(answers
        .iter()
        .all(|a| a.0 == StatusCode::OK || a.0 == StatusCode::CONFLICT));
}

#[tokio::test]
async fn pushed_deletes_travel_as_tombstones() {
    let t = Till::open(0).await;
    let (_, c) = t
        .app
        .post("/customers", &t.admin, json!({"name": "Gone Soon"}))
        .await;
    let (_, b) = t
        .push(
            &t.cashier,
            &t.device,
            vec![customer_change("del", "delete", json!({"id": c["id"]}))],
        )
        .await;
    assert_eq!(b["accepted"][0]["id"], c["id"], "{b}");
    let (s, _) = t
        .app
        .get(
            &format!("/customers/{}", c["id"].as_str().unwrap()),
            &t.admin,
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let client = t.app.pool.get().await.unwrap();
    let op: String = client
        .query_one(
            "SELECT op FROM change_log WHERE entity = 'customer' ORDER BY rev DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(op, "delete");
}

/// How many transactions stored the `push_mutations` rows: `created_at`
/// defaults to `now()`, the start of the claiming transaction.
async fn push_commits(t: &Till) -> i64 {
    t.scalar("SELECT count(DISTINCT created_at) FROM push_mutations")
        .await
}

fn cmids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["client_mutation_id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_refused_sale_in_a_run_rolls_back_alone_and_the_run_replays_identically() {
    let t = Till::open(10).await;
    let batch = vec![
        t.sale("r-0", 2),
        t.sale("r-1", 2),
        t.sale("r-2", 100),
        t.sale("r-3", 2),
        t.sale("r-4", 2),
    ];
    let (status, first) = t.push(&t.cashier, &t.device, batch.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(cmids(&first["accepted"]), ["r-0", "r-1", "r-3", "r-4"]);
    let icvs: Vec<i64> = first["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["icv"].as_i64().unwrap())
        .collect();
    assert_eq!(icvs, [1, 2, 3, 4], "gapless, in the batch's order");
    assert_eq!(cmids(&first["rejected"]), ["r-2"]);
    assert_eq!(first["rejected"][0]["code"], "insufficient_stock");
    // The five changes, the refused one too, share one commit.
    assert_eq!(push_commits(&t).await, 1);
    let stock = "SELECT coalesce(sum(qty_remaining),0)::bigint FROM batches";
    assert_eq!(t.scalar(stock).await, 2);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 4);
    assert_eq!(
        t.scalar("SELECT count(*) FROM push_mutations WHERE outcome = 'rejected'")
            .await,
        1
    );
    // Replayed: the same answer, nothing more written.
    let again = t.push(&t.cashier, &t.device, batch).await;
    assert_eq!(again, (StatusCode::OK, first));
    assert_eq!(t.scalar(stock).await, 2);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 4);
    assert_eq!(t.scalar("SELECT count(*) FROM push_mutations").await, 5);
    assert_eq!(push_commits(&t).await, 1);
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn a_customer_between_sales_keeps_the_order_and_splits_the_runs() {
    let t = Till::open(10).await;
    let id = Uuid::now_v7();
    let changes = vec![
        t.sale("m-1", 1),
        t.sale("m-2", 1),
        customer_change("m-3", "create", json!({"id": id, "name": "Nakato"})),
        t.sale("m-4", 1),
        customer_change("m-5", "create", json!({"name": "Wasswa"})),
        t.sale("m-6", 1),
        t.sale("m-7", 1),
    ];
    let (status, body) = t.push(&t.cashier, &t.device, changes).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"], json!([]));
    assert_eq!(
        cmids(&body["accepted"]),
        ["m-1", "m-2", "m-3", "m-4", "m-5", "m-6", "m-7"]
    );
    let icvs: Vec<Value> = body["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["icv"].clone())
        .collect();
    assert_eq!(
        icvs,
        [
            json!(1),
            json!(2),
            Value::Null,
            json!(3),
            Value::Null,
            json!(4),
            json!(5)
        ]
    );
    assert_eq!(body["accepted"][2]["id"], json!(id));
    // Runs [m-1 m-2], [m-4], [m-6 m-7] and each customer: five commits.
    assert_eq!(push_commits(&t).await, 5);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 5);
    assert_eq!(
        t.scalar("SELECT count(*) FROM customers WHERE name IN ('Nakato', 'Wasswa')")
            .await,
        2
    );
    assert_eq!(
        t.scalar("SELECT coalesce(sum(qty_remaining),0)::bigint FROM batches")
            .await,
        5
    );
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn a_mutation_id_repeated_within_a_run_has_one_effect_and_replays_its_first_answer() {
    let t = Till::open(10).await;
    let changes = vec![
        t.sale("d-a", 1),
        t.sale("d-r", 1000),
        t.sale("d-a", 1),
        t.sale("d-r", 1000),
        t.sale("d-a", 2),
    ];
    let (status, body) = t.push(&t.cashier, &t.device, changes.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let accepted = body["accepted"].as_array().unwrap();
    assert_eq!(accepted.len(), 2, "{body}");
    assert_eq!(
        accepted[0], accepted[1],
        "the repeat replays the first answer"
    );
    assert_eq!(accepted[0]["icv"], 1);
    let rejected = body["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 3, "{body}");
    assert_eq!(rejected[0]["code"], "insufficient_stock");
    assert_eq!(rejected[0], rejected[1], "a rejection replays as rejected");
    assert_eq!(rejected[2]["client_mutation_id"], "d-a");
    assert_eq!(rejected[2]["code"], "idempotency_mismatch");
    // One sale, one stored key per mutation id, all in one commit.
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 1);
    assert_eq!(t.scalar("SELECT count(*) FROM push_mutations").await, 2);
    assert_eq!(push_commits(&t).await, 1);
    assert_eq!(
        t.scalar("SELECT coalesce(sum(qty_remaining),0)::bigint FROM batches")
            .await,
        9
    );
    // The whole batch again: the same answer, nothing more.
    let again = t.push(&t.cashier, &t.device, changes).await;
    assert_eq!(again, (StatusCode::OK, body));
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 1);
    t.app.assert_invariants().await;
}

/// `Till::open(stock)` on an app whose statements time out after `ms`.
async fn till_with_statement_timeout(stock: i64, ms: u64) -> Till {
    let app = TestApp::spawn_with(|c| c.database.statement_timeout_ms = ms).await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let device = device(&app, &admin, branch).await;
    let medicine = app
        .medicine(
            &admin,
            json!({"name": "Paracetamol 500mg", "selling_price": 500}),
        )
        .await;
    app.receive(&admin, &medicine["id"], branch, stock, "2030-12-31")
        .await;
    Till {
        app,
        branch,
        admin,
        cashier,
        device,
        medicine,
    }
}

#[tokio::test]
async fn a_fault_in_a_run_falls_back_to_one_transaction_per_sale_and_stops_at_the_fault() {
    let t = till_with_statement_timeout(10, 500).await;
    let batch = vec![t.sale("f-1", 1), t.sale("f-2", 1), t.sale("f-3", 1)];
    // Another process holds f-2's key, uncommitted: claiming it times out,
    // in the shared transaction and again on its own.
    let mut holder = t.app.pool.get().await.unwrap();
    let held = holder.transaction().await.unwrap();
    held.execute(
        "INSERT INTO push_mutations (device_id, client_mutation_id, request_digest, entity, op)
         VALUES ($1::text::uuid, 'f-2', 'held', 'sale', 'create')",
        &[&t.device],
    )
    .await
    .unwrap();
    let (status, body) = t.push(&t.cashier, &t.device, batch.clone()).await;
    assert_problem(status, &body, StatusCode::SERVICE_UNAVAILABLE);
    // The shared transaction rolled back; f-1 was then made on its own and
    // the batch stopped at f-2, before f-3.
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 1);
    assert_eq!(
        t.scalar("SELECT count(*) FROM push_mutations WHERE client_mutation_id = 'f-1'")
            .await,
        1
    );
    held.rollback().await.unwrap();
    // The device retries: f-1 replays, the rest applies, icv stays gapless.
    let (status, body) = t.push(&t.cashier, &t.device, batch).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"], json!([]));
    assert_eq!(cmids(&body["accepted"]), ["f-1", "f-2", "f-3"]);
    let icvs: Vec<i64> = body["accepted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["icv"].as_i64().unwrap())
        .collect();
    assert_eq!(icvs, [1, 2, 3]);
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 3);
    assert_eq!(
        t.scalar("SELECT coalesce(sum(qty_remaining),0)::bigint FROM batches")
            .await,
        7
    );
    t.app.assert_invariants().await;
}

#[tokio::test]
async fn a_pushed_return_issues_a_credit_note_once_and_keeps_the_return_rules() {
    let t = Till::open(10).await;
    // An admin's till issues at once (a cashier's return waits for approval).
    let admin = t.admin.clone();
    let (status, body) = t.push(&admin, &t.device, vec![t.sale("s-1", 4)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sale_id = body["accepted"][0]["id"].as_str().unwrap().to_owned();
    let (_, sale) = t.app.get(&format!("/sales/{sale_id}"), &t.admin).await;
    let line = sale["items"][0]["id"].clone();
    let giving_back = |cmid: &str, qty: i64| {
        json!({"client_mutation_id": cmid, "entity": "sale_return", "op": "create",
               "payload": {"sale_id": sale_id, "reason": "wrong strength",
                           "items": [{"sale_item_id": line, "quantity": qty}]}})
    };
    let changes = vec![giving_back("r-1", 3), giving_back("r-2", 2)];
    let (status, body) = t.push(&admin, &t.device, changes.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["accepted"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["accepted"][0]["invoice_number"], "KLA-CN-00000001");
    assert_eq!(body["accepted"][0]["icv"], 1);
    // More than is left on the line: refused as over REST.
    assert_eq!(body["rejected"][0]["client_mutation_id"], "r-2");
    assert_eq!(body["rejected"][0]["code"], "return_exceeds_sold");
    // The batch again: the same answers, one credit note.
    let again = t.push(&admin, &t.device, changes).await;
    assert_eq!(again, (StatusCode::OK, body));
    assert_eq!(
        t.scalar("SELECT count(*) FROM sale_returns WHERE cn_seq IS NOT NULL")
            .await,
        1
    );
    // A role that may not take a sale back is refused per change.
    let (_, auditor) = t.app.signed_in(t.branch, Role::Auditor).await;
    let (status, body) = t
        .push(&auditor, &t.device, vec![giving_back("r-3", 1)])
        .await;
    if status == StatusCode::OK {
        assert_eq!(body["rejected"][0]["code"], "forbidden", "{body}");
    } else {
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
    t.app.assert_invariants().await;
}

async fn last_seen(t: &Till) -> Option<chrono::DateTime<chrono::Utc>> {
    let client = t.app.pool.get().await.unwrap();
    let id: Uuid = t.device.parse().unwrap();
    client
        .query_one("SELECT last_seen_at FROM devices WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

/// `last_seen_at` is written at most once a minute per device, so a push
/// does not pay a commit of its own for it.
#[tokio::test]
async fn a_push_writes_last_seen_at_at_most_once_a_minute() {
    let t = Till::open(10).await;
    assert_eq!(last_seen(&t).await, None);
    let (status, _) = t.push(&t.cashier, &t.device, vec![t.sale("m-1", 1)]).await;
    assert_eq!(status, StatusCode::OK);
    let first = last_seen(&t).await.expect("the first push is recorded");
    for i in 2..5 {
        let (status, _) = t
            .push(&t.cashier, &t.device, vec![t.sale(&format!("m-{i}"), 1)])
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            last_seen(&t).await,
            Some(first),
            "written again within a minute"
        );
    }
    // A minute later it moves again.
    let client = t.app.pool.get().await.unwrap();
    let id: Uuid = t.device.parse().unwrap();
    client
        .execute(
            "UPDATE devices SET last_seen_at = now() - interval '61 seconds' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let stale = last_seen(&t).await.unwrap();
    let (status, _) = t.push(&t.cashier, &t.device, vec![t.sale("m-9", 1)]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(last_seen(&t).await.unwrap() > stale);
}

/// A replayed batch is answered from the stored answers before anything
/// runs: even while the branch's actor is stuck behind a locked batch, the
/// replay answers at once and byte for byte as the first time (the old push
/// queued replayed sales on the branch's actor).
#[tokio::test]
async fn a_replayed_push_is_answered_without_the_branch_actor() {
    let t = Till::open(10).await;
    let batch = vec![
        t.sale("b-1", 1),
        customer_change("b-2", "create", json!({"name": "Replayed"})),
        t.sale("b-3", 1),
    ];
    let (status, first) = t.push(&t.cashier, &t.device, batch.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(cmids(&first["accepted"]), ["b-1", "b-2", "b-3"]);
    // Lock the branch's stock: a REST sale enters the branch actor and
    // waits there on the lock.
    let mut locker = t.app.pool.get().await.unwrap();
    let tx = locker.transaction().await.unwrap();
    tx.execute(
        "SELECT id FROM batches WHERE branch_id = $1 FOR UPDATE",
        &[&t.branch],
    )
    .await
    .unwrap();
    let stuck = tokio::spawn({
        let (http, url, token) = (t.app.http.clone(), t.app.base.clone(), t.cashier.clone());
        let body = json!({"items": [{"medicine_id": t.medicine["id"], "quantity": 1}], "payment_method": "cash"});
        async move {
            http.post(format!("{url}/sales"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stuck.is_finished(), "the REST sale waits on the lock");
    let replay = tokio::time::timeout(
        Duration::from_secs(2),
        t.push(&t.cashier, &t.device, batch.clone()),
    )
    .await
    .expect("the replay waited for the branch's actor");
    assert_eq!(replay.0, StatusCode::OK);
    assert_eq!(replay.1, first, "the replay answers byte for byte");
    tx.rollback().await.unwrap();
    assert_eq!(stuck.await.unwrap(), StatusCode::CREATED);
    // Nothing doubled: two pushed sales, one REST sale.
    assert_eq!(t.scalar("SELECT count(*) FROM sales").await, 3);
}

#[tokio::test]
async fn a_pushed_return_naming_another_branch_is_forbidden() {
    let t = Till::open(10).await;
    let admin = t.admin.clone();
    let (status, body) = t.push(&admin, &t.device, vec![t.sale("s-1", 2)]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sale_id = body["accepted"][0]["id"].as_str().unwrap().to_owned();
    let (_, sale) = t.app.get(&format!("/sales/{sale_id}"), &admin).await;
    let other = t.app.branch("GUL").await;
    let change = json!({"client_mutation_id": "r-1", "entity": "sale_return", "op": "create",
        "payload": {"sale_id": sale_id, "branch_id": other, "reason": "wrong strength",
                    "items": [{"sale_item_id": sale["items"][0]["id"], "quantity": 1}]}});
    let (status, body) = t.push(&admin, &t.device, vec![change]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"][0]["code"], "forbidden", "{body}");
    assert_eq!(t.scalar("SELECT count(*) FROM sale_returns").await, 0);
}

#[tokio::test]
async fn a_pushed_cash_refund_of_a_credit_sale_still_owed_is_refused() {
    let t = Till::open(10).await;
    let admin = t.admin.clone();
    let customer = Uuid::now_v7();
    let client = t.app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO customers (id, name, is_credit_allowed, credit_limit)
             VALUES ($1, 'Akello', true, 50000)",
            &[&customer],
        )
        .await
        .unwrap();
    let (status, sale) = t
        .app
        .post(
            "/sales",
            &admin,
            json!({"items": [{"medicine_id": t.medicine["id"], "quantity": 2}],
                   "payment_method": "credit", "customer_id": customer}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let giving_back = |cmid: &str, method: &str| {
        json!({"client_mutation_id": cmid, "entity": "sale_return", "op": "create",
               "payload": {"sale_id": sale["id"], "reason": "wrong strength",
                           "refund_method": method,
                           "items": [{"sale_item_id": sale["items"][0]["id"], "quantity": 1}]}})
    };
    let (status, body) = t
        .push(&admin, &t.device, vec![giving_back("r-1", "cash")])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"][0]["code"], "refund_to_account", "{body}");
    assert_eq!(t.scalar("SELECT count(*) FROM sale_returns").await, 0);
    let (status, body) = t
        .push(&admin, &t.device, vec![giving_back("r-2", "credit")])
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["accepted"].as_array().unwrap().len(), 1, "{body}");
}
