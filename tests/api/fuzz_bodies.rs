//! Property-based fuzzing of the request bodies of `POST /sales` and
//! `POST /sync/push`: arbitrary JSON shapes, and valid bodies with parts
//! swapped for arbitrary JSON, never get a 5xx, every refusal is a problem
//! body, a refused request changes nothing, and whatever was accepted keeps
//! every ledger invariant.
//!
//! Cases per test: `FUZZ_BODIES_CASES` (default 150); the generator's seed:
//! `FUZZ_BODIES_SEED` (default: fixed, printed on failure), e.g.
//! `FUZZ_BODIES_CASES=2000 cargo test --test api -- fuzz_bodies::`.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use reqwest::StatusCode;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::common::{Role, TestApp};

fn cases() -> usize {
    std::env::var("FUZZ_BODIES_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(150)
}

fn seed() -> u64 {
    std::env::var("FUZZ_BODIES_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_f00d)
}

fn runner(salt: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&(seed() ^ salt).to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// Ids and words the server knows, so arbitrary shapes reach deep code.
struct Known {
    medicine: String,
    controlled: String,
    customer: String,
    branch: String,
    other_branch: String,
    device: String,
}

fn field_names() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "items", "medicine_id", "quantity", "unit_price", "payment_method",
            "customer_id", "prescription_id", "coupon_code", "client_mutation_id",
            "branch_id", "device_id", "changes", "entity", "op", "payload", "id",
            "base_rev", "occurred_at", "name", "phone", "credit_limit",
            "is_credit_allowed", "selling_price", "barcode", "updated_at",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z_]{0,12}",
        1 => any::<String>(),
    ]
}

fn scalar(known: &Known) -> BoxedStrategy<Value> {
    let ids = vec![
        known.medicine.clone(),
        known.controlled.clone(),
        known.customer.clone(),
        known.branch.clone(),
        known.other_branch.clone(),
        known.device.clone(),
        Uuid::nil().to_string(),
        Uuid::now_v7().to_string(),
    ];
    let words = vec![
        "cash",
        "card",
        "mobile_money",
        "credit",
        "sale",
        "customer",
        "supplier",
        "medicine",
        "create",
        "update",
        "delete",
        "",
        " ",
        "null",
        "NaN",
        "-1",
        "0",
        "1e400",
        "99999999999999999999999999",
        "0.001",
        "1.005",
        "2026-02-30",
        "2020-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "\u{0000}",
        "'; DROP TABLE sales; --",
    ];
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-5i64..20).prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("JSON has no NaN or infinity", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        (-100.0f64..10_000.0).prop_map(|f| json!(f)),
        prop::sample::select(ids).prop_map(Value::String),
        prop::sample::select(words).prop_map(|w| Value::String(w.to_owned())),
        any::<String>().prop_map(Value::String),
        "[0-9.eE+-]{1,30}".prop_map(Value::String),
    ]
    .boxed()
}

/// Any JSON value, up to four levels deep.
fn arbitrary(known: &Known) -> BoxedStrategy<Value> {
    scalar(known)
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((field_names(), inner), 0..7)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .boxed()
}

/// A value that is usually of the right kind and sometimes anything.
fn mostly(valid: BoxedStrategy<Value>, known: &Known) -> BoxedStrategy<Value> {
    prop_oneof![12 => valid, 1 => arbitrary(known)].boxed()
}

/// Sale bodies: valid ones with parts replaced, and arbitrary shapes.
fn sale_body(known: &Known) -> BoxedStrategy<Value> {
    let line = (
        mostly(
            prop_oneof![
                5 => Just(Value::String(known.medicine.clone())),
                1 => Just(Value::String(known.controlled.clone())),
            ]
            .boxed(),
            known,
        ),
        mostly((1i64..4).prop_map(|n| json!(n)).boxed(), known),
        prop::option::of(mostly((1i64..2000).prop_map(|n| json!(n)).boxed(), known)),
    )
        .prop_map(|(m, q, p)| {
            let mut line = json!({"medicine_id": m, "quantity": q});
            if let Some(p) = p {
                line["unit_price"] = p;
            }
            line
        });
    // Optional parts: usually absent or right, sometimes anything.
    let rarely = |valid: BoxedStrategy<Value>| -> BoxedStrategy<Option<Value>> {
        prop_oneof![
            12 => Just(None),
            6 => valid.prop_map(Some),
            1 => arbitrary(known).prop_map(Some),
        ]
        .boxed()
    };
    let structured = (
        mostly(
            prop::collection::vec(line, 0..4)
                .prop_map(Value::Array)
                .boxed(),
            known,
        ),
        mostly(
            prop::sample::select(vec!["cash", "card", "mobile_money", "credit"])
                .prop_map(|s| json!(s))
                .boxed(),
            known,
        ),
        rarely(Just(json!(known.customer)).boxed()),
        rarely(Just(json!("NO-SUCH-COUPON")).boxed()),
        rarely("[a-z0-9-]{1,40}".prop_map(Value::String).boxed()),
        rarely(
            prop_oneof![
                3 => Just(json!(known.branch)),
                1 => Just(json!(known.other_branch)),
            ]
            .boxed(),
        ),
    )
        .prop_map(|(items, method, customer, coupon, cmid, branch)| {
            let mut body = json!({"items": items, "payment_method": method});
            for (key, value) in [
                ("customer_id", customer),
                ("coupon_code", coupon),
                ("client_mutation_id", cmid),
                ("branch_id", branch),
            ] {
                if let Some(v) = value {
                    body[key] = v;
                }
            }
            body
        });
    prop_oneof![3 => structured, 1 => arbitrary(known)].boxed()
}

/// Push bodies: batches of changes of every entity and op, with payloads
/// that are sales, records or anything.
fn push_body(known: &Known) -> BoxedStrategy<Value> {
    let payload = prop_oneof![
        2 => sale_body(known),
        1 => (
            mostly("[A-Za-z ]{0,20}".prop_map(Value::String).boxed(), known),
            prop::option::of(mostly(Just(json!(known.customer)).boxed(), known)),
            prop::option::of(arbitrary(known)),
        )
            .prop_map(|(name, id, base_rev)| {
                let mut p = json!({"name": name});
                if let Some(id) = id {
                    p["id"] = id;
                }
                if let Some(rev) = base_rev {
                    p["base_rev"] = rev;
                }
                p
            }),
        1 => arbitrary(known),
    ];
    // Entity, op and payload drawn together, so most changes are ones a
    // till would send; the rest are anything.
    let kinds = prop_oneof![
        4 => (Just(json!("sale")), Just(json!("create")), sale_body(known)),
        2 => (Just(json!("customer")), Just(json!("create")), payload.clone()),
        1 => (Just(json!("customer")), Just(json!("update")), payload.clone()),
        2 => (
            mostly(
                prop::sample::select(vec![
                    "sale", "customer", "supplier", "medicine", "batch", "user",
                ])
                .prop_map(|s| json!(s))
                .boxed(),
                known,
            ),
            mostly(
                prop::sample::select(vec!["create", "update", "delete", "upsert"])
                    .prop_map(|s| json!(s))
                    .boxed(),
                known,
            ),
            payload,
        ),
    ];
    let change = (
        prop_oneof![
            12 => "[a-z0-9-]{8,24}".prop_map(|c| Some(Value::String(c))),
            1 => Just(None),
            1 => arbitrary(known).prop_map(Some),
        ],
        kinds,
    )
        .prop_map(|(cmid, (entity, op, payload))| {
            let mut c = json!({"entity": entity, "op": op, "payload": payload});
            if let Some(cmid) = cmid {
                c["client_mutation_id"] = cmid;
            }
            c
        });
    let structured = (
        mostly(Just(json!(known.device)).boxed(), known),
        mostly(
            prop::collection::vec(prop_oneof![4 => change, 1 => arbitrary(known)], 0..6)
                .prop_map(Value::Array)
                .boxed(),
            known,
        ),
    )
        .prop_map(|(device, changes)| json!({"device_id": device, "changes": changes}));
    prop_oneof![4 => structured, 1 => arbitrary(known)].boxed()
}

/// Everything a sale or a pushed change can write, in one row.
async fn fingerprint(app: &TestApp) -> Vec<String> {
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT (SELECT count(*) FROM sales)::text,
                    (SELECT count(*) FROM sale_items)::text,
                    (SELECT count(*) FROM stock_movements)::text,
                    (SELECT coalesce(sum(qty_remaining), 0) FROM batches)::text,
                    (SELECT count(*) FROM customers)::text,
                    (SELECT coalesce(sum(current_balance), 0) FROM customers)::text,
                    (SELECT count(*) FROM customer_ledger)::text,
                    (SELECT count(*) FROM suppliers)::text,
                    (SELECT count(*) FROM medicines)::text,
                    (SELECT coalesce(sum(usage_count), 0) FROM coupons)::text,
                    (SELECT coalesce(max(last_icv), 0) FROM invoice_counters)::text,
                    (SELECT coalesce(max(rev), 0) FROM change_log)::text,
                    (SELECT count(*) FROM sync_conflicts)::text",
            &[],
        )
        .await
        .unwrap();
    (0..row.len()).map(|i| row.get::<_, String>(i)).collect()
}

struct Shop {
    app: TestApp,
    cashier: String,
    known: Known,
}

async fn shop() -> Shop {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let other = app.branch("EBB").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let medicine = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
        .await;
    let controlled = app
        .medicine(
            &admin,
            json!({"name": "Morphine", "selling_price": 900, "is_controlled": true,
                   "requires_prescription": true}),
        )
        .await;
    for m in [&medicine, &controlled] {
        app.receive(&admin, &m["id"], branch, 100_000, "2035-12-31")
            .await;
    }
    let (status, customer) = app
        .post(
            "/customers",
            &admin,
            json!({"name": "Credit Customer", "is_credit_allowed": true, "credit_limit": 1_000_000}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{customer}");
    let (status, device) = app
        .post(
            "/devices",
            &admin,
            json!({"name": "Till", "branch_id": branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{device}");
    let known = Known {
        medicine: medicine["id"].as_str().unwrap().to_owned(),
        controlled: controlled["id"].as_str().unwrap().to_owned(),
        customer: customer["id"].as_str().unwrap().to_owned(),
        branch: branch.to_string(),
        other_branch: other.to_string(),
        device: device["id"].as_str().unwrap().to_owned(),
    };
    Shop {
        app,
        cashier,
        known,
    }
}

/// Sends `body` (as JSON, or as the raw text for a fraction of cases).
async fn send(
    app: &TestApp,
    path: &str,
    token: &str,
    body: &Value,
    raw: bool,
) -> (StatusCode, Value) {
    let mut bytes = body.to_string().into_bytes();
    if raw {
        // Cut the JSON text short (maybe inside a character): a body that is
        // not JSON, perhaps not even UTF-8.
        bytes.truncate(bytes.len() / 2);
    }
    let res = app
        .http
        .post(format!("{}{path}", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(bytes)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let content_type = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let answer: Value = serde_json::from_str(&res.text().await.unwrap()).unwrap_or(Value::Null);
    if !status.is_success() {
        assert_eq!(
            content_type, "application/problem+json",
            "{status}: {answer}"
        );
        assert!(answer["detail"].is_string(), "{status}: {answer}");
    }
    (status, answer)
}

/// Runs `count` generated bodies against `path`; `accepted` tells whether an
/// answer may have changed state.
async fn fuzz(
    shop: &Shop,
    path: &str,
    strategy: BoxedStrategy<Value>,
    salt: u64,
    accepted: fn(StatusCode, &Value) -> bool,
) -> (usize, usize) {
    let mut runner = runner(salt);
    let (mut refused, mut applied) = (0, 0);
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for i in 0..cases() {
        let body = strategy.new_tree(&mut runner).unwrap().current();
        let raw = i % 17 == 16;
        let before = fingerprint(&shop.app).await;
        let (status, answer) = send(&shop.app, path, &shop.cashier, &body, raw).await;
        let context = || {
            format!(
                "seed {} case {i} POST {path} {}\nbody: {body}\nanswer {status}: {answer}",
                seed(),
                if raw { "(truncated text)" } else { "" }
            )
        };
        assert!(!status.is_server_error(), "server error: {}", context());
        if accepted(status, &answer) {
            applied += 1;
        } else {
            refused += 1;
            let reason = answer["detail"]
                .as_str()
                .or_else(|| answer["rejected"][0]["message"].as_str())
                .unwrap_or("(none)")
                .chars()
                .take(48)
                .collect::<String>();
            *reasons
                .entry(format!("{} {reason}", status.as_u16()))
                .or_default() += 1;
            assert_eq!(
                fingerprint(&shop.app).await,
                before,
                "a refused request changed state: {}",
                context()
            );
        }
    }
    shop.app.assert_invariants().await;
    let mut top: Vec<_> = reasons.into_iter().collect();
    top.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for (reason, n) in top.iter().take(6) {
        eprintln!("fuzz_bodies {path}: refused {n} x {reason}");
    }
    (refused, applied)
}

#[tokio::test]
async fn arbitrary_sale_bodies_never_5xx_and_refusals_change_nothing() {
    let shop = shop().await;
    let strategy = sale_body(&shop.known);
    let (refused, applied) = fuzz(&shop, "/sales", strategy, 1, |status, _| {
        status == StatusCode::CREATED || status == StatusCode::OK
    })
    .await;
    eprintln!("fuzz_bodies /sales: {refused} refused, {applied} applied");
    assert!(
        refused > 0 && applied > 0,
        "the generator reaches both outcomes"
    );
}

#[tokio::test]
async fn arbitrary_push_bodies_never_5xx_and_refusals_change_nothing() {
    let shop = shop().await;
    let strategy = push_body(&shop.known);
    let (refused, applied) = fuzz(&shop, "/sync/push", strategy, 2, |status, answer| {
        // An accepted change writes; so does a `conflict` rejection (it
        // records the conflict for head office). Nothing else may.
        status == StatusCode::OK
            && (answer["accepted"].as_array().is_some_and(|a| !a.is_empty())
                || answer["rejected"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|e| e["code"] == "conflict")))
    })
    .await;
    eprintln!("fuzz_bodies /sync/push: {refused} refused, {applied} applied");
    assert!(refused > 0, "the generator reaches refusals");
}
