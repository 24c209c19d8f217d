//! A commit waiting for its synchronous standby is never acknowledged
//! before the standby has it, and never holds its request past the
//! statement timeout. PostgreSQL does not time a `COMMIT` out (it disarms
//! the statement timeout before committing), so a standby that hangs
//! without disconnecting would hold the request for as long as it hangs;
//! and a cancel request would end the wait with a local commit and a
//! WARNING. The service bounds the wait itself, answers 503
//! `database_unavailable` past the statement timeout, and drops the
//! connection without cancelling anything. Here a real primary streams to
//! a real synchronous standby whose WAL receiver is stopped (SIGSTOP)
//! while a sale commits: the till gets 503, never 2xx, the commit still
//! waits on the primary, reads go on, and once the standby runs again the
//! retry with the same mutation id gets the one sale, on both nodes.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pharmacy::devdb::{self, ClusterSpec};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio_postgres::NoTls;

use crate::common::pg_tools::{free_port, pg_tool, run_tool};
use crate::common::{Role, TestApp};

/// The primary (a cluster of the test's own) and its standby; both stopped
/// and deleted at the end.
struct Pair {
    spec: ClusterSpec,
    standby: PathBuf,
}

impl Drop for Pair {
    fn drop(&mut self) {
        if self.standby.join("PG_VERSION").exists() {
            let mut stop = pg_tool("pg_ctl");
            stop.args(["stop", "-m", "immediate", "-D"])
                .arg(&self.standby)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let _ = stop.status();
        }
        let _ = devdb::stop_and_remove(&self.spec);
    }
}

/// A process stopped with SIGSTOP, continued when dropped (a failed
/// assertion must not leave the standby stopped for the clean-up).
struct Stopped(Pid);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        let pid = Pid::from_raw(pid);
        kill(pid, Signal::SIGSTOP).unwrap();
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// Polls `sql` (one bigint) on `client` until it answers `want`.
async fn wait_for(client: &tokio_postgres::Client, sql: &str, want: i64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: i64 = client.query_one(sql, &[]).await.unwrap().get(0);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: still {got}, not {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn post_sale(
    app: &TestApp,
    token: &str,
    body: &Value,
) -> (StatusCode, Option<String>, Value) {
    let res = app
        .http
        .post(format!("{}/sales", app.base))
        .bearer_auth(token)
        .timeout(Duration::from_secs(60))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, res.json().await.unwrap_or(Value::Null))
}

const WAITING_FOR_STANDBY: &str =
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'";

#[tokio::test]
async fn a_commit_the_synchronous_standby_does_not_confirm_is_503_and_its_retry_has_one_effect() {
    let primary_port = free_port();
    let spec = ClusterSpec {
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-pg")
            .join(format!("sync-{}", uuid::Uuid::now_v7().simple())),
        port: Some(primary_port),
        // A standby is cloned from it: durable settings.
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
    let pair = Pair {
        spec: spec.clone(),
        standby: dir.join("standby"),
    };
    devdb::ensure_database(&started, "pharmacy").await.unwrap();
    let url = started.conninfo("pharmacy");
    {
        let pool =
            pharmacy::db::pool(&url, &pharmacy::config::Config::defaults().database).unwrap();
        pharmacy::db::migrate::run(&pool).await.unwrap();
        pool.close();
    }

    // The standby: a base backup that follows the primary (-R), on a port
    // of its own; then every commit of the primary waits for it.
    let mut backup = pg_tool("pg_basebackup");
    backup
        .args(["-h", "127.0.0.1", "-p", &started.port.to_string()])
        .args(["-U", "postgres", "-X", "stream", "-c", "fast", "-R", "-D"])
        .arg(&pair.standby);
    run_tool(backup, "pg_basebackup").await;
    let standby_port = loop {
        let p = free_port();
        if p != started.port {
            break p;
        }
    };
    let mut start = pg_tool("pg_ctl");
    start
        .args(["start", "-w", "-t", "60", "-D"])
        .arg(&pair.standby)
        .arg("-l")
        .arg(dir.join("standby.log"))
        .arg("-o")
        .arg(format!(
            "-p {standby_port} -k {} -c listen_addresses='127.0.0.1' -c hot_standby=on \
             -c max_connections=400",
            started.socket_dir.display()
        ))
        .stdout(Stdio::null());
    run_tool(start, "start the standby").await;
    let primary = connect(&started.conninfo("postgres")).await;
    primary
        .batch_execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        .await
        .unwrap();
    primary
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    wait_for(
        &primary,
        "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
        1,
        "a synchronous standby",
    )
    .await;
    let standby = connect(&format!(
        "postgres://postgres@127.0.0.1:{standby_port}/postgres"
    ))
    .await;
    wait_for(
        &standby,
        "SELECT count(*) FROM pg_stat_wal_receiver WHERE status = 'streaming'",
        1,
        "the standby streaming",
    )
    .await;
    let receiver: i32 = standby
        .query_one("SELECT pid FROM pg_stat_wal_receiver", &[])
        .await
        .unwrap()
        .get(0);

    // A short statement timeout, and few connections, so a pooled
    // connection still waiting for its commit would be handed out again.
    let app = TestApp::spawn_on(&url, |c| {
        c.database.statement_timeout_ms = 2_000;
        c.database.pool_size = 2;
    })
    .await;
    let branch = app.branch("SYN").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let medicine = app
        .medicine(
            &admin,
            json!({"name": "Sync Ibuprofen", "selling_price": 300}),
        )
        .await;
    app.receive(&admin, &medicine["id"], branch, 10, "2030-12-31")
        .await;
    let sale = |id: &str| {
        json!({"items": [{"medicine_id": medicine["id"], "quantity": 1}],
               "payment_method": "cash", "client_mutation_id": id})
    };
    let (status, _, body) = post_sale(&app, &cashier, &sale("sync-warm")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // The standby hangs without disconnecting: its WAL receiver stopped.
    let hung = Stopped::stop(receiver);
    let sent = Instant::now();
    let (status, retry, body) = post_sale(&app, &cashier, &sale("sync-held")).await;
    let took = sent.elapsed();
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "a commit the standby has not confirmed is not acknowledged: {body}"
    );
    assert_eq!(body["code"], "database_unavailable", "{body}");
    assert!(retry.is_some(), "the 503 carries Retry-After");
    // Bounded by the statement timeout (the longest any pool of this
    // test process was built with), never a hang.
    assert!(took < Duration::from_secs(20), "answered after {took:?}");
    // The commit still waits on the primary, invisible: the server did not
    // cancel it into a local commit.
    let waiting: i64 = primary
        .query_one(WAITING_FOR_STANDBY, &[])
        .await
        .unwrap()
        .get(0);
    assert!(waiting >= 1, "no commit waits for the standby");
    let on_primary = connect(&url).await;
    let count_held = "SELECT count(*) FROM sales WHERE client_mutation_id = 'sync-held'";
    assert_eq!(
        on_primary
            .query_one(count_held, &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        0
    );
    // The connection left waiting is not handed out again: reads go on,
    // each within a moment, on the pool's other connections.
    for _ in 0..4 {
        let asked = Instant::now();
        let res = app
            .http
            .get(format!("{}/sales?page_size=5", app.base))
            .bearer_auth(&cashier)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .expect("a read is not left waiting behind the unconfirmed commit");
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{:?}",
            asked.elapsed()
        );
    }
    // The till retries while the standby still hangs: the retry waits on
    // the first attempt's locks and is refused too, never acknowledged.
    let (status, retry, body) = post_sale(&app, &cashier, &sale("sync-held")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(retry.is_some());

    // A back-office write (a supplier created, on a transaction of the
    // driver's rather than the sale path's) is bounded the same way: 503,
    // not a request held for as long as the standby hangs.
    let asked = Instant::now();
    let res = app
        .http
        .post(format!("{}/suppliers", app.base))
        .bearer_auth(&admin)
        .json(&json!({"name": "Held Supplies"}))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("a back-office write is not held while the standby hangs");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["code"], "database_unavailable", "{body}");
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "{:?}",
        asked.elapsed()
    );
    let count_supplier = "SELECT count(*) FROM suppliers WHERE name = 'Held Supplies'";

    // The standby runs again: the waiting commits stand, on both nodes.
    drop(hung);
    wait_for(&primary, WAITING_FOR_STANDBY, 0, "the commit still waits").await;
    wait_for(&on_primary, count_held, 1, "the held sale").await;
    wait_for(&on_primary, count_supplier, 1, "the held supplier").await;
    let (status, _, again) = post_sale(&app, &cashier, &sale("sync-held")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the retry replays the sale: {again}"
    );
    let (status, _, again_more) = post_sale(&app, &cashier, &sale("sync-held")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again, again_more);
    assert_eq!(
        on_primary
            .query_one("SELECT count(*) FROM sales", &[])
            .await
            .unwrap()
            .get::<_, i64>(0),
        2
    );
    // On the standby too.
    let standby_db = connect(&format!(
        "postgres://postgres@127.0.0.1:{standby_port}/pharmacy"
    ))
    .await;
    wait_for(&standby_db, count_held, 1, "the held sale on the standby").await;
    app.assert_invariants().await;
    drop(app);
    drop(pair);
}
