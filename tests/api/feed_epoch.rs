//! The change feed's epoch: a till's cursor is only good in the database
//! history that handed it out. A cursor beyond the feed's head, or of
//! another epoch, is 409 `resnapshot`, never an empty page; a cursor of the
//! current history works as it always did (with or without `epoch`). The
//! last test promotes a real standby restored from a base backup (a
//! point-in-time restore, as after losing the primary) under a running
//! service, and checks what a till with an old cursor sees.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use pharmacy::devdb::{self, ClusterSpec};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::pg_tools::{free_port, pg_tool, run_tool};
use crate::common::{assert_problem, Role, TestApp};

/// The highest rev the sequence has handed out: the feed's head.
async fn head(app: &TestApp) -> i64 {
    app.pool
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM change_log_rev_seq",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

fn assert_resnapshot(status: StatusCode, body: &Value, field: &str) {
    assert_problem(status, body, StatusCode::CONFLICT);
    assert_eq!(body["code"], "resnapshot", "{body}");
    assert_eq!(body["field"], field, "{body}");
    assert!(body.get("changes").is_none(), "{body}");
}

async fn customer(app: &TestApp, token: &str, name: &str) -> Value {
    let (s, c) = app.post("/customers", token, json!({ "name": name })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    c
}

#[tokio::test]
async fn a_cursor_beyond_the_head_is_409_resnapshot_and_never_an_empty_page() {
    let app = TestApp::spawn().await;
    let branch = app.branch("EPA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    customer(&app, &cashier, "Ahead One").await;
    let head = head(&app).await;

    for since in [head + 1, 1_000_000_000_000, i64::MAX] {
        let (status, body) = app
            .get(&format!("/sync/changes?since={since}"), &cashier)
            .await;
        assert_resnapshot(status, &body, "since");
        assert!(body["detail"].as_str().unwrap().contains("snapshot"));
    }
    // A long poll is answered at once, not parked until its time is up.
    let started = Instant::now();
    let (status, body) = app
        .get(
            &format!("/sync/changes?since={}&wait=5", head + 1),
            &cashier,
        )
        .await;
    assert_resnapshot(status, &body, "since");
    assert!(started.elapsed() < Duration::from_secs(3));

    // At the head itself: the empty page it always was.
    let (status, page) = app
        .get(&format!("/sync/changes?since={head}"), &cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["changes"], json!([]));
    assert_eq!(page["max_rev"], head);
}

#[tokio::test]
async fn a_cursor_of_another_epoch_is_409_resnapshot() {
    let app = TestApp::spawn().await;
    let branch = app.branch("EPB").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (status, snapshot) = app.get("/sync/snapshot", &cashier).await;
    assert_eq!(status, StatusCode::OK);
    let epoch = snapshot["epoch"].as_str().unwrap().to_owned();
    let since = snapshot["max_rev"].as_i64().unwrap();

    // The epoch is the server's system identifier and timeline.
    let expected: String = app
        .pool
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT (SELECT system_identifier FROM pg_control_system())::text || '-' ||
                    ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(epoch, expected);

    let (system, timeline) = epoch.split_once('-').unwrap();
    let timeline: i64 = timeline.parse().unwrap();
    for other in [
        format!("{system}-{}", timeline + 1),
        format!("1-{timeline}"),
        "not-an-epoch".to_owned(),
    ] {
        for query in [
            format!("since={since}&epoch={other}"),
            format!("since=0&epoch={other}"),
            format!("since={since}&epoch={other}&wait=5"),
        ] {
            let started = Instant::now();
            let (status, body) = app.get(&format!("/sync/changes?{query}"), &cashier).await;
            assert_resnapshot(status, &body, "epoch");
            assert!(started.elapsed() < Duration::from_secs(3), "{query}");
        }
    }
    // An empty `epoch` is none at all.
    let (status, page) = app
        .get(&format!("/sync/changes?since={since}&epoch="), &cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
}

#[tokio::test]
async fn a_cursor_of_the_current_epoch_works_as_before_with_or_without_it() {
    let app = TestApp::spawn().await;
    let branch = app.branch("EPC").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (_, snapshot) = app.get("/sync/snapshot", &cashier).await;
    let epoch = snapshot["epoch"].as_str().unwrap().to_owned();
    let since = snapshot["max_rev"].as_i64().unwrap();
    let made = customer(&app, &cashier, "Epoch Regular").await;

    // As the spec shows it: `since` alone.
    let (status, page) = app
        .get(&format!("/sync/changes?since={since}"), &cashier)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["epoch"], epoch);
    let changes = page["changes"].as_array().unwrap();
    assert!(
        changes.iter().any(|c| c["entity_id"] == made["id"]),
        "{page}"
    );
    let after = page["max_rev"].as_i64().unwrap();
    assert!(after > since);

    // With the epoch sent back, paging one change at a time.
    let mut cursor = since;
    let mut seen = Vec::new();
    loop {
        let (status, page) = app
            .get(
                &format!("/sync/changes?since={cursor}&epoch={epoch}&limit=1"),
                &cashier,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(page["epoch"], epoch);
        seen.extend(page["changes"].as_array().unwrap().iter().cloned());
        cursor = page["max_rev"].as_i64().unwrap();
        if page["has_more"] == false {
            break;
        }
    }
    assert_eq!(cursor, after);
    assert_eq!(&seen, changes);

    // A long poll with the epoch ends with the cursor where it was.
    let (status, page) = app
        .get(
            &format!("/sync/changes?since={after}&epoch={epoch}&wait=1"),
            &cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["changes"], json!([]));
    assert_eq!(page["max_rev"], after);
    assert_eq!(page["epoch"], epoch);
}

// ------------------------------------------------------- a real promotion

/// The test's own cluster (the primary), and the restored one that takes
/// its place; both stopped and deleted at the end.
struct Clusters {
    spec: ClusterSpec,
    restored: PathBuf,
}

impl Drop for Clusters {
    fn drop(&mut self) {
        if self.restored.join("PG_VERSION").exists() {
            let mut stop = pg_tool("pg_ctl");
            stop.args(["stop", "-m", "immediate", "-D"])
                .arg(&self.restored)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let _ = stop.status();
        }
        let _ = devdb::stop_and_remove(&self.spec);
    }
}

/// `GET` until the service answers something other than 503 (its pool
/// reconnecting to the promoted server).
async fn get_through_failover(app: &TestApp, path: &str, token: &str) -> (StatusCode, Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = app.get(path, token).await;
        if status != StatusCode::SERVICE_UNAVAILABLE || Instant::now() > deadline {
            return (status, body);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn start_restored(data: &Path, port: u16, run_dir: &Path, log: &Path) {
    let mut start = pg_tool("pg_ctl");
    start
        .args(["start", "-w", "-t", "60", "-D"])
        .arg(data)
        .arg("-l")
        .arg(log)
        .arg("-o")
        .arg(format!(
            "-p {port} -k {} -c listen_addresses='127.0.0.1' -c max_connections=400",
            run_dir.display()
        ))
        .stdout(Stdio::null());
    let out = tokio::task::spawn_blocking(move || start.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "start the restored cluster: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

#[tokio::test]
async fn after_a_restore_and_promotion_an_old_cursor_is_409_and_a_fresh_snapshot_works() {
    let port = free_port();
    let spec = ClusterSpec {
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-pg")
            .join(format!("epoch-{}", uuid::Uuid::now_v7().simple())),
        port: Some(port),
        // A base backup is taken of it: durable settings.
        ephemeral: false,
    };
    let started = {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || devdb::ensure_started(&spec))
            .await
            .unwrap()
            .unwrap()
    };
    let dir = devdb::resolved_dir(&spec).unwrap();
    let clusters = Clusters {
        spec: spec.clone(),
        restored: dir.join("restored"),
    };
    devdb::ensure_database(&started, "pharmacy").await.unwrap();
    let url = started.conninfo("pharmacy");
    {
        let pool =
            pharmacy::db::pool(&url, &pharmacy::config::Config::defaults().database).unwrap();
        pharmacy::db::migrate::run(&pool).await.unwrap();
        pool.close();
    }
    let app = TestApp::spawn_on(&url, |_| {}).await;
    let branch = app.branch("EPR").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    customer(&app, &cashier, "Before The Backup").await;
    let (_, old) = app.get("/sync/snapshot", &cashier).await;
    let old_epoch = old["epoch"].as_str().unwrap().to_owned();
    let backed_up = old["max_rev"].as_i64().unwrap();

    // The base backup the chain will restore.
    let mut backup = pg_tool("pg_basebackup");
    backup
        .args(["-h", "127.0.0.1", "-p", &started.port.to_string()])
        .args(["-U", "postgres", "-X", "stream", "-c", "fast", "-D"])
        .arg(&clusters.restored);
    run_tool(backup, "pg_basebackup").await;

    // Writes the backup does not have: more than the 32 revs a sequence
    // logs ahead, so the restored head is behind the till's cursor.
    for i in 0..40 {
        customer(&app, &cashier, &format!("Lost {i}")).await;
    }
    let (_, page) = app
        .get(
            &format!("/sync/changes?since={backed_up}&epoch={old_epoch}&limit=5000"),
            &cashier,
        )
        .await;
    let lost_cursor = page["max_rev"].as_i64().unwrap();
    assert!(lost_cursor >= backed_up + 40, "{page}");

    // The primary is lost; the backup is restored in its place (same
    // address) and promoted at the end of its recovery.
    {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || devdb::stop(&spec))
            .await
            .unwrap()
            .unwrap();
    }
    std::fs::write(clusters.restored.join("standby.signal"), "").unwrap();
    start_restored(
        &clusters.restored,
        started.port,
        &started.socket_dir,
        &dir.join("restored.log"),
    )
    .await;
    let mut promote = pg_tool("pg_ctl");
    promote
        .args(["promote", "-w", "-t", "60", "-D"])
        .arg(&clusters.restored)
        .stdout(Stdio::null());
    run_tool(promote, "pg_ctl promote").await;

    // The till's cursor from the lost writes: beyond the restored head.
    let (status, body) = get_through_failover(
        &app,
        &format!("/sync/changes?since={lost_cursor}&wait=2"),
        &cashier,
    )
    .await;
    assert_resnapshot(status, &body, "since");
    // A cursor the restored database does reach, but from the old epoch:
    // the revs after it may be reused, so it is refused too.
    let (status, body) = app
        .get(
            &format!("/sync/changes?since={backed_up}&epoch={old_epoch}"),
            &cashier,
        )
        .await;
    assert_resnapshot(status, &body, "epoch");

    // A fresh snapshot names the new epoch (same cluster, next timeline)
    // and the feed follows it; the writes after the backup are gone.
    let (status, fresh) = get_through_failover(&app, "/sync/snapshot", &cashier).await;
    assert_eq!(status, StatusCode::OK, "{fresh}");
    let new_epoch = fresh["epoch"].as_str().unwrap().to_owned();
    assert_ne!(new_epoch, old_epoch);
    let (old_system, old_tl) = old_epoch.split_once('-').unwrap();
    let (new_system, new_tl) = new_epoch.split_once('-').unwrap();
    assert_eq!(new_system, old_system);
    assert!(new_tl.parse::<i64>().unwrap() > old_tl.parse::<i64>().unwrap());
    let names: Vec<&str> = fresh["customers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(names.contains(&"Before The Backup"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("Lost ")), "{names:?}");

    let since = fresh["max_rev"].as_i64().unwrap();
    let made = customer(&app, &cashier, "After The Restore").await;
    let (status, page) = app
        .get(
            &format!("/sync/changes?since={since}&epoch={new_epoch}"),
            &cashier,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["epoch"], new_epoch);
    assert!(
        page["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["entity_id"] == made["id"]),
        "{page}"
    );
    drop(app);
    drop(clusters);
}
