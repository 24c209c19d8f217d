//! `/ops/actors`: the live actors, per-branch mailbox tuning applied without
//! a restart (also by a second server process on the same database), the
//! per-actor metrics, and the deploy/ dashboard and alert rules.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::db::Pool;
use domain::{BranchOverride, Command, Error, Kind, Registry, Result, RuntimeConfig};
use pharmacy::config::BranchActorsConfig;
use pharmacy::db;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, fresh_database, test_config, Role, TestApp};

/// A request to any process's `/api/v1` base.
async fn call_at(
    app: &TestApp,
    base: &str,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = app
        .http
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The branch actor's row in `GET /ops/actors` of the process at `base`.
async fn branch_row(app: &TestApp, base: &str, admin: &str, branch: Uuid) -> Option<Value> {
    let (status, body) = call_at(app, base, Method::GET, "/ops/actors", admin, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "branch" && r["branch_id"] == json!(branch))
        .cloned()
}

/// Starts the branch's actor in the process at `base` (opening a cash
/// session goes through it).
async fn touch_branch(app: &TestApp, base: &str, token: &str, branch: Uuid) {
    let (status, body) = call_at(
        app,
        base,
        Method::POST,
        "/sessions/open",
        token,
        Some(json!({"branch_id": branch})),
    )
    .await;
    assert!(status.is_success(), "open session: {status} {body}");
}

/// Polls the process at `base` until the branch's row satisfies `want`.
async fn wait_for(
    app: &TestApp,
    base: &str,
    admin: &str,
    branch: Uuid,
    within: Duration,
    want: impl Fn(&Value) -> bool,
) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let row = branch_row(app, base, admin, branch).await;
        if let Some(row) = row.filter(|r| want(r)) {
            return (row, started.elapsed());
        }
        assert!(
            started.elapsed() < within,
            "not applied within {within:?}: {:?}",
            branch_row(app, base, admin, branch).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn audit_rows(app: &TestApp, branch: Uuid) -> Vec<(String, Option<Value>, Option<Value>)> {
    let client = app.pool.get().await.unwrap();
    client
        .query(
            "SELECT action, before, after FROM audit_log WHERE entity_type = 'branch' \
             AND entity_id = $1 AND action LIKE 'actor_tuning.%' ORDER BY created_at, id",
            &[&branch.to_string()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test]
async fn an_admin_sees_the_live_branch_and_device_actors() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    touch_branch(&app, &app.base, &admin, branch).await;
    let (status, device) = app
        .post(
            "/devices",
            &admin,
            json!({"name": "Till 1", "branch_id": branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{device}");
    let (status, pushed) = app
        .post(
            "/sync/push",
            &admin,
            json!({"device_id": device["id"], "changes": []}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{pushed}");

    let (status, list) = app.get("/ops/actors", &admin).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["defaults"]["branch_mailbox"], 256);
    assert_eq!(list["defaults"]["device_mailbox"], 16);
    assert_eq!(list["defaults"]["sale_batch_max"], 32);
    assert_eq!(list["defaults"]["overrides_reload_ms"], 2000);
    let items = list["items"].as_array().unwrap();
    assert_eq!(list["total"], items.len());
    let b = items
        .iter()
        .find(|r| r["kind"] == "branch" && r["branch_id"] == json!(branch))
        .unwrap_or_else(|| panic!("branch actor missing: {list}"));
    assert_eq!(b["branch_code"], "KLA");
    assert_eq!(b["capacity"], 256);
    assert_eq!(b["depth"], 0);
    assert_eq!(b["sale_batch_max"], 32);
    assert_eq!(b["refusals_last_minute"], 0);
    assert!(b["wait_samples"].as_u64().unwrap() >= 1, "{b}");
    assert!(b["p99_wait_ms"].as_f64().is_some(), "{b}");
    assert!(b["device_id"].is_null());
    let d = items
        .iter()
        .find(|r| r["kind"] == "device" && r["device_id"] == device["id"])
        .unwrap_or_else(|| panic!("device actor missing: {list}"));
    assert_eq!(d["branch_id"], json!(branch));
    assert_eq!(d["branch_code"], "KLA");
    assert_eq!(d["capacity"], 16);
    assert!(d["sale_batch_max"].is_null());
    // Branches come first.
    let kinds: Vec<&str> = items.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    let first_device = kinds.iter().position(|k| *k == "device").unwrap();
    assert!(
        kinds[first_device..].iter().all(|k| *k == "device"),
        "{kinds:?}"
    );
}

#[tokio::test]
async fn only_admins_may_read_or_tune_actors() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let path = format!("/ops/actors/branches/{branch}");
    for role in [
        Role::BranchManager,
        Role::Pharmacist,
        Role::Cashier,
        Role::InventoryManager,
        Role::Auditor,
    ] {
        let (_, token) = app.signed_in(branch, role).await;
        let (s, b) = app.get("/ops/actors", &token).await;
        assert_problem(s, &b, StatusCode::FORBIDDEN);
        let (s, b) = app.get(&path, &token).await;
        assert_problem(s, &b, StatusCode::FORBIDDEN);
        let (s, b) = app
            .call(
                Method::PUT,
                &path,
                Some(&token),
                Some(json!({"mailbox": 8})),
            )
            .await;
        assert_problem(s, &b, StatusCode::FORBIDDEN);
        let (s, b) = app.call(Method::DELETE, &path, Some(&token), None).await;
        assert_problem(s, &b, StatusCode::FORBIDDEN);
    }
    let (s, b) = app.call(Method::GET, "/ops/actors", None, None).await;
    assert_problem(s, &b, StatusCode::UNAUTHORIZED);
    let (s, b) = app
        .call(Method::PUT, &path, None, Some(json!({"mailbox": 8})))
        .await;
    assert_problem(s, &b, StatusCode::UNAUTHORIZED);
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM branch_actor_overrides", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[tokio::test]
async fn bad_values_are_400_naming_the_field_and_unknown_branches_404() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let path = format!("/ops/actors/branches/{branch}");
    let put = |body: Value| {
        let app = &app;
        let path = path.clone();
        let admin = admin.clone();
        async move { app.call(Method::PUT, &path, Some(&admin), Some(body)).await }
    };
    for (body, field) in [
        (json!({"mailbox": 0}), "mailbox"),
        (json!({"mailbox": 100_001}), "mailbox"),
        (json!({"mailbox": -5}), "mailbox"),
        (json!({"mailbox": 1.5}), "mailbox"),
        (json!({"mailbox": "512"}), "mailbox"),
        (json!({"sale_batch_max": 0}), "sale_batch_max"),
        (json!({"sale_batch_max": 1025}), "sale_batch_max"),
        (
            json!({"mailbox": 8, "sale_batch_max": 5000}),
            "sale_batch_max",
        ),
    ] {
        let (s, b) = put(body.clone()).await;
        assert_problem(s, &b, StatusCode::BAD_REQUEST);
        assert_eq!(b["field"], field, "{body}: {b}");
    }
    let (s, b) = put(json!({})).await;
    assert_problem(s, &b, StatusCode::BAD_REQUEST);
    let (s, b) = put(json!({"mailbox": null, "sale_batch_max": null})).await;
    assert_problem(s, &b, StatusCode::BAD_REQUEST);
    // The bounds themselves are accepted.
    let (s, b) = put(json!({"mailbox": 100_000, "sale_batch_max": 1024})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = put(json!({"mailbox": 1, "sale_batch_max": 1})).await;
    assert_eq!(s, StatusCode::OK, "{b}");

    let unknown = format!("/ops/actors/branches/{}", Uuid::now_v7());
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        let body = (method == Method::PUT).then(|| json!({"mailbox": 8}));
        let (s, b) = app
            .call(method.clone(), &unknown, Some(&admin), body.clone())
            .await;
        assert_problem(s, &b, StatusCode::NOT_FOUND);
        let (s, b) = app
            .call(
                method,
                "/ops/actors/branches/not-a-uuid",
                Some(&admin),
                body,
            )
            .await;
        assert_problem(s, &b, StatusCode::NOT_FOUND);
    }
    // A deleted branch is unknown too.
    let gone = app.branch("OLD").await;
    let (s, _) = app
        .call(
            Method::DELETE,
            &format!("/branches/{gone}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, b) = app
        .call(
            Method::PUT,
            &format!("/ops/actors/branches/{gone}"),
            Some(&admin),
            Some(json!({"mailbox": 8})),
        )
        .await;
    assert_problem(s, &b, StatusCode::NOT_FOUND);
    // Only the two accepted writes were stored and audited.
    assert_eq!(audit_rows(&app, branch).await.len(), 2);
    assert!(audit_rows(&app, gone).await.is_empty());
}

#[tokio::test]
async fn a_put_retunes_the_running_branch_at_once_is_audited_and_delete_restores_the_default() {
    let app = TestApp::spawn().await;
    let branch = app.branch("KLA").await;
    let other = app.branch("MBR").await;
    let (admin_user, admin) = app.signed_in(branch, Role::Admin).await;
    touch_branch(&app, &app.base, &admin, branch).await;
    touch_branch(&app, &app.base, &admin, other).await;
    let path = format!("/ops/actors/branches/{branch}");

    let (s, t) = app.get(&path, &admin).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(
        (
            &t["mailbox"],
            &t["mailbox_source"],
            &t["sale_batch_max"],
            &t["sale_batch_max_source"]
        ),
        (
            &json!(256),
            &json!("default"),
            &json!(32),
            &json!("default")
        )
    );
    assert!(t["stored"].is_null());
    assert_eq!(t["live_capacity"], 256);

    let (s, t) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"mailbox": 4, "sale_batch_max": 2})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(t["branch_code"], "KLA");
    assert_eq!(
        (&t["mailbox"], &t["mailbox_source"]),
        (&json!(4), &json!("database"))
    );
    assert_eq!(t["sale_batch_max"], 2);
    assert_eq!(t["stored"]["updated_by"], json!(admin_user.id));
    assert_eq!(
        t["live_capacity"], 4,
        "applied at once in this process: {t}"
    );
    // The list of this process shows it without waiting for a reload.
    let row = branch_row(&app, &app.base, &admin, branch).await.unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(4), &json!(2))
    );
    // The other branch keeps the defaults.
    let row = branch_row(&app, &app.base, &admin, other).await.unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(256), &json!(32))
    );

    // The capacity is in the metrics, labelled by branch.
    let metrics = app
        .http
        .get(format!("{}/metrics", app.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = metrics
        .lines()
        .find(|l| {
            l.starts_with("actor_mailbox_capacity{") && l.contains(&format!("branch=\"{branch}\""))
        })
        .unwrap_or_else(|| panic!("no capacity series for the branch"));
    assert!(series.ends_with(" 4"), "{series}");

    // A second PUT replaces the override: a field left out is cleared.
    let (s, t) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"mailbox": 6})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(
        (&t["mailbox"], &t["sale_batch_max"]),
        (&json!(6), &json!(32))
    );
    assert_eq!(t["sale_batch_max_source"], "default");

    let audit = audit_rows(&app, branch).await;
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert_eq!(audit[0].0, "actor_tuning.set");
    assert!(audit[0].1.is_none());
    assert_eq!(audit[0].2.as_ref().unwrap()["mailbox"], 4);
    assert_eq!(audit[0].2.as_ref().unwrap()["sale_batch_max"], 2);
    assert_eq!(audit[1].1.as_ref().unwrap()["mailbox"], 4);
    assert_eq!(audit[1].2.as_ref().unwrap()["mailbox"], 6);
    assert!(audit[1].2.as_ref().unwrap()["sale_batch_max"].is_null());

    let (s, _) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let row = branch_row(&app, &app.base, &admin, branch).await.unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(256), &json!(32))
    );
    let (_, t) = app.get(&path, &admin).await;
    assert_eq!(t["mailbox_source"], "default");
    assert!(t["stored"].is_null());
    let audit = audit_rows(&app, branch).await;
    assert_eq!(audit.len(), 3);
    assert_eq!(audit[2].0, "actor_tuning.remove");
    assert_eq!(audit[2].1.as_ref().unwrap()["mailbox"], 6);
    assert!(audit[2].2.is_none());
    // Removing nothing is no change: 204, nothing audited.
    let (s, _) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(audit_rows(&app, branch).await.len(), 3);
    // The audit log is readable through the API as well.
    let (s, log) = app
        .get(
            &format!("/audit-log?entity_type=branch&entity_id={branch}"),
            &admin,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{log}");
    assert_eq!(log["total"], 3, "{log}");
}

/// The done-when of the issue: two server processes on one database; a
/// change through one is applied by the other within a few seconds, and its
/// removal too, without a restart.
#[tokio::test]
async fn a_change_through_one_process_reaches_the_other_without_a_restart() {
    let app = TestApp::spawn().await;
    let second = app.second_process();
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    touch_branch(&app, &second.base, &admin, branch).await;
    let row = branch_row(&app, &second.base, &admin, branch)
        .await
        .unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(256), &json!(32))
    );

    let path = format!("/ops/actors/branches/{branch}");
    let (s, t) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"mailbox": 3, "sale_batch_max": 5})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    let (row, took) = wait_for(
        &app,
        &second.base,
        &admin,
        branch,
        Duration::from_secs(10),
        |r| r["capacity"] == 3 && r["sale_batch_max"] == 5,
    )
    .await;
    assert!(took < Duration::from_secs(5), "took {took:?}: {row}");
    // The second process reports the override's sources as well.
    let (s, t) = call_at(&app, &second.base, Method::GET, &path, &admin, None).await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(
        (&t["live_capacity"], &t["mailbox_source"]),
        (&json!(3), &json!("database"))
    );

    // Removed through the second process, the first follows as well.
    let (s, _) = call_at(&app, &second.base, Method::DELETE, &path, &admin, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    touch_branch(&app, &app.base, &admin, branch).await;
    let (row, took) = wait_for(
        &app,
        &app.base,
        &admin,
        branch,
        Duration::from_secs(10),
        |r| r["capacity"] == 256 && r["sale_batch_max"] == 32,
    )
    .await;
    assert!(took < Duration::from_secs(5), "took {took:?}: {row}");
}

#[tokio::test]
async fn static_overrides_by_branch_code_apply_and_a_stored_one_wins_field_by_field() {
    let app = TestApp::spawn_with(|c| {
        c.actors.overrides_reload_ms = 200;
        c.actors.branches.insert(
            "kla".to_owned(),
            BranchActorsConfig {
                mailbox: Some(7),
                sale_batch_max: Some(3),
            },
        );
    })
    .await;
    // The branch is created after the start: its code is resolved on reload.
    let branch = app.branch("KLA").await;
    let plain = app.branch("MBR").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    touch_branch(&app, &app.base, &admin, branch).await;
    touch_branch(&app, &app.base, &admin, plain).await;
    wait_for(
        &app,
        &app.base,
        &admin,
        branch,
        Duration::from_secs(5),
        |r| r["capacity"] == 7 && r["sale_batch_max"] == 3,
    )
    .await;
    let row = branch_row(&app, &app.base, &admin, plain).await.unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(256), &json!(32))
    );
    let path = format!("/ops/actors/branches/{branch}");
    let (_, t) = app.get(&path, &admin).await;
    assert_eq!(
        (
            &t["mailbox"],
            &t["mailbox_source"],
            &t["sale_batch_max_source"]
        ),
        (&json!(7), &json!("config"), &json!("config"))
    );

    let (s, t) = app
        .call(
            Method::PUT,
            &path,
            Some(&admin),
            Some(json!({"mailbox": 9})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{t}");
    assert_eq!(
        (
            &t["mailbox"],
            &t["mailbox_source"],
            &t["sale_batch_max"],
            &t["sale_batch_max_source"]
        ),
        (&json!(9), &json!("database"), &json!(3), &json!("config"))
    );
    // Several reloads later it still stands.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let row = branch_row(&app, &app.base, &admin, branch).await.unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(9), &json!(3))
    );

    let (s, _) = app.call(Method::DELETE, &path, Some(&admin), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let row = branch_row(&app, &app.base, &admin, branch).await.unwrap();
    assert_eq!(
        (&row["capacity"], &row["sale_batch_max"]),
        (&json!(7), &json!(3))
    );
}

/// Holds the actor until the gate opens.
struct Hold(Arc<tokio::sync::Semaphore>);

impl Command for Hold {
    type Error = domain::Error;
    type Output = ();
    const NAME: &'static str = "hold";
    async fn run(self, _pool: Pool) -> Result<()> {
        if let Ok(p) = self.0.acquire().await {
            p.forget();
        }
        Ok(())
    }
}

/// Waits until `n` messages hold a place in the branch's mailbox.
async fn admitted_reaches(registry: &Registry, key: Uuid, n: usize) {
    let started = Instant::now();
    while registry
        .stats(Kind::Branch, key)
        .is_none_or(|s| s.admitted != n)
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "admitted never reached {n}: {:?}",
            registry.stats(Kind::Branch, key)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sends a held command; the handle answers once it is handled or refused.
fn send(
    registry: &Arc<Registry>,
    key: Uuid,
    gate: &Arc<tokio::sync::Semaphore>,
) -> tokio::task::JoinHandle<Result<()>> {
    let registry = registry.clone();
    let gate = gate.clone();
    actix_web::rt::spawn(async move { registry.branch(key, Hold(gate)).await })
}

#[actix_web::test]
async fn a_resized_mailbox_admits_exactly_its_new_capacity_while_running() {
    let (_, url) = fresh_database().await;
    let pool = db::pool(&url, &test_config().database).unwrap();
    let registry = Arc::new(Registry::new(
        pool,
        RuntimeConfig {
            branch_mailbox: 3,
            device_mailbox: 3,
            arbiters: 1,
        },
    ));
    let key = Uuid::now_v7();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let refused = |r: Result<()>| matches!(r, Err(Error::Unavailable { .. }));

    // Capacity 3: one running, two waiting; the fourth is refused.
    let mut held = Vec::new();
    for n in 1..=3 {
        held.push(send(&registry, key, &gate));
        admitted_reaches(&registry, key, n).await;
    }
    assert!(refused(send(&registry, key, &gate).await.unwrap()));

    // Grown to 5 while full: two more get in, the next is refused.
    registry.set_branch_override(
        key,
        Some(BranchOverride {
            mailbox: Some(5),
            batch_max: None,
        }),
    );
    for n in 4..=5 {
        held.push(send(&registry, key, &gate));
        admitted_reaches(&registry, key, n).await;
    }
    assert!(refused(send(&registry, key, &gate).await.unwrap()));

    // Shrunk to 2 with five inside: nothing new gets in until they are done.
    registry.set_branch_overrides(
        [(
            key,
            BranchOverride {
                mailbox: Some(2),
                batch_max: None,
            },
        )]
        .into(),
    );
    assert!(refused(send(&registry, key, &gate).await.unwrap()));
    gate.add_permits(5);
    for h in held {
        h.await.unwrap().unwrap();
    }
    admitted_reaches(&registry, key, 0).await;
    // Then exactly two at a time.
    let first = send(&registry, key, &gate);
    admitted_reaches(&registry, key, 1).await;
    let second = send(&registry, key, &gate);
    admitted_reaches(&registry, key, 2).await;
    assert!(refused(send(&registry, key, &gate).await.unwrap()));
    let stats = registry.stats(Kind::Branch, key).unwrap();
    assert_eq!(stats.capacity, 2);
    assert_eq!(stats.refusals_last_minute, 4);
    // Each refusal is counted in the branch's own series as well.
    let metrics = prometheus::TextEncoder::new()
        .encode_to_string(&prometheus::gather())
        .unwrap();
    let series = metrics
        .lines()
        .find(|l| {
            l.starts_with("actor_mailbox_rejected_total{")
                && l.contains(&format!("branch=\"{key}\""))
        })
        .unwrap_or_else(|| panic!("no refusal series for the branch"));
    assert!(series.ends_with(" 4"), "{series}");

    // Back to the default (3) without an override.
    registry.set_branch_overrides(Default::default());
    let third = send(&registry, key, &gate);
    admitted_reaches(&registry, key, 3).await;
    assert!(refused(send(&registry, key, &gate).await.unwrap()));
    gate.add_permits(3);
    for h in [first, second, third] {
        h.await.unwrap().unwrap();
    }
    assert_eq!(registry.stats(Kind::Branch, key).unwrap().depth, 0);
}

/// Metric names an expression of the dashboard or the rules reads:
/// identifiers outside label matchers, ranges, strings and grouping lists
/// that are not functions or keywords.
fn metric_names(expr: &str) -> BTreeSet<String> {
    const KEYWORDS: &[&str] = &[
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut out = BTreeSet::new();
    let mut i = 0;
    let skip_to = |i: &mut usize, close: char| {
        while *i < chars.len() && chars[*i] != close {
            if chars[*i] == '"' {
                *i += 1;
                while *i < chars.len() && chars[*i] != '"' {
                    *i += 1;
                }
            }
            *i += 1;
        }
        *i += 1;
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            skip_to(&mut i, '}');
        } else if c == '[' {
            skip_to(&mut i, ']');
        } else if c == '"' {
            i += 1;
            skip_to(&mut i, '"');
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            if KEYWORDS.contains(&word.as_str()) {
                // `by (a, b)`: a label list, not metrics.
                if j < chars.len() && chars[j] == '(' && word != "bool" {
                    i = j;
                    skip_to(&mut i, ')');
                }
            } else if j >= chars.len() || chars[j] != '(' {
                // `sum by (...) (...)`: an aggregation, not a metric.
                let next: String = chars[j..]
                    .iter()
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                    .collect();
                if next != "by" && next != "without" {
                    out.insert(word);
                }
            }
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn metric_names_reads_promql() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (branch, le) (rate(actor_mailbox_wait_seconds_bucket{kind="branch", x=~"a|{b}"}[5m]))) > 0.8 and on (branch) actor_mailbox_depth / actor_mailbox_capacity"#,
    );
    let want: BTreeSet<String> = [
        "actor_mailbox_wait_seconds_bucket",
        "actor_mailbox_depth",
        "actor_mailbox_capacity",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(names, want);
}

/// Every expression of the dashboard (panels and the variables'
/// `label_values` queries).
fn dashboard_exprs(dash: &Value) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(e)) = m.get("expr") {
                    out.push(e.clone());
                }
                m.values().for_each(|v| walk(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&dash["panels"], &mut out);
    for var in dash["templating"]["list"].as_array().unwrap() {
        let q = var["query"]["query"].as_str().unwrap();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|q| q.rsplit_once(','))
            .map(|(metric, _)| metric.to_owned())
            .unwrap_or_else(|| panic!("unexpected variable query {q}"));
        out.push(inner);
    }
    out
}

#[tokio::test]
async fn the_deploy_dashboard_and_alert_rules_read_metrics_the_service_exports() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let rules: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(root.join("prometheus-alerts.yml")).unwrap())
            .unwrap();

    // Exercise the service so that every family has a series: a REST sale
    // (branch actor, group commit), a till push (device actor, sync), a
    // scrape (pool gauges) and a read replica (its own database here).
    let app = TestApp::spawn_with(|c| c.database.read_url = c.database.url.clone()).await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 100}))
        .await;
    app.receive(&admin, &m["id"], branch, 10, "2030-12-31")
        .await;
    let sale =
        json!({"items": [{"medicine_id": m["id"], "quantity": 1}], "payment_method": "cash"});
    let (s, b) = app.post("/sales", &admin, sale).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let (s, device) = app
        .post(
            "/devices",
            &admin,
            json!({"name": "Till", "branch_id": branch}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{device}");
    let change = json!({
        "client_mutation_id": Uuid::now_v7().to_string(), "entity": "sale", "op": "create",
        "payload": {"items": [{"medicine_id": m["id"], "quantity": 1}], "payment_method": "cash"},
    });
    let (s, b) = app
        .post(
            "/sync/push",
            &admin,
            json!({"device_id": device["id"], "changes": [change]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let scrape = || async {
        app.http
            .get(format!("{}/metrics", app.root))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    scrape().await;
    let exported: BTreeSet<String> = scrape()
        .await
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect();

    let mut dash_metrics = BTreeSet::new();
    let exprs = dashboard_exprs(&dash);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for e in &exprs {
        dash_metrics.extend(metric_names(e));
    }
    let mut rule_metrics = BTreeSet::new();
    let mut alerts = Vec::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let name = rule["alert"].as_str().unwrap().to_owned();
            let expr = rule["expr"].as_str().unwrap();
            assert!(rule["annotations"]["summary"].is_string(), "{name}");
            rule_metrics.extend(metric_names(expr));
            alerts.push((
                name,
                expr.to_owned(),
                rule["for"].as_str().map(str::to_owned),
            ));
        }
    }
    for name in dash_metrics.iter().chain(&rule_metrics) {
        assert!(
            exported.contains(name),
            "{name} is not exported by GET /metrics; exported: {exported:?}"
        );
    }
    // The per-actor series are all on the dashboard.
    for name in [
        "actor_mailbox_depth",
        "actor_mailbox_capacity",
        "actor_mailbox_rejected_total",
        "actor_mailbox_wait_seconds_bucket",
        "sale_batch_size_sum",
        "db_pool_connections",
        "http_requests_total",
        "sync_push_batch_seconds_bucket",
    ] {
        assert!(dash_metrics.contains(name), "dashboard lacks {name}");
    }
    // The rules the issue asks for.
    let rule = |metric: &str| {
        alerts
            .iter()
            .find(|(_, e, _)| metric_names(e).contains(metric))
            .unwrap_or_else(|| panic!("no rule reads {metric}"))
    };
    let (_, e, for_) = rule("actor_mailbox_capacity");
    assert!(
        e.contains("actor_mailbox_depth") && e.contains("0.8"),
        "{e}"
    );
    assert_eq!(for_.as_deref(), Some("1m"));
    assert!(rule("http_requests_total").1.contains("503"));
    assert!(rule("db_pool_connections").1.contains("waiting"));
    rule("sync_push_batch_seconds_bucket");
    rule("actor_mailbox_rejected_total");
}
