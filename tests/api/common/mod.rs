//! Test harness: a real PostgreSQL (one cluster per test run, or
//! `TEST_DATABASE_URL`), a template database migrated once, a fresh database
//! cloned from it for every test, and the real app on an ephemeral port.

#![allow(dead_code)]

pub mod pg_tools;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;

use domain::{branches, users};
use pharmacy::config::Config;
use pharmacy::devdb::{self, ClusterSpec};
use pharmacy::{app, db};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio_postgres::NoTls;
use uuid::Uuid;

pub use domain::Role;

pub const PASSWORD: &str = "correct-horse-42";

/// The cluster of this test process: its own directory under the target dir
/// (so parallel test binaries and checkouts never share one), stopped and
/// deleted when the process exits.
fn test_cluster() -> &'static ClusterSpec {
    static SPEC: OnceLock<ClusterSpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        let parent = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-pg");
        sweep_stale_clusters(&parent);
        ClusterSpec {
            dir: parent.join(format!("run-{}", std::process::id())),
            port: None,
            ephemeral: true,
        }
    })
}

/// Clusters of test processes that died without cleaning up (killed runs).
fn sweep_stale_clusters(parent: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("run-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = devdb::stop_and_remove(&ClusterSpec {
                dir: entry.path(),
                port: None,
                ephemeral: true,
            });
        }
    }
}

/// Runs when the test process exits: no server of the run is left behind.
#[dtor::dtor(unsafe)]
fn stop_test_cluster() {
    if let Some(spec) = TEST_CLUSTER_STARTED.get() {
        let _ = devdb::stop_and_remove(spec);
    }
}

static TEST_CLUSTER_STARTED: OnceLock<ClusterSpec> = OnceLock::new();

/// Connection string to the maintenance database of the test server.
pub fn admin_conninfo() -> &'static str {
    static CONNINFO: OnceLock<String> = OnceLock::new();
    CONNINFO.get_or_init(|| {
        if let Ok(url) = std::env::var("TEST_DATABASE_URL") {
            return url;
        }
        let spec = test_cluster();
        let _ = TEST_CLUSTER_STARTED.set(spec.clone());
        let cluster = devdb::ensure_started(spec)
            .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL cluster: {e}"));
        cluster.conninfo("postgres")
    })
}

/// The data directory of this process's test cluster, if it started one.
pub fn test_cluster_dir() -> Option<PathBuf> {
    TEST_CLUSTER_STARTED
        .get()
        .and_then(|spec| devdb::resolved_dir(spec).ok())
}

/// Replaces the database name of a libpq-style or URL connection string.
pub fn with_dbname(conninfo: &str, dbname: &str) -> String {
    if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        let (base, query) = conninfo
            .split_once('?')
            .map_or((conninfo, None), |(b, q)| (b, Some(q)));
        let scheme_end = base.find("://").expect("scheme") + 3;
        let path_start = base[scheme_end..]
            .find('/')
            .map(|i| i + scheme_end)
            .unwrap_or(base.len());
        let mut out = format!("{}/{dbname}", &base[..path_start]);
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        out
    } else {
        let kept: Vec<&str> = conninfo
            .split_whitespace()
            .filter(|kv| !kv.starts_with("dbname="))
            .collect();
        format!("{} dbname={dbname}", kept.join(" "))
    }
}

pub async fn admin_client() -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(admin_conninfo(), NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(conn);
    client
}

fn template_name() -> String {
    let migrations = db::migrate::embedded().expect("embedded migrations");
    let all: String = migrations.iter().map(|m| m.checksum.as_str()).collect();
    format!("pharmacy_tpl_{}", &db::migrate::checksum(&all)[..16])
}

/// Creates the migrated template once (guarded by an advisory lock, so
/// parallel test processes take turns).
async fn ensure_template() -> String {
    let name = template_name();
    let client = admin_client().await;
    client
        .execute("SELECT pg_advisory_lock(7262001)", &[])
        .await
        .expect("lock");
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .expect("query")
        .is_some();
    if !exists {
        let building = format!("{name}_building");
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"))
            .await
            .expect("drop");
        client
            .batch_execute(&format!("CREATE DATABASE {building}"))
            .await
            .expect("create template");
        let config = Config::defaults();
        let pool =
            db::pool(&with_dbname(admin_conninfo(), &building), &config.database).expect("pool");
        db::migrate::run(&pool).await.expect("migrate the template");
        pool.close();
        drop(pool);
        client
            .batch_execute(&format!("ALTER DATABASE {building} RENAME TO {name}"))
            .await
            .expect("rename");
    }
    client
        .execute("SELECT pg_advisory_unlock(7262001)", &[])
        .await
        .expect("unlock");
    name
}

/// A fresh, migrated database for one test; returns its connection string.
pub async fn fresh_database() -> (String, String) {
    static TEMPLATE: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    let template = TEMPLATE.get_or_init(ensure_template).await;
    let name = format!("pharmacy_test_{}", Uuid::now_v7().simple());
    admin_client()
        .await
        .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
        .await
        .expect("clone the template");
    (name.clone(), with_dbname(admin_conninfo(), &name))
}

/// A copy of database `src` (its data as of now), under a new name; the
/// sessions still on `src` are ended first, since PostgreSQL copies only an
/// unused database. Returns the copy's name and connection string.
pub async fn copy_database(src: &str) -> (String, String) {
    let name = format!("pharmacy_copy_{}", Uuid::now_v7().simple());
    let client = admin_client().await;
    let mut last = String::new();
    for _ in 0..50 {
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&src],
            )
            .await
            .expect("end the sessions on the source");
        match client
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {src}"))
            .await
        {
            Ok(()) => return (name.clone(), with_dbname(admin_conninfo(), &name)),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("cannot copy {src}: {last}");
}

/// Runs SQL on database `dbname` of the test server as its superuser.
pub async fn execute_on(dbname: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(&with_dbname(admin_conninfo(), dbname), NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client.batch_execute(sql).await.expect("execute");
}

/// An empty (unmigrated) database, for migration tests.
pub async fn empty_database() -> (String, String) {
    let name = format!("pharmacy_empty_{}", Uuid::now_v7().simple());
    admin_client()
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create");
    (name.clone(), with_dbname(admin_conninfo(), &name))
}

pub fn drop_database(name: &str) {
    let name = name.to_owned();
    // Drop runs outside any runtime the test may be tearing down.
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            if let Ok((client, conn)) = tokio_postgres::connect(admin_conninfo(), NoTls).await {
                tokio::spawn(conn);
                let _ = client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await;
            }
        });
    })
    .join();
}

/// The running app with its own database.
pub struct TestApp {
    pub base: String,
    pub root: String,
    pub http: reqwest::Client,
    pub pool: deadpool_postgres::Pool,
    pub config: Config,
    pub org_id: Uuid,
    db_name: String,
    handle: actix_web::dev::ServerHandle,
}

pub fn test_config() -> Config {
    let mut config = Config::defaults();
    config.database.pool_size = 8;
    config.http.workers = 2;
    config.http.shutdown_timeout_secs = 1;
    config.actors.arbiters = 1;
    config
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(tune: impl FnOnce(&mut Config)) -> TestApp {
        let (db_name, url) = fresh_database().await;
        let mut config = test_config();
        // `TEST_LOG=debug cargo test ...` shows the server's logs.
        if let Ok(level) = std::env::var("TEST_LOG") {
            config.log.level = level;
            // The writer lives as long as the test process.
            std::mem::forget(pharmacy::telemetry::init_logging(&config.log));
        }
        config.database.url = Some(url.clone());
        tune(&mut config);
        let server_config = config.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let pool = db::pool(&url, &server_config.database).expect("pool");
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
                let running = app::start(server_config, pool, listener).expect("start");
                tx.send((running.port, running.server.handle()))
                    .expect("send");
                let _ = running.server.await;
            })
        });
        let (port, handle) = rx.recv().expect("server started");
        let pool = db::pool(
            config.database.url.as_deref().expect("url"),
            &config.database,
        )
        .expect("pool");
        let org_id = {
            let client = pool.get().await.expect("conn");
            pharmacy::seed::ensure_organisation(&client, "Test Chain")
                .await
                .expect("org")
        };
        TestApp {
            base: format!("http://127.0.0.1:{port}/api/v1"),
            root: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            pool,
            config,
            org_id,
            db_name,
            handle,
        }
    }

    /// Creates a branch directly in the database.
    pub async fn branch(&self, code: &str) -> Uuid {
        let client = self.pool.get().await.expect("conn");
        let fields = branches::BranchFields {
            code: Some(code.to_owned()),
            name: Some(format!("Branch {code}")),
            currency_code: Some("UGX".to_owned()),
            ..Default::default()
        };
        branches::insert(&client, self.org_id, fields)
            .await
            .expect("branch")
            .id
    }

    /// Creates a user with `PASSWORD` directly in the database.
    pub async fn user(&self, branch_id: Uuid, role: Role) -> users::User {
        static HASH: OnceLock<String> = OnceLock::new();
        let hash = HASH
            .get_or_init(|| pharmacy::auth::passwords::hash(PASSWORD).expect("hash"))
            .clone();
        let client = self.pool.get().await.expect("conn");
        let email = format!(
            "{}.{}@test.pharmacy",
            role.as_str(),
            Uuid::now_v7().simple()
        );
        users::insert(
            &client,
            users::NewUser {
                org_id: self.org_id,
                branch_id,
                email,
                password_hash: hash,
                full_name: format!("Test {}", role.as_str()),
                phone: String::new(),
                role,
            },
        )
        .await
        .expect("user")
    }

    /// Signs in and returns the whole login response.
    pub async fn login(&self, email: &str, password: &str) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            "/auth/login",
            None,
            Some(json!({"email": email, "password": password})),
        )
        .await
    }

    /// A user of `role` on `branch_id`, signed in: (user, access token).
    pub async fn signed_in(&self, branch_id: Uuid, role: Role) -> (users::User, String) {
        let user = self.user(branch_id, role).await;
        let (status, body) = self.login(&user.email, PASSWORD).await;
        assert_eq!(status, StatusCode::OK, "login failed: {body}");
        let token = body["access_token"].as_str().expect("token").to_owned();
        (user, token)
    }

    /// Sends a request to `/api/v1{path}`; returns the status and JSON body
    /// (`Value::Null` for an empty or non-JSON body).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }
}

impl TestApp {
    /// Creates a supplier directly in the database.
    pub async fn supplier(&self, name: &str) -> Uuid {
        let client = self.pool.get().await.expect("conn");
        let id = Uuid::now_v7();
        client
            .execute(
                "INSERT INTO suppliers (id, name) VALUES ($1, $2)",
                &[&id, &name],
            )
            .await
            .expect("supplier");
        id
    }

    /// `POST /medicines` with `body`; panics unless 201. Returns the medicine.
    pub async fn medicine(&self, token: &str, body: Value) -> Value {
        let (status, m) = self.post("/medicines", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "create medicine: {m}");
        m
    }

    /// Receives `qty` units of a medicine at a branch through `POST /purchases`
    /// (token of an admin or pharmacist); returns the batch.
    pub async fn receive(
        &self,
        token: &str,
        medicine_id: &Value,
        branch_id: Uuid,
        qty: i64,
        expiry: &str,
    ) -> Value {
        let supplier = self.supplier("Test Supplier").await;
        let body = json!({
            "supplier_id": supplier, "medicine_id": medicine_id, "branch_id": branch_id,
            "batch_number": format!("B-{}", Uuid::now_v7().simple()), "expiry_date": expiry,
            "quantity": qty, "unit_cost": "100.00",
        });
        let (status, b) = self.post("/purchases", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "purchase: {b}");
        b
    }

    /// Panics when a stock, invoice-counter or balance invariant is broken.
    pub async fn assert_invariants(&self) {
        let client = self.pool.get().await.expect("conn");
        let broken = domain::stock::invariant_violations(&client)
            .await
            .expect("invariant query");
        assert!(broken.is_empty(), "invariants broken: {broken:#?}");
    }
}

impl TestApp {
    /// Stops the server and closes the pool, keeping the database (until
    /// the app is dropped): nothing is connected to it afterwards.
    pub fn stop_server(&self) {
        let handle = self.handle.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(handle.stop(false));
        })
        .join();
        self.pool.close();
    }

    pub fn db_name(&self) -> &str {
        &self.db_name
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(handle.stop(false));
        })
        .join();
        self.pool.close();
        drop_database(&self.db_name);
    }
}

/// Asserts a problem body: status, `application/problem+json` shape, detail.
pub fn assert_problem(status: StatusCode, body: &Value, expected: StatusCode) {
    assert_eq!(status, expected, "unexpected status; body: {body}");
    assert_eq!(
        body["status"],
        expected.as_u16(),
        "problem status member: {body}"
    );
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "problem detail: {body}"
    );
    assert!(
        body["title"].is_string() && body["type"].is_string(),
        "problem shape: {body}"
    );
}

// Reliability and fault tests: more server processes on one
// database, and an app on a database of another cluster.

/// Another server process on a running app's database; stopped on drop.
pub struct OtherProcess {
    /// `http://127.0.0.1:<port>/api/v1`
    pub base: String,
    handle: actix_web::dev::ServerHandle,
}

impl TestApp {
    /// Starts a second, independent server (own actors, own pool) on this
    /// app's database, as a second process would be.
    pub fn second_process(&self) -> OtherProcess {
        let config = self.config.clone();
        let url = config.database.url.clone().expect("url");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let pool = db::pool(&url, &config.database).expect("pool");
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
                let running = app::start(config, pool, listener).expect("start");
                tx.send((running.port, running.server.handle()))
                    .expect("send");
                let _ = running.server.await;
            })
        });
        let (port, handle) = rx.recv().expect("second server started");
        OtherProcess {
            base: format!("http://127.0.0.1:{port}/api/v1"),
            handle,
        }
    }

    /// The app on an existing, migrated database at `url` (for example on a
    /// cluster a test stops and starts itself). The database is not dropped.
    pub async fn spawn_on(url: &str, tune: impl FnOnce(&mut Config)) -> TestApp {
        let mut config = test_config();
        if let Ok(level) = std::env::var("TEST_LOG") {
            config.log.level = level;
            // The writer lives as long as the test process.
            std::mem::forget(pharmacy::telemetry::init_logging(&config.log));
        }
        config.database.url = Some(url.to_owned());
        tune(&mut config);
        let server_config = config.clone();
        let server_url = url.to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            actix_web::rt::System::new().block_on(async move {
                let pool = db::pool(&server_url, &server_config.database).expect("pool");
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
                let running = app::start(server_config, pool, listener).expect("start");
                tx.send((running.port, running.server.handle()))
                    .expect("send");
                let _ = running.server.await;
            })
        });
        let (port, handle) = rx.recv().expect("server started");
        let pool = db::pool(url, &config.database).expect("pool");
        let org_id = {
            let client = pool.get().await.expect("conn");
            pharmacy::seed::ensure_organisation(&client, "Test Chain")
                .await
                .expect("org")
        };
        TestApp {
            base: format!("http://127.0.0.1:{port}/api/v1"),
            root: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            pool,
            config,
            org_id,
            // Not a database of the shared test cluster: nothing to drop there.
            db_name: format!("not_on_the_test_cluster_{}", Uuid::now_v7().simple()),
            handle,
        }
    }
}

impl Drop for OtherProcess {
    fn drop(&mut self) {
        let handle = self.handle.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(handle.stop(false));
        })
        .join();
    }
}

impl TestApp {
    /// `body` posted to `path` `n` times at once, alternately through this
    /// process and `other`: the answers, in the order sent.
    pub async fn post_through_both(
        &self,
        other: &OtherProcess,
        n: usize,
        path: &str,
        token: &str,
        body: &Value,
    ) -> Vec<(StatusCode, Value)> {
        let bases = [self.base.clone(), other.base.clone()];
        let tries = (0..n).map(|i| {
            let req = self
                .http
                .post(format!("{}{path}", bases[i % 2]))
                .bearer_auth(token)
                .json(body);
            async move {
                let res = req.send().await.expect("request");
                let status = res.status();
                let text = res.text().await.expect("body");
                (status, serde_json::from_str(&text).unwrap_or(Value::Null))
            }
        });
        futures_util::future::join_all(tries).await
    }
}

/// One client mutation id sent many times at once: one answer made it
/// (201), every other replays it (200, the same body). That one answer.
pub fn assert_one_effect(answers: &[(StatusCode, Value)]) -> Value {
    let made: Vec<&Value> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(made.len(), 1, "{answers:?}");
    for (status, body) in answers {
        if *status != StatusCode::CREATED {
            assert_eq!(*status, StatusCode::OK, "{body}");
            assert_eq!(body, made[0]);
        }
    }
    made[0].clone()
}

/// The same id sent at once for a different request: each refused with
/// the one mismatch conflict, naming what it was used for.
pub fn assert_all_mismatched(answers: &[(StatusCode, Value)], what: &str) {
    for (status, body) in answers {
        assert_problem(*status, body, StatusCode::CONFLICT);
        assert_eq!(
            body["detail"],
            format!("This client_mutation_id was already used for a different {what}."),
            "{body}"
        );
    }
}
