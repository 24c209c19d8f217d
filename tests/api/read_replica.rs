//! `DATABASE_READ_URL`: the reports, the dashboard, the compliance books and
//! their CSV exports, and the sync snapshot read from the replica while it
//! is within its lag bound; everything else, and those reads too when the
//! replica lags or is unreachable, from the primary.
//!
//! The "replica" here is a copy of the primary's database taken at one
//! moment: a standby frozen in time. Writes made after the copy are on the
//! primary only, so every answer shows where it was read. For the lag
//! bound, the copy's search path puts a schema first whose functions
//! (`pg_is_in_recovery`, `pg_last_wal_replay_lsn`, ...) and
//! `pg_stat_wal_receiver` view play a standby the test steers, so the
//! service's own lag query decides.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{copy_database, drop_database, execute_on, fresh_database, Role, TestApp};

/// Drops a database of the test server when the test ends.
struct Db(String);

impl Drop for Db {
    fn drop(&mut self) {
        drop_database(&self.0);
    }
}

/// A primary with one sale, prescription and till made before the copy and
/// one of each made after it, served by an app whose read replica is the copy.
struct Chain {
    app: TestApp,
    admin: String,
    /// The sale made after the copy (on the primary only).
    late_sale: String,
    replica_db: String,
    _dbs: (Db, Db),
}

const COPY_MARK: &str = " (replica copy)";

/// Makes one of each record the books count.
async fn one_of_each(app: &TestApp, admin: &str, branch: Uuid, medicine: &Value) -> String {
    let (s, sale) = app
        .post(
            "/sales",
            admin,
            json!({"items": [{"medicine_id": medicine["id"], "quantity": 1}], "payment_method": "cash"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{sale}");
    let (s, rx) = app
        .post(
            "/prescriptions",
            admin,
            json!({"patient_name": "Amina", "patient_id_number": "CM900",
                   "prescriber_name": "Dr Okello", "prescriber_license": "UMDPC-77",
                   "items": [{"medicine_id": medicine["id"], "quantity": 1}]}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{rx}");
    let (s, device) = app
        .post(
            "/devices",
            admin,
            json!({"name": format!("Till {}", Uuid::now_v7()), "branch_id": branch}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{device}");
    sale["id"].as_str().unwrap().to_owned()
}

impl Chain {
    /// `steered`: the copy plays a standby the test steers (see
    /// `STEERED_STANDBY`).
    async fn start(steered: bool) -> Chain {
        let (primary_db, primary_url) = fresh_database().await;
        let primary_guard = Db(primary_db.clone());
        let before = TestApp::spawn_on(&primary_url, |_| {}).await;
        let branch = before.branch("KLA").await;
        let (_, admin) = before.signed_in(branch, Role::Admin).await;
        let medicine = before
            .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
            .await;
        before
            .receive(&admin, &medicine["id"], branch, 50, "2030-12-31")
            .await;
        one_of_each(&before, &admin, branch, &medicine).await;
        drop(before);

        let (replica_db, replica_url) = copy_database(&primary_db).await;
        let replica_guard = Db(replica_db.clone());
        // Marks what only the copy says (no trigger or change-log row: the
        // copy's `max_rev` stays the primary's).
        execute_on(
            &replica_db,
            &format!("UPDATE medicines SET name = name || '{COPY_MARK}'"),
        )
        .await;
        if steered {
            execute_on(&replica_db, STEERED_STANDBY).await;
            // Every connection the app makes to the copy finds the steered
            // functions before the built-in ones.
            execute_on(
                &replica_db,
                &format!("ALTER DATABASE {replica_db} SET search_path = steer, pg_catalog, public"),
            )
            .await;
        }
        let app = TestApp::spawn_on(&primary_url, |c| {
            c.database.read_url = Some(replica_url.clone());
            c.database.replica_check_ms = 50;
        })
        .await;
        Chain {
            app,
            admin,
            late_sale: String::new(),
            replica_db,
            _dbs: (primary_guard, replica_guard),
        }
    }

    /// Writes on the primary after the copy: a second sale, prescription and till.
    async fn write_after_copy(&mut self) {
        let (_, me) = self.app.get("/auth/me", &self.admin).await;
        let branch: Uuid = me["branch_id"].as_str().unwrap().parse().unwrap();
        let (s, page) = self.app.get("/medicines", &self.admin).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        let medicine = page["items"][0].clone();
        self.late_sale = one_of_each(&self.app, &self.admin, branch, &medicine).await;
    }

    async fn sales_counted(&self) -> i64 {
        let (s, report) = self.app.get("/reports/sales", &self.admin).await;
        assert_eq!(s, StatusCode::OK, "{report}");
        report["totals"]["count"].as_i64().unwrap()
    }

    /// Waits (up to 10 s) until the sales report counts `want` sales.
    async fn until_sales_counted(&self, want: i64, why: &str) {
        let started = Instant::now();
        loop {
            let got = self.sales_counted().await;
            if got == want {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{why}: the sales report still counts {got} sales, not {want}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn snapshot_names(&self) -> Vec<String> {
        let (s, snap) = self.app.get("/sync/snapshot", &self.admin).await;
        assert_eq!(s, StatusCode::OK, "{snap}");
        snap["medicines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn csv_rows(&self, path: &str) -> usize {
        let res = self
            .app
            .http
            .get(format!("{}{path}", self.app.base))
            .bearer_auth(&self.admin)
            .header("Accept", "text/csv")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let text = res.text().await.unwrap();
        // The header row, then one line per record.
        text.lines().count() - 1
    }

    async fn metrics(&self) -> String {
        self.app
            .http
            .get(format!("{}/metrics", self.app.root))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// The value of a counter series (0 when absent).
fn counter(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn lag_tolerant_reads_come_from_the_replica_and_the_rest_from_the_primary() {
    let mut chain = Chain::start(false).await;

    // The snapshot: the copy has the primary's `max_rev`, so it is exactly
    // what the primary would give, and it is read from the copy.
    let started = Instant::now();
    while !chain
        .snapshot_names()
        .await
        .iter()
        .all(|n| n.ends_with(COPY_MARK))
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the snapshot never came from the replica"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    chain.write_after_copy().await;
    let app = &chain.app;
    let admin = chain.admin.as_str();

    // Reports, dashboard, books and exports: the copy's one sale,
    // prescription and till, not the primary's two.
    assert_eq!(chain.sales_counted().await, 1);
    let (s, summary) = app.get("/dashboard/summary", admin).await;
    assert_eq!(s, StatusCode::OK, "{summary}");
    assert_eq!(summary["today_sales_count"], 1, "{summary}");
    let (s, comparison) = app.get("/dashboard/branch-comparison", admin).await;
    assert_eq!(s, StatusCode::OK, "{comparison}");
    assert_eq!(comparison["total_sales_count"], 1, "{comparison}");
    let (s, book) = app.get("/compliance/prescription-book", admin).await;
    assert_eq!(s, StatusCode::OK, "{book}");
    assert_eq!(book["total"], 1, "{book}");
    let (s, register) = app.get("/compliance/devices", admin).await;
    assert_eq!(s, StatusCode::OK, "{register}");
    assert_eq!(register["total"], 1, "{register}");
    assert_eq!(chain.csv_rows("/compliance/prescription-book").await, 1);
    let (s, inventory) = app.get("/reports/inventory", admin).await;
    assert_eq!(s, StatusCode::OK, "{inventory}");
    // 50 received, one sold before the copy (the primary has sold two).
    assert_eq!(inventory["total_units"], 49, "{inventory}");

    // Reads that must include the caller's last write stay on the primary.
    let (s, sale) = app.get(&format!("/sales/{}", chain.late_sale), admin).await;
    assert_eq!(s, StatusCode::OK, "{sale}");
    let (s, fiscal) = app
        .get(
            &format!("/compliance/fiscal-preview/{}", chain.late_sale),
            admin,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{fiscal}");
    let (s, page) = app.get("/medicines", admin).await;
    assert_eq!(s, StatusCode::OK);
    assert!(!page.to_string().contains(COPY_MARK), "{page}");
    let (s, feed) = app.get("/sync/changes?since=0", admin).await;
    assert_eq!(s, StatusCode::OK, "{feed}");
    assert!(!feed.to_string().contains(COPY_MARK), "{feed}");

    // The primary has settled revs the copy lacks: a snapshot from the copy
    // would not hold every write up to its `max_rev`, so it comes from the
    // primary.
    let names = chain.snapshot_names().await;
    assert!(
        !names.is_empty() && names.iter().all(|n| !n.ends_with(COPY_MARK)),
        "{names:?}"
    );

    let metrics = chain.metrics().await;
    assert!(
        counter(
            &metrics,
            "db_read_routing_total{pool=\"replica\",reason=\"in_use\"}"
        ) >= 9.0,
        "{metrics}"
    );
    assert!(
        counter(
            &metrics,
            "db_read_routing_total{pool=\"primary\",reason=\"snapshot_moved\"}"
        ) >= 1.0,
        "{metrics}"
    );
}

/// A standby the test steers: `lag_secs` is the age of its last replayed
/// commit, `caught_up` whether it has replayed all it received, `streaming`
/// whether its WAL receiver streams.
const STEERED_STANDBY: &str = r#"
CREATE SCHEMA steer;
CREATE TABLE steer.standby (lag_secs float8 NOT NULL, caught_up bool NOT NULL, streaming bool NOT NULL);
INSERT INTO steer.standby VALUES (1, false, true);
CREATE FUNCTION steer.pg_is_in_recovery() RETURNS bool LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION steer.pg_last_wal_receive_lsn() RETURNS pg_lsn LANGUAGE sql
    AS $$SELECT '0/2'::pg_lsn$$;
CREATE FUNCTION steer.pg_last_wal_replay_lsn() RETURNS pg_lsn LANGUAGE sql
    AS $$SELECT CASE WHEN caught_up THEN '0/2'::pg_lsn ELSE '0/1'::pg_lsn END FROM steer.standby$$;
CREATE FUNCTION steer.pg_last_xact_replay_timestamp() RETURNS timestamptz LANGUAGE sql
    AS $$SELECT now() - make_interval(secs => lag_secs) FROM steer.standby$$;
CREATE VIEW steer.pg_stat_wal_receiver AS
    SELECT CASE WHEN streaming THEN 'streaming' ELSE 'waiting' END AS status FROM steer.standby;
"#;

impl Chain {
    async fn steer(&self, set: &str) {
        execute_on(&self.replica_db, &format!("UPDATE steer.standby SET {set}")).await;
    }
}

#[tokio::test]
async fn a_replica_past_its_lag_bound_sends_reads_to_the_primary_until_it_catches_up() {
    let mut chain = Chain::start(true).await;
    chain.write_after_copy().await;

    // 1 s behind, bound 5 s: the replica (one sale).
    chain.until_sales_counted(1, "1 s behind").await;
    // An hour behind: the primary (two sales).
    chain.steer("lag_secs = 3600").await;
    chain.until_sales_counted(2, "an hour behind").await;
    let metrics = chain.metrics().await;
    assert!(
        counter(
            &metrics,
            "db_read_routing_total{pool=\"primary\",reason=\"lagging\"}"
        ) >= 1.0,
        "{metrics}"
    );
    assert!(metrics.contains("db_replica_lag_seconds"), "{metrics}");
    // Streaming and everything received replayed: caught up, however old
    // its last replayed commit (an idle primary sends nothing to replay).
    chain.steer("caught_up = true").await;
    chain
        .until_sales_counted(1, "caught up after an idle hour")
        .await;
    // Replayed all it received but not streaming: its lag is the age of its
    // last commit, an hour.
    chain.steer("streaming = false").await;
    chain
        .until_sales_counted(2, "not streaming, an hour old")
        .await;
    // A recent commit again: within the bound.
    chain.steer("lag_secs = 0.5").await;
    chain.until_sales_counted(1, "half a second behind").await;
}

#[tokio::test]
async fn an_unreachable_replica_leaves_every_read_on_the_primary() {
    // Nothing listens on port 9 of this machine's loopback (discard, unused).
    let app = TestApp::spawn_with(|c| {
        c.database.read_url = Some("postgres://postgres@127.0.0.1:9/pharmacy".to_owned());
        c.database.replica_check_ms = 50;
    })
    .await;
    let branch = app.branch("KLA").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let medicine = app
        .medicine(&admin, json!({"name": "Paracetamol", "selling_price": 500}))
        .await;
    app.receive(&admin, &medicine["id"], branch, 10, "2030-12-31")
        .await;
    let (s, sale) = app
        .post(
            "/sales",
            &admin,
            json!({"items": [{"medicine_id": medicine["id"], "quantity": 1}], "payment_method": "cash"}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{sale}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for path in [
        "/reports/sales",
        "/dashboard/summary",
        "/compliance/prescription-book",
        "/sync/snapshot",
    ] {
        let (s, body) = app.get(path, &admin).await;
        assert_eq!(s, StatusCode::OK, "{path}: {body}");
    }
    let (_, report) = app.get("/reports/sales", &admin).await;
    assert_eq!(report["totals"]["count"], 1, "{report}");
    let metrics = app
        .http
        .get(format!("{}/metrics", app.root))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        counter(
            &metrics,
            "db_read_routing_total{pool=\"primary\",reason=\"unreachable\"}"
        ) >= 1.0,
        "{metrics}"
    );
}
