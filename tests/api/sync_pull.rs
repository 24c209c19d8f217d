use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A field's JSON type as the spec's snapshot entities state it.
#[derive(Debug, Clone, Copy)]
enum T {
    Str,
    /// A JSON number.
    Num,
    /// A JSON integer.
    Int,
    /// The integer 0 or 1.
    Int01,
    /// RFC 3339 UTC with milliseconds and `Z`.
    Ts,
    Date,
    OptStr,
    OptNum,
    OptTs,
    OptDate,
}

fn is_ts(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 24 && s.ends_with('Z') && s.as_bytes()[19] == b'.')
}

fn is_date(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok())
}

fn has_type(v: &Value, t: T) -> bool {
    match t {
        T::Str => v.is_string(),
        T::Num => v.is_number(),
        T::Int => v.is_i64(),
        T::Int01 => v.as_u64().is_some_and(|n| n <= 1),
        T::Ts => is_ts(v),
        T::Date => is_date(v),
        T::OptStr => v.is_null() || v.is_string(),
        T::OptNum => v.is_null() || v.is_number(),
        T::OptTs => v.is_null() || is_ts(v),
        T::OptDate => v.is_null() || is_date(v),
    }
}

/// Every listed field is present with its type (and `rev` is an integer).
fn assert_shape(entity: &str, obj: &Value, fields: &[(&str, T)]) {
    for (field, t) in fields.iter().chain(&[("rev", T::Int)]) {
        let v = obj
            .get(*field)
            .unwrap_or_else(|| panic!("{entity}.{field} missing: {obj}"));
        assert!(has_type(v, *t), "{entity}.{field} is not {t:?}: {obj}");
    }
}

const BRANCH: &[(&str, T)] = &[
    ("id", T::Str),
    ("code", T::Str),
    ("name", T::Str),
    ("city", T::Str),
    ("vat_number", T::Str),
    ("address", T::Str),
    ("image_url", T::Str),
    ("is_active", T::Int01),
    ("is_deleted", T::Int01),
    ("created_at", T::Ts),
    ("updated_at", T::Ts),
];

const MEDICINE: &[(&str, T)] = &[
    ("id", T::Str),
    ("name", T::Str),
    ("generic_name", T::Str),
    ("barcode", T::Str),
    ("category", T::Str),
    ("form", T::Str),
    ("strength", T::Str),
    ("unit", T::Str),
    ("selling_price", T::Num),
    ("stock_quantity", T::Num),
    ("low_stock_threshold", T::Num),
    ("requires_prescription", T::Int01),
    ("is_controlled", T::Int01),
    ("control_schedule", T::Str),
    ("vat_category", T::Str),
    ("requires_cold_chain", T::Int01),
    ("regulator_registration_no", T::Str),
    ("max_public_price", T::Num),
    ("image_key", T::Str),
    ("image_url", T::Str),
    ("is_active", T::Int01),
    ("is_deleted", T::Int01),
    ("created_at", T::Ts),
    ("updated_at", T::Ts),
];

const SUPPLIER: &[(&str, T)] = &[
    ("id", T::Str),
    ("name", T::Str),
    ("tax_number", T::Str),
    ("contact_person", T::Str),
    ("phone", T::Str),
    ("email", T::Str),
    ("address", T::Str),
    ("image_url", T::Str),
    ("supplier_type", T::Str),
    ("lead_time_days", T::Num),
    ("reliability_score", T::Num),
    ("is_active", T::Int01),
    ("is_deleted", T::Int01),
    ("created_at", T::Ts),
    ("updated_at", T::Ts),
];

const COUPON: &[(&str, T)] = &[
    ("id", T::Str),
    ("code", T::Str),
    ("type", T::Str),
    ("discount_type", T::Str),
    ("discount_value", T::Num),
    ("description", T::Str),
    ("applies_to", T::Str),
    ("applies_to_id", T::OptStr),
    ("valid_from", T::OptTs),
    ("valid_until", T::OptTs),
    ("max_uses", T::OptNum),
    ("image_url", T::Str),
    ("usage_count", T::Num),
    ("is_active", T::Int01),
    ("is_deleted", T::Int01),
    ("created_by", T::Str),
    ("created_at", T::Ts),
    ("updated_at", T::Ts),
];

const CUSTOMER: &[(&str, T)] = &[
    ("id", T::Str),
    ("name", T::Str),
    ("phone", T::Str),
    ("national_id", T::Str),
    ("notes", T::Str),
    ("image_url", T::Str),
    ("created_at", T::Ts),
    ("updated_at", T::Ts),
    ("is_credit_allowed", T::Int01),
    ("credit_limit", T::Num),
    ("current_balance", T::Num),
    ("is_deleted", T::Int01),
];

const USER: &[(&str, T)] = &[
    ("id", T::Str),
    ("branch_id", T::Str),
    ("email", T::Str),
    ("full_name", T::Str),
    ("phone", T::Str),
    ("role", T::Str),
    ("is_active", T::Int01),
    ("is_deleted", T::Int01),
    ("last_login_at", T::OptTs),
    ("created_at", T::Ts),
    ("updated_at", T::Ts),
];

const BATCH: &[(&str, T)] = &[
    ("id", T::Str),
    ("medicine_id", T::Str),
    ("branch_id", T::Str),
    ("supplier_id", T::OptStr),
    ("batch_number", T::Str),
    ("expiry_date", T::Date),
    ("manufacturing_date", T::OptDate),
    ("qty_received", T::Num),
    ("qty_remaining", T::Num),
    ("unit_cost", T::Num),
    ("status", T::Str),
    ("regulator_status", T::Str),
    ("is_deleted", T::Int01),
    ("created_at", T::Ts),
];

const CATEGORY: &[(&str, T)] = &[("slug", T::Str), ("name", T::Str), ("created_at", T::Ts)];

fn items<'a>(snapshot: &'a Value, key: &str) -> &'a Vec<Value> {
    snapshot[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array: {snapshot}"))
}

fn ids(list: &[Value]) -> HashSet<String> {
    list.iter()
        .map(|v| v["id"].as_str().unwrap().to_owned())
        .collect()
}

fn find<'a>(list: &'a [Value], id: &Value) -> &'a Value {
    list.iter()
        .find(|v| v["id"] == *id)
        .unwrap_or_else(|| panic!("{id} not in {list:?}"))
}

async fn snapshot(app: &TestApp, token: &str) -> Value {
    let (status, s) = app.get("/sync/snapshot", token).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    s
}

async fn customer(app: &TestApp, token: &str, body: Value) -> Value {
    let (status, c) = app.post("/customers", token, body).await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    c
}

/// Pages through the feed from `since` with `limit`; returns every change
/// and the final cursor.
async fn drain(app: &TestApp, token: &str, since: i64, limit: i64) -> (Vec<Value>, i64) {
    let (mut cursor, mut all) = (since, Vec::new());
    loop {
        let (status, page) = app
            .get(
                &format!("/sync/changes?since={cursor}&limit={limit}"),
                token,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let changes = page["changes"].as_array().unwrap();
        assert!(changes.len() as i64 <= limit);
        let next = page["max_rev"].as_i64().unwrap();
        assert!(next >= cursor, "the cursor never goes back");
        all.extend(changes.iter().cloned());
        cursor = next;
        if !page["has_more"].as_bool().unwrap() {
            return (all, cursor);
        }
        assert_eq!(changes.last().unwrap()["rev"], next);
    }
}

fn revs(changes: &[Value]) -> Vec<i64> {
    changes.iter().map(|c| c["rev"].as_i64().unwrap()).collect()
}

/// A small chain: two branches with a batch each of one medicine, a
/// coupon, a customer, a supplier, a category.
struct Chain {
    app: TestApp,
    a: Uuid,
    b: Uuid,
    admin: String,
    cashier_b: String,
    medicine: Value,
    batch_a: Value,
    batch_b: Value,
}

async fn chain() -> Chain {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
    let medicine = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin 500mg", "selling_price": 1500, "category": "Antibiotics",
                   "max_public_price": "2000.50", "requires_cold_chain": true}),
        )
        .await;
    let batch_a = app
        .receive(&admin, &medicine["id"], a, 30, "2031-01-31")
        .await;
    let batch_b = app
        .receive(&admin, &medicine["id"], b, 12, "2031-02-28")
        .await;
    let (status, coupon) = app
        .post(
            "/coupons",
            &admin,
            json!({"code": "save10", "discount_type": "percentage", "discount_value": 10,
                   "valid_from": "2026-01-01", "valid_until": "2030-12-31T23:59:59Z",
                   "max_uses": 100}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{coupon}");
    customer(
        &app,
        &admin,
        json!({"name": "Akello Grace", "credit_limit": 50000, "is_credit_allowed": true}),
    )
    .await;
    Chain {
        app,
        a,
        b,
        admin,
        cashier_b,
        medicine,
        batch_a,
        batch_b,
    }
}

#[tokio::test]
async fn the_snapshot_has_every_entity_with_the_spec_types() {
    let c = chain().await;
    let s = snapshot(&c.app, &c.admin).await;
    assert!(
        s["max_rev"].is_i64() && s["max_rev"].as_i64().unwrap() > 0,
        "{s}"
    );
    for (key, shape) in [
        ("branches", BRANCH),
        ("medicines", MEDICINE),
        ("suppliers", SUPPLIER),
        ("coupons", COUPON),
        ("customers", CUSTOMER),
        ("users", USER),
        ("batches", BATCH),
        ("categories", CATEGORY),
    ] {
        let list = items(&s, key);
        assert!(!list.is_empty(), "{key} is empty");
        for obj in list {
            assert_shape(key, obj, shape);
            // Nothing in a snapshot is newer than its cursor.
            assert!(obj["rev"].as_i64().unwrap() <= s["max_rev"].as_i64().unwrap());
        }
    }
    let m = find(items(&s, "medicines"), &c.medicine["id"]);
    assert_eq!(m["selling_price"], 1500.0);
    assert_eq!(m["max_public_price"], 2000.5);
    assert_eq!(m["requires_cold_chain"], 1);
    assert_eq!(m["requires_prescription"], 0);
    assert_eq!(m["category"], "antibiotics");
    let coupon = &items(&s, "coupons")[0];
    assert_eq!(coupon["code"], "SAVE10");
    assert_eq!(coupon["valid_from"], "2026-01-01T00:00:00.000Z");
    assert_eq!(coupon["max_uses"], 100);
    let cat = &items(&s, "categories")[0];
    assert_eq!(cat["slug"], "antibiotics");
    let text = serde_json::to_string(&s).unwrap();
    assert!(!text.contains("password"), "no password hash anywhere");
    assert!(!text.contains("$argon2"), "no password hash anywhere");
}

#[tokio::test]
async fn an_admin_gets_the_chain_and_a_branch_caller_its_branch() {
    let c = chain().await;
    let all = snapshot(&c.app, &c.admin).await;
    let mine = snapshot(&c.app, &c.cashier_b).await;
    assert_eq!(
        ids(items(&all, "branches")),
        HashSet::from([c.a.to_string(), c.b.to_string()])
    );
    assert_eq!(
        ids(items(&mine, "branches")),
        HashSet::from([c.b.to_string()])
    );
    let user_branches = |s: &Value| -> HashSet<String> {
        items(s, "users")
            .iter()
            .map(|u| u["branch_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        user_branches(&all),
        HashSet::from([c.a.to_string(), c.b.to_string()])
    );
    assert_eq!(user_branches(&mine), HashSet::from([c.b.to_string()]));
    assert_eq!(
        ids(items(&all, "batches")),
        HashSet::from([
            c.batch_a["id"].as_str().unwrap().to_owned(),
            c.batch_b["id"].as_str().unwrap().to_owned()
        ])
    );
    assert_eq!(
        ids(items(&mine, "batches")),
        HashSet::from([c.batch_b["id"].as_str().unwrap().to_owned()])
    );
    // Stock: chain-wide for an admin, the branch's for a branch caller.
    let stock =
        |s: &Value| find(items(s, "medicines"), &c.medicine["id"])["stock_quantity"].clone();
    assert_eq!(stock(&all), 42);
    assert_eq!(stock(&mine), 12);
    // Organisation-wide entities are the same for both.
    for key in [
        "medicines",
        "suppliers",
        "coupons",
        "customers",
        "categories",
    ] {
        assert_eq!(items(&all, key).len(), items(&mine, key).len(), "{key}");
    }
    assert_eq!(all["max_rev"], mine["max_rev"]);
}

#[tokio::test]
async fn deleted_rows_are_left_out_of_the_snapshot() {
    let c = chain().await;
    let gone = customer(&c.app, &c.admin, json!({"name": "Gone"})).await;
    let path = format!("/customers/{}", gone["id"].as_str().unwrap());
    let (status, _) = c
        .app
        .call(Method::DELETE, &path, Some(&c.admin), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let s = snapshot(&c.app, &c.admin).await;
    assert!(!ids(items(&s, "customers")).contains(gone["id"].as_str().unwrap()));
    // ... and the feed carries the tombstone.
    let (changes, _) = drain(&c.app, &c.admin, 0, 5000).await;
    let last = changes
        .iter()
        .rfind(|ch| ch["entity_id"] == gone["id"])
        .unwrap();
    assert_eq!(last["op"], "delete");
    assert_eq!(last["payload"]["is_deleted"], 1);
}

#[tokio::test]
async fn the_feed_follows_a_payment_a_purchase_and_a_delete() {
    let c = chain().await;
    let app = &c.app;
    let debtor = customer(
        app,
        &c.admin,
        json!({"name": "Debtor", "credit_limit": 100000, "is_credit_allowed": true}),
    )
    .await;
    let (status, sale) = app
        .post(
            "/sales",
            &c.admin,
            json!({"items": [{"medicine_id": c.medicine["id"], "quantity": 2}],
                   "payment_method": "credit", "customer_id": debtor["id"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sale}");
    let (_, before) = app.get("/sync/changes", &c.admin).await;
    let cursor = before["max_rev"].as_i64().unwrap();
    assert_eq!(before["has_more"], false);

    // A payment: the customer's update and its ledger row, once each.
    let pay = format!("/customers/{}/payments", debtor["id"].as_str().unwrap());
    let (status, receipt) = app.post(&pay, &c.admin, json!({"amount": 3000})).await;
    assert_eq!(status, StatusCode::CREATED, "{receipt}");
    let (status, page) = app
        .get(&format!("/sync/changes?since={cursor}"), &c.admin)
        .await;
    assert_eq!(status, StatusCode::OK);
    let changes = page["changes"].as_array().unwrap();
    let after_payment = page["max_rev"].as_i64().unwrap();
    assert!(after_payment > cursor);
    let kinds: Vec<(&str, &str)> = changes
        .iter()
        .map(|ch| (ch["entity"].as_str().unwrap(), ch["op"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds.len(), 2, "{page}");
    assert!(kinds.contains(&("customer", "update")), "{kinds:?}");
    assert!(kinds.contains(&("customer_ledger", "create")), "{kinds:?}");
    let update = changes
        .iter()
        .find(|ch| ch["entity"] == "customer")
        .unwrap();
    assert_eq!(update["entity_id"], debtor["id"]);
    assert!(update["branch_id"].is_null());
    assert_eq!(update["payload"]["current_balance"], 0.0);
    assert_eq!(update["payload"]["rev"], update["rev"]);
    let ledger = changes
        .iter()
        .find(|ch| ch["entity"] == "customer_ledger")
        .unwrap();
    assert_eq!(ledger["payload"]["transaction_type"], "PAYMENT");
    assert_eq!(ledger["branch_id"], c.a.to_string());
    for ch in changes {
        assert!(ch["rev"].as_i64().unwrap() > cursor);
        assert!(ch["entity_id"].is_string() && ch["payload"].is_object());
    }

    // A purchase: the new batch, branch-tagged.
    let batch = app
        .receive(&c.admin, &c.medicine["id"], c.b, 5, "2032-01-01")
        .await;
    let (_, page) = app
        .get(&format!("/sync/changes?since={after_payment}"), &c.admin)
        .await;
    let after_purchase = page["max_rev"].as_i64().unwrap();
    assert!(after_purchase > after_payment);
    let batch_changes: Vec<&Value> = page["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ch| ch["entity"] == "batch")
        .collect();
    assert_eq!(batch_changes.len(), 1, "{page}");
    assert_eq!(batch_changes[0]["entity_id"], batch["id"]);
    assert_eq!(batch_changes[0]["branch_id"], c.b.to_string());
    assert_eq!(batch_changes[0]["payload"]["qty_remaining"], 5);

    // A soft delete: a tombstone.
    let path = format!("/customers/{}", debtor["id"].as_str().unwrap());
    let (status, _) = app.call(Method::DELETE, &path, Some(&c.admin), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, page) = app
        .get(&format!("/sync/changes?since={after_purchase}"), &c.admin)
        .await;
    let tombstone = &page["changes"][0];
    assert_eq!(page["changes"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(
        (
            &tombstone["entity"],
            &tombstone["op"],
            &tombstone["entity_id"]
        ),
        (&json!("customer"), &json!("delete"), &debtor["id"])
    );

    // Paging in small steps gives the one big read: no gap, no repeat.
    let (whole, end) = drain(app, &c.admin, 0, 5000).await;
    let (paged, paged_end) = drain(app, &c.admin, 0, 3).await;
    assert_eq!(end, paged_end);
    assert_eq!(whole, paged);
    let all_revs = revs(&whole);
    assert!(
        all_revs.windows(2).all(|w| w[0] < w[1]),
        "strictly in rev order"
    );
    assert_eq!(all_revs.last().copied(), Some(end));
    // Starting from the middle of a page works the same.
    let (tail, _) = drain(app, &c.admin, all_revs[4], 2).await;
    assert_eq!(tail, whole[5..]);
}

#[tokio::test]
async fn a_branch_caller_sees_its_branch_and_organisation_wide_changes() {
    let c = chain().await;
    let (changes, end) = drain(&c.app, &c.cashier_b, 0, 5000).await;
    let (all, all_end) = drain(&c.app, &c.admin, 0, 5000).await;
    assert_eq!(end, all_end, "the cursor is the same horizon for everyone");
    assert!(changes
        .iter()
        .all(|ch| ch["branch_id"].is_null() || ch["branch_id"] == c.b.to_string()));
    let entity_ids: HashSet<&Value> = changes.iter().map(|ch| &ch["entity_id"]).collect();
    assert!(entity_ids.contains(&c.batch_b["id"]));
    assert!(
        !entity_ids.contains(&c.batch_a["id"]),
        "another branch's batch"
    );
    assert!(entity_ids.contains(&c.medicine["id"]), "organisation-wide");
    // Exactly the admin's changes that belong to B or to everyone.
    let expected: Vec<&Value> = all
        .iter()
        .filter(|ch| ch["branch_id"].is_null() || ch["branch_id"] == c.b.to_string())
        .collect();
    assert_eq!(changes.iter().collect::<Vec<_>>(), expected);
    let (paged, _) = drain(&c.app, &c.cashier_b, 0, 2).await;
    assert_eq!(paged, changes);
}

#[tokio::test]
async fn bad_cursors_and_limits_are_400_naming_the_parameter() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    for (query, field) in [
        ("since=-1", "since"),
        ("since=abc", "since"),
        ("since=1.5", "since"),
        ("limit=0", "limit"),
        ("limit=5001", "limit"),
        ("limit=ten", "limit"),
    ] {
        let (status, problem) = app.get(&format!("/sync/changes?{query}"), &cashier).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{query}");
    }
    let (status, page) = app.get("/sync/changes?limit=5000", &cashier).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["has_more"], false);
    for path in ["/sync/changes", "/sync/snapshot"] {
        let (status, problem) = app.call(Method::GET, path, None, None).await;
        assert_problem(status, &problem, StatusCode::UNAUTHORIZED);
    }
}

#[tokio::test]
async fn the_default_page_is_500_changes() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "INSERT INTO change_log (entity, entity_id, op, payload)
             SELECT 'customer', g::text, 'update', '{}' FROM generate_series(1, 600) g",
            &[],
        )
        .await
        .unwrap();
    let (_, page) = app.get("/sync/changes", &admin).await;
    assert_eq!(page["changes"].as_array().unwrap().len(), 500);
    assert_eq!(page["has_more"], true);
    assert_eq!(page["max_rev"], page["changes"][499]["rev"]);
}

/// Customer ids a till would hold after the snapshot and the changes since.
fn customers_seen(snapshot: &Value, changes: &[Value]) -> HashMap<String, usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for c in items(snapshot, "customers") {
        *seen
            .entry(c["id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    for ch in changes {
        if ch["entity"] == "customer" && ch["op"] == "create" {
            *seen
                .entry(ch["entity_id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    seen
}

#[tokio::test]
async fn snapshot_then_changes_holds_every_customer_once_under_concurrent_writes() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let creates = join_all((0..20).map(|i| {
        let (app, cashier) = (&app, &cashier);
        async move { customer(app, cashier, json!({"name": format!("Concurrent {i}")})).await }
    }));
    let snapshots = join_all((0..4).map(|i| {
        let (app, admin) = (&app, &admin);
        async move {
            tokio::time::sleep(Duration::from_millis(5 * i)).await;
            snapshot(app, admin).await
        }
    }));
    let (created, snapshots) = tokio::join!(creates, snapshots);
    let created: HashSet<String> = ids(&created);
    assert_eq!(created.len(), 20);
    for s in snapshots {
        let since = s["max_rev"].as_i64().unwrap();
        let (changes, _) = drain(&app, &admin, since, 7).await;
        let seen = customers_seen(&s, &changes);
        for id in &created {
            assert_eq!(seen.get(id), Some(&1), "customer {id} at max_rev {since}");
        }
        // Every row in the snapshot is at or below its cursor, every change above it.
        assert!(changes.iter().all(|ch| ch["rev"].as_i64().unwrap() > since));
    }
}

/// Starts a customer write that holds its rev, uncommitted, until `commit`.
async fn write_in_flight(app: &TestApp) -> (deadpool_postgres::Object, Uuid) {
    let client = app.pool.get().await.unwrap();
    client.batch_execute("BEGIN").await.unwrap();
    let rev = domain::sync::changes::allocate(&client).await.unwrap();
    let id = Uuid::now_v7();
    client
        .execute(
            "INSERT INTO customers (id, name, rev) VALUES ($1, 'Late', $2)",
            &[&id, &rev],
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO change_log (rev, entity, entity_id, op, payload)
             VALUES ($1, 'customer', $2::uuid::text, 'create', '{}')",
            &[&rev, &id],
        )
        .await
        .unwrap();
    (client, id)
}

#[tokio::test]
async fn a_snapshot_and_the_feed_wait_for_a_write_in_flight() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    // A later rev commits first: the cut must not pass the earlier one.
    let (late, late_id) = write_in_flight(&app).await;
    customer(&app, &admin, json!({"name": "Early"})).await;
    let snap = tokio::spawn({
        let (http, url, admin) = (app.http.clone(), app.base.clone(), admin.clone());
        async move {
            let res = http
                .get(format!("{url}/sync/snapshot"))
                .bearer_auth(admin)
                .send()
                .await
                .unwrap();
            res.json::<Value>().await.unwrap()
        }
    });
    let feed = tokio::spawn({
        let (http, url, admin) = (app.http.clone(), app.base.clone(), admin.clone());
        async move {
            let res = http
                .get(format!("{url}/sync/changes?since=0"))
                .bearer_auth(admin)
                .send()
                .await
                .unwrap();
            res.json::<Value>().await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!snap.is_finished() && !feed.is_finished(), "they wait");
    late.batch_execute("COMMIT").await.unwrap();
    let (s, f) = (snap.await.unwrap(), feed.await.unwrap());
    assert!(ids(items(&s, "customers")).contains(&late_id.to_string()));
    let feed_ids: Vec<&Value> = f["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|ch| &ch["entity_id"])
        .collect();
    assert!(feed_ids.contains(&&json!(late_id.to_string())));
    assert_eq!(s["max_rev"], f["max_rev"]);
}

#[tokio::test]
async fn an_abandoned_pull_never_holds_up_writers() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (late, _) = write_in_flight(&app).await;
    // Pulls that give up while waiting for the write.
    for path in ["/sync/snapshot", "/sync/changes"] {
        let res = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth(&admin)
            .timeout(Duration::from_millis(200))
            .send()
            .await;
        assert!(res.is_err(), "{path} should still be waiting");
    }
    // Reads dropped while they wait (actix lets a handler finish when its
    // client goes, so drop the futures themselves).
    let pool = &app.pool;
    let horizon = domain::sync::horizon::Horizon::new();
    let wait = Duration::from_millis(200);
    let snap = tokio::time::timeout(wait, domain::sync::snapshot::read(pool, &horizon, None)).await;
    assert!(snap.is_err(), "the snapshot should still be waiting");
    let cursor = domain::sync::snapshot::Cursor {
        since: 0,
        epoch: None,
    };
    let feed = tokio::time::timeout(
        wait,
        domain::sync::snapshot::feed(pool, &horizon, None, cursor, 10, None),
    )
    .await;
    assert!(feed.is_err(), "the feed should still be waiting");
    late.batch_execute("COMMIT").await.unwrap();
    drop(late);
    // Writers and readers carry on: nothing a reader left behind holds them.
    let writes = tokio::time::timeout(
        Duration::from_secs(5),
        join_all((0..10).map(|i| customer(&app, &admin, json!({"name": format!("After {i}")})))),
    )
    .await;
    assert!(writes.is_ok(), "writers were blocked");
    let s = tokio::time::timeout(Duration::from_secs(5), snapshot(&app, &admin)).await;
    assert_eq!(items(&s.unwrap(), "customers").len(), 11);
}

/// A benchmark more than a test: run it in release, where the budget holds,
/// `cargo test --release --test api -- --ignored snapshot_of_20000`.
#[tokio::test]
#[ignore = "benchmark; run with --release --ignored"]
async fn snapshot_of_20000_medicines_stays_under_300_ms() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(b, Role::Cashier).await;
    let client = app.pool.get().await.unwrap();
    client
        .batch_execute(
            "INSERT INTO medicines (id, name, selling_price)
               SELECT gen_random_uuid(), 'Medicine ' || g, 100 + g % 900
               FROM generate_series(1, 20000) g;
             INSERT INTO batches (id, medicine_id, branch_id, batch_number, expiry_date,
                                  qty_received, qty_remaining, unit_cost)
               SELECT gen_random_uuid(), m.id, br.id, 'BN', '2031-01-01', 10, 7, 50
               FROM medicines m CROSS JOIN branches br;",
        )
        .await
        .unwrap();
    for table in ["medicines", "batches"] {
        let vacuum = format!("VACUUM ANALYZE {table}");
        client.batch_execute(&vacuum).await.unwrap();
    }
    for (who, token) in [("cashier", &cashier), ("admin", &admin)] {
        let mut best = Duration::MAX;
        for _ in 0..5 {
            // A fresh connection each time, and no parsing: the server's time.
            let http = reqwest::Client::new();
            let started = std::time::Instant::now();
            let res = http
                .get(format!("{}/sync/snapshot", app.base))
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            let bytes = res.bytes().await.unwrap();
            best = best.min(started.elapsed());
            assert!(bytes.len() > 20000 * 500);
        }
        eprintln!("snapshot of 20000 medicines for {who}: {best:?}");
        if !cfg!(debug_assertions) {
            assert!(best < Duration::from_millis(300), "{who}: {best:?}");
        }
    }
}

#[tokio::test]
async fn the_openapi_document_describes_devices_the_register_and_the_pull() {
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
    for (path, method) in [
        ("/api/v1/devices", "post"),
        ("/api/v1/devices/{id}/revoke", "post"),
        ("/api/v1/compliance/devices", "get"),
        ("/api/v1/sync/snapshot", "get"),
        ("/api/v1/sync/changes", "get"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "missing {method} {path}"
        );
    }
    let snapshot = &doc["components"]["schemas"]["Snapshot"]["properties"];
    for key in [
        "max_rev",
        "branches",
        "medicines",
        "suppliers",
        "coupons",
        "customers",
        "users",
        "batches",
        "categories",
    ] {
        assert!(snapshot.get(key).is_some(), "Snapshot.{key} undocumented");
    }
    let feed = &doc["components"]["schemas"]["ChangeFeed"]["properties"];
    assert!(feed["max_rev"]["description"]
        .as_str()
        .is_some_and(|d| d.contains("next `since`")));
}
