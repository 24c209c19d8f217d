//! The change feed at chain scale: a settled horizon that readers compute
//! without holding up writers, and long polls woken across server processes.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::sync::changes::{self, Change, Op};
use futures_util::future::join_all;
use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A connection of the test's own, as another writer would hold.
async fn raw_client(app: &TestApp) -> deadpool_postgres::Object {
    app.pool.get().await.unwrap()
}

/// The highest rev committed so far.
async fn top(app: &TestApp) -> i64 {
    let client = app.pool.get().await.unwrap();
    client
        .query_one("SELECT coalesce(max(rev), 0)::bigint FROM change_log", &[])
        .await
        .unwrap()
        .get(0)
}

async fn get_at(app: &TestApp, base: &str, path: &str, token: &str) -> (StatusCode, Value) {
    let res = app
        .http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn customer_at(app: &TestApp, base: &str, token: &str, name: &str) -> Value {
    let res = app
        .http
        .post(format!("{base}/customers"))
        .bearer_auth(token)
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    res.json().await.unwrap()
}

/// Small pseudo-random numbers, so a failure replays the same schedule.
fn jitter(seed: u64, modulo: u64) -> u64 {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    x ^= x >> 33;
    x.wrapping_mul(0xff51afd7ed558ccd) % modulo.max(1)
}

/// One writer transaction that draws its rev, sleeps, appends its change,
/// sleeps again and commits (or rolls back): revs commit out of order.
async fn slow_write(client: &deadpool_postgres::Object, tag: &str, seed: u64, commit: bool) -> i64 {
    client.batch_execute("BEGIN").await.unwrap();
    let rev = changes::allocate(client).await.unwrap();
    tokio::time::sleep(Duration::from_millis(jitter(seed, 40))).await;
    let change = Change {
        entity: "customer",
        entity_id: tag.to_owned(),
        op: Op::Create,
        branch_id: None,
        payload: json!({ "tag": tag }),
    };
    changes::append(client, rev, change).await.unwrap();
    tokio::time::sleep(Duration::from_millis(jitter(seed + 7, 20))).await;
    let end = if commit { "COMMIT" } else { "ROLLBACK" };
    client.batch_execute(end).await.unwrap();
    rev
}

/// One polling till: where it polls (alternating between the server
/// processes in `bases`), its page size and long-poll wait.
struct Poller {
    bases: Vec<String>,
    token: String,
    limit: i64,
    wait: u64,
}

/// When the writers are done, and the last rev they committed.
struct Finish {
    done: AtomicBool,
    until: AtomicI64,
}

/// Polls the feed from `since` until the writers are done and it caught up
/// with their last rev; returns every change's rev in the order received.
async fn reader(app: &TestApp, p: Poller, since: i64, finish: Arc<Finish>) -> Vec<i64> {
    let (mut cursor, mut seen) = (since, Vec::new());
    for turn in 0usize.. {
        let base = &p.bases[turn % p.bases.len()];
        let path = format!(
            "/sync/changes?since={cursor}&limit={}&wait={}",
            p.limit, p.wait
        );
        let (status, page) = get_at(app, base, &path, &p.token).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let next = page["max_rev"].as_i64().unwrap();
        assert!(
            next >= cursor,
            "the cursor went back from {cursor} to {next}"
        );
        for ch in page["changes"].as_array().unwrap() {
            let rev = ch["rev"].as_i64().unwrap();
            assert!(
                rev > cursor && rev <= next,
                "rev {rev} outside ({cursor}, {next}]"
            );
            seen.push(rev);
        }
        cursor = next;
        let caught_up =
            !page["has_more"].as_bool().unwrap() && cursor >= finish.until.load(Ordering::Acquire);
        if finish.done.load(Ordering::Acquire) && caught_up {
            return seen;
        }
    }
    unreachable!()
}

/// The concurrency test: writers commit out of rev order with
/// deliberate delays (and some roll back) while readers poll in a loop, in
/// two server processes, with short and long polls; every reader receives
/// every committed change exactly once, in rev order, and none rolled back.
#[tokio::test]
async fn readers_never_skip_or_repeat_a_change_while_writers_commit_out_of_order() {
    let app = TestApp::spawn().await;
    let second = app.second_process();
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let since = top(&app).await;
    let finish = Arc::new(Finish {
        done: AtomicBool::new(false),
        until: AtomicI64::new(i64::MAX),
    });
    let one = vec![app.base.clone()];
    let both = vec![app.base.clone(), second.base.clone()];
    let readers = [
        (one.clone(), 3, 0),
        (both.clone(), 1, 0),
        (both.clone(), 50, 0),
        (one.clone(), 7, 1),
        (both.clone(), 500, 1),
    ]
    .into_iter()
    .map(|(bases, limit, wait)| {
        let p = Poller {
            bases,
            token: admin.clone(),
            limit,
            wait,
        };
        reader(&app, p, since, finish.clone())
    });
    let writers = (0..6u64).map(|w| {
        let app = &app;
        async move {
            let client = raw_client(app).await;
            let mut committed = Vec::new();
            for k in 0..15u64 {
                let commit = (w + k) % 7 != 3;
                let rev = slow_write(&client, &format!("w{w}-{k}"), w * 100 + k, commit).await;
                if commit {
                    committed.push(rev);
                }
            }
            committed
        }
    });
    let writers = async {
        let committed: BTreeSet<i64> = join_all(writers).await.into_iter().flatten().collect();
        finish
            .until
            .store(*committed.last().unwrap(), Ordering::Release);
        finish.done.store(true, Ordering::Release);
        committed
    };
    let (committed, seen) = tokio::join!(writers, join_all(readers));
    assert!(committed.len() > 60, "{}", committed.len());
    for (i, revs) in seen.into_iter().enumerate() {
        assert!(
            revs.windows(2).all(|w| w[0] < w[1]),
            "reader {i} got a rev twice or out of order: {revs:?}"
        );
        let got: BTreeSet<i64> = revs.into_iter().collect();
        assert_eq!(got, committed, "reader {i} skipped or invented a change");
    }
}

/// A write that holds its rev, uncommitted, until `COMMIT` is sent.
async fn write_in_flight(app: &TestApp) -> (deadpool_postgres::Object, i64) {
    let client = raw_client(app).await;
    client.batch_execute("BEGIN").await.unwrap();
    let rev = changes::allocate(&client).await.unwrap();
    let change = Change {
        entity: "customer",
        entity_id: Uuid::now_v7().to_string(),
        op: Op::Create,
        branch_id: None,
        payload: json!({}),
    };
    changes::append(&client, rev, change).await.unwrap();
    (client, rev)
}

/// The old feed took the change-log lock exclusively and PostgreSQL queued
/// every new writer behind it: one poll waiting for a slow write stopped
/// every writer. Now the poll waits alone.
#[tokio::test]
async fn a_poll_waiting_for_a_write_in_flight_holds_up_no_writer() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (late, late_rev) = write_in_flight(&app).await;
    customer_at(&app, &app.base, &admin, "Early").await;
    for path in ["/sync/changes?since=0", "/sync/snapshot"] {
        let pull = tokio::spawn({
            let (http, url, admin) = (app.http.clone(), app.base.clone(), admin.clone());
            async move {
                let res = http
                    .get(format!("{url}{path}"))
                    .bearer_auth(admin)
                    .send()
                    .await
                    .unwrap();
                res.json::<Value>().await.unwrap()
            }
        });
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!pull.is_finished(), "{path} waits for the write in flight");
        let started = Instant::now();
        let writes = tokio::time::timeout(
            Duration::from_secs(1),
            join_all((0..5).map(|i| {
                let (app, admin) = (&app, &admin);
                async move { customer_at(app, &app.base, admin, &format!("During {i}")).await }
            })),
        )
        .await;
        assert!(writes.is_ok(), "writers waited behind {path}");
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(!pull.is_finished(), "{path} still waits");
        pull.abort();
    }
    late.batch_execute("COMMIT").await.unwrap();
    let (status, page) = app.get("/sync/changes?since=0&limit=5000", &admin).await;
    assert_eq!(status, StatusCode::OK);
    let revs: Vec<i64> = page["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["rev"].as_i64().unwrap())
        .collect();
    assert!(revs.contains(&late_rev));
}

/// A poll with nothing past its cursor answers at once, even while a write
/// holds an older rev in flight.
#[tokio::test]
async fn a_poll_with_nothing_new_answers_at_once() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let cursor = top(&app).await;
    let (late, _) = write_in_flight(&app).await;
    let started = Instant::now();
    let (status, page) = app
        .get(&format!("/sync/changes?since={cursor}"), &admin)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(page["changes"], json!([]));
    assert_eq!(page["max_rev"], cursor);
    late.batch_execute("ROLLBACK").await.unwrap();
}

/// The snapshot reads its arrays in one transaction; a write that drew a
/// lower rev and committed after it began is laid over them: the batch
/// moves and so does its medicine's stock.
#[tokio::test]
async fn a_snapshot_includes_a_batch_moved_by_a_write_that_committed_late() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let medicine = app
        .medicine(&admin, json!({"name": "Amoxicillin", "selling_price": 700}))
        .await;
    app.receive(&admin, &medicine["id"], a, 10, "2031-01-01")
        .await;
    let (_, before) = app.get("/sync/snapshot", &cashier).await;
    let batch = before["batches"][0].clone();
    let batch_id: Uuid = batch["id"].as_str().unwrap().parse().unwrap();
    // A write takes 4 from the batch under a rev drawn now...
    let late = raw_client(&app).await;
    late.batch_execute("BEGIN").await.unwrap();
    let rev: i64 = late
        .query_one(
            "UPDATE batches SET qty_remaining = qty_remaining - 4, rev = change_log_next_rev()
             WHERE id = $1 RETURNING rev",
            &[&batch_id],
        )
        .await
        .unwrap()
        .get(0);
    let mut payload = batch.clone();
    payload["qty_remaining"] = json!(6);
    payload["rev"] = json!(rev);
    let change = Change {
        entity: "batch",
        entity_id: batch_id.to_string(),
        op: Op::Update,
        branch_id: Some(a),
        payload,
    };
    changes::append(&late, rev, change).await.unwrap();
    // ... a later rev commits first, the snapshot starts, then the write
    // commits while the snapshot waits.
    customer_at(&app, &app.base, &admin, "Later").await;
    let snap = tokio::spawn({
        let (http, url, t) = (app.http.clone(), app.base.clone(), cashier.clone());
        async move {
            let res = http
                .get(format!("{url}/sync/snapshot"))
                .bearer_auth(t)
                .send()
                .await
                .unwrap();
            res.json::<Value>().await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    late.batch_execute("COMMIT").await.unwrap();
    let s = snap.await.unwrap();
    assert!(s["max_rev"].as_i64().unwrap() > rev);
    let b = s["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == batch["id"])
        .unwrap();
    assert_eq!(b["qty_remaining"], 6, "{b}");
    assert_eq!(b["rev"], rev);
    let m = s["medicines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == medicine["id"])
        .unwrap();
    assert_eq!(m["stock_quantity"], 6, "{m}");
    assert_eq!(s["batches"].as_array().unwrap().len(), 1);
    // The feed from the snapshot's cursor does not repeat it.
    let (_, page) = app
        .get(&format!("/sync/changes?since={}", s["max_rev"]), &cashier)
        .await;
    assert!(page["changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["rev"].as_i64().unwrap() > s["max_rev"].as_i64().unwrap()));
}

#[tokio::test]
async fn a_long_poll_answers_at_once_when_there_are_changes() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let started = Instant::now();
    let (status, page) = app.get("/sync/changes?since=0&wait=30", &admin).await;
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!page["changes"].as_array().unwrap().is_empty());
}

/// The cross-process wake-up: a poll parked on one server process
/// answers soon after another process commits a change.
#[tokio::test]
async fn a_long_poll_wakes_when_another_process_commits() {
    let app = TestApp::spawn().await;
    let second = app.second_process();
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let cursor = top(&app).await;
    let poll = tokio::spawn({
        let (http, url, t) = (app.http.clone(), app.base.clone(), cashier.clone());
        async move {
            let res = http
                .get(format!("{url}/sync/changes?since={cursor}&wait=20"))
                .bearer_auth(t)
                .send()
                .await
                .unwrap();
            let body: Value = res.json().await.unwrap();
            (Instant::now(), body)
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!poll.is_finished(), "the poll is parked");
    let created = customer_at(&app, &second.base, &admin, "Through the other process").await;
    let committed = Instant::now();
    let (answered, page) = poll.await.unwrap();
    let woke = answered.saturating_duration_since(committed);
    assert!(woke < Duration::from_secs(2), "woke after {woke:?}");
    let ids: Vec<&Value> = page["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["entity_id"])
        .collect();
    assert!(ids.contains(&&created["id"]), "{page}");
    assert!(page["max_rev"].as_i64().unwrap() > cursor);
}

/// A parked poll of a branch does not answer for another branch's change;
/// it answers the next change it may see.
#[tokio::test]
async fn a_parked_poll_answers_only_changes_its_branch_may_see() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let b = app.branch("B").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (_, cashier_b) = app.signed_in(b, Role::Cashier).await;
    let medicine = app
        .medicine(&admin, json!({"name": "Zinc", "selling_price": 100}))
        .await;
    let cursor = top(&app).await;
    let poll = tokio::spawn({
        let (http, url, t) = (app.http.clone(), app.base.clone(), cashier_b.clone());
        async move {
            let res = http
                .get(format!("{url}/sync/changes?since={cursor}&wait=20"))
                .bearer_auth(t)
                .send()
                .await
                .unwrap();
            res.json::<Value>().await.unwrap()
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Branch A's stock: not B's to see.
    app.receive(&admin, &medicine["id"], a, 5, "2031-01-01")
        .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!poll.is_finished(), "woke for another branch's change");
    let created = customer_at(&app, &app.base, &admin, "Everyone's").await;
    let page = tokio::time::timeout(Duration::from_secs(5), poll)
        .await
        .unwrap()
        .unwrap();
    let changes = page["changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c["entity_id"] == created["id"]));
    assert!(changes
        .iter()
        .all(|c| c["branch_id"].is_null() || c["branch_id"] == b.to_string()));
}

#[tokio::test]
async fn a_long_poll_that_ends_with_nothing_answers_an_empty_page_with_the_same_cursor() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let cursor = top(&app).await;
    let started = Instant::now();
    let (status, page) = app
        .get(&format!("/sync/changes?since={cursor}&wait=1"), &cashier)
        .await;
    let took = started.elapsed();
    assert_eq!(status, StatusCode::OK);
    assert!(
        took >= Duration::from_millis(950),
        "answered after {took:?}"
    );
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
    let (_, snapshot) = app.get("/sync/snapshot", &cashier).await;
    assert_eq!(
        page,
        json!({"changes": [], "max_rev": cursor, "has_more": false, "epoch": snapshot["epoch"]})
    );
}

#[tokio::test]
async fn long_polls_beyond_the_configured_bound_get_503_with_retry_after() {
    let app = TestApp::spawn_with(|c| c.sync.max_parked_polls = 2).await;
    let a = app.branch("A").await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let cursor = top(&app).await;
    let path = format!("{}/sync/changes?since={cursor}&wait=3", app.base);
    let parked: Vec<_> = (0..2)
        .map(|_| {
            let (http, path, t) = (app.http.clone(), path.clone(), cashier.clone());
            tokio::spawn(async move { http.get(path).bearer_auth(t).send().await.unwrap() })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let res = app
        .http
        .get(&path)
        .bearer_auth(&cashier)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let problem: Value = res.json().await.unwrap();
    assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        &problem,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    // A poll that need not wait is answered, and the parked ones end well.
    let (status, _) = app
        .get(&format!("/sync/changes?since={cursor}"), &cashier)
        .await;
    assert_eq!(status, StatusCode::OK);
    for p in parked {
        assert_eq!(p.await.unwrap().status(), StatusCode::OK);
    }
    // Their places are free again.
    let (status, _) = app
        .get(&format!("/sync/changes?since={cursor}&wait=1"), &cashier)
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_bad_wait_is_400_naming_wait() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    for wait in ["31", "-1", "abc", "1.5", "", "3600"] {
        let (status, problem) = app
            .get(&format!("/sync/changes?wait={wait}"), &cashier)
            .await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], "wait", "wait={wait}");
    }
    for wait in ["0", "30"] {
        let (status, _) = app
            .get(&format!("/sync/changes?since=0&wait={wait}"), &cashier)
            .await;
        assert_eq!(status, StatusCode::OK, "wait={wait}");
    }
}

#[tokio::test]
async fn the_openapi_document_describes_the_wait_parameter() {
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
    let params = doc["paths"]["/api/v1/sync/changes"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let wait = params.iter().find(|p| p["name"] == "wait").unwrap();
    assert_eq!(wait["in"], "query");
    assert_eq!(wait["schema"]["maximum"], 30);
    assert!(wait["description"]
        .as_str()
        .is_some_and(|d| d.contains("Retry-After")));
}

/// Concurrent updates of one row take their revs in the order they write
/// it: the feed's last change of the row is the row as it stands, so a till
/// applying the feed in rev order ends where the server is.
#[tokio::test]
async fn concurrent_updates_of_a_row_reach_the_feed_in_the_order_they_were_written() {
    let app = TestApp::spawn().await;
    let a = app.branch("A").await;
    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let customer = customer_at(&app, &app.base, &admin, "Contended").await;
    let id = customer["id"].as_str().unwrap().to_owned();
    for round in 0..3 {
        let updates = (0..12).map(|i| {
            let (app, admin, id) = (&app, &admin, &id);
            async move {
                let res = app
                    .http
                    .put(format!("{}/customers/{id}", app.base))
                    .bearer_auth(admin)
                    .json(&json!({ "name": format!("Name {round}-{i}") }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), StatusCode::OK);
            }
        });
        join_all(updates).await;
        let (_, row) = app.get(&format!("/customers/{id}"), &admin).await;
        let (_, page) = app.get("/sync/changes?since=0&limit=5000", &admin).await;
        let last = page["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["entity_id"] == id.as_str())
            .max_by_key(|c| c["rev"].as_i64().unwrap())
            .unwrap()
            .clone();
        assert_eq!(last["payload"]["name"], row["name"], "round {round}");
        assert_eq!(last["rev"], row["rev"], "round {round}");
    }
}
