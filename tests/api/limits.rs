//! Resource limits (OWASP API4): body size, push size, page-size caps, array
//! caps, login rate limits, statement and pool-wait timeouts. Each limit
//! answers with a problem body, never a hang, a 500 or a plain-text error.
//!
//! The public enquiry limits (per email and per client address, across two
//! server processes) are tested in `marketing.rs`:
//! `the_sixth_enquiry_in_a_minute_from_one_email_is_429`,
//! `one_client_address_is_limited_across_emails` and
//! `the_email_limit_holds_across_two_server_processes`.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp, PASSWORD};

/// Sends `body` as raw JSON text; returns status, Retry-After and the body.
async fn send_raw(
    app: &TestApp,
    path: &str,
    token: &str,
    body: String,
) -> (StatusCode, Option<String>, Value) {
    let res = app
        .http
        .post(format!("{}{path}", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = res.text().await.unwrap();
    (
        status,
        retry,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// A customer body padded to exactly `size` bytes with an unknown field.
fn padded_customer(size: usize) -> String {
    let head = r#"{"name":"Padded","padding":""#;
    let tail = r#""}"#;
    let fill = size - head.len() - tail.len();
    format!("{head}{}{tail}", "x".repeat(fill))
}

#[tokio::test]
async fn a_body_over_the_default_limit_is_413_with_a_problem_body() {
    let app = TestApp::spawn().await;
    assert_eq!(
        app.config.http.body_limit_bytes,
        1 << 20,
        "the default is 1 MiB"
    );
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    // One byte over: refused before the body is read.
    let (status, _, body) =
        send_raw(&app, "/customers", &admin, padded_customer((1 << 20) + 1)).await;
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        body["detail"].as_str().unwrap().contains("1048576"),
        "the detail names the limit: {body}"
    );
    // Exactly at the limit: read and handled (the unknown field is ignored).
    let (status, _, body) = send_raw(&app, "/customers", &admin, padded_customer(1 << 20)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Every body-taking route shares the extractor; a few more.
    for path in ["/sales", "/medicines", "/auth/login", "/marketing/contact"] {
        let (status, _, body) = send_raw(&app, path, &admin, padded_customer((1 << 20) + 10)).await;
        assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
    }
}

/// A chunked upload (no Content-Length) is cut off at the limit too: written
/// over a raw socket, since the client library always sends a length.
#[tokio::test]
async fn a_chunked_body_over_the_limit_is_413_without_content_length() {
    let app = TestApp::spawn_with(|c| c.http.body_limit_bytes = 64 * 1024).await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let addr = app.root.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/customers HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {admin}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = "x".repeat(16 * 1024);
    let mut sent = 0;
    let opening = r#"{"name":"Chunked","padding":""#;
    let _ = stream
        .write_all(format!("{:x}\r\n{opening}\r\n", opening.len()).as_bytes())
        .await;
    // 256 KiB in 16 KiB chunks; the server may stop reading early.
    while sent < 256 * 1024 {
        if stream
            .write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
            .await
            .is_err()
        {
            break;
        }
        sent += chunk.len();
    }
    let _ = stream.write_all(b"2\r\n\"}\r\n0\r\n\r\n").await;
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await;
    let text = String::from_utf8_lossy(&response);
    assert!(
        text.starts_with("HTTP/1.1 413"),
        "a chunked body over the limit: {}",
        text.lines().next().unwrap_or("")
    );
    assert!(text.contains("application/problem+json"), "{text}");
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM customers WHERE name = 'Chunked'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "nothing was stored");
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

/// A push body of exactly `size` bytes: no changes, padded with an unknown field.
fn padded_push(device: &str, size: usize) -> String {
    let head = format!(r#"{{"device_id":"{device}","changes":[],"padding":""#);
    let tail = r#""}"#;
    format!("{head}{}{tail}", "x".repeat(size - head.len() - tail.len()))
}

#[tokio::test]
async fn the_push_route_has_its_own_larger_body_limit() {
    let app = TestApp::spawn_with(|c| {
        c.http.body_limit_bytes = 16 * 1024;
        c.http.push_body_limit_bytes = 64 * 1024;
    })
    .await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let till = device(&app, &admin, branch).await;
    // 32 KiB: over the general limit, under the push limit.
    let (status, _, body) =
        send_raw(&app, "/sync/push", &admin, padded_push(&till, 32 * 1024)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send_raw(&app, "/customers", &admin, padded_customer(32 * 1024)).await;
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
    // At and over the push limit.
    let (status, _, body) =
        send_raw(&app, "/sync/push", &admin, padded_push(&till, 64 * 1024)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send_raw(
        &app,
        "/sync/push",
        &admin,
        padded_push(&till, 64 * 1024 + 1),
    )
    .await;
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["detail"].as_str().unwrap().contains("65536"), "{body}");
}

#[tokio::test]
async fn the_default_push_limit_takes_more_than_a_mebibyte_and_stops_at_eight() {
    let app = TestApp::spawn().await;
    assert_eq!(app.config.http.push_body_limit_bytes, 8 << 20);
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let till = device(&app, &admin, branch).await;
    let (status, _, body) = send_raw(&app, "/sync/push", &admin, padded_push(&till, 2 << 20)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, body) = send_raw(
        &app,
        "/sync/push",
        &admin,
        padded_push(&till, (8 << 20) + 1),
    )
    .await;
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
}

fn unsupported(i: usize) -> Value {
    json!({"client_mutation_id": format!("m-{i}"), "entity": "nothing", "op": "create", "payload": {}})
}

#[tokio::test]
async fn a_push_of_more_than_500_changes_is_413_naming_the_limit_and_applies_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let till = device(&app, &admin, branch).await;
    let over: Vec<Value> = (0..501).map(unsupported).collect();
    let (status, body) = app
        .post(
            "/sync/push",
            &admin,
            json!({"device_id": till, "changes": over}),
        )
        .await;
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("500") && detail.contains("501"), "{detail}");
    let client = app.pool.get().await.unwrap();
    let stored: i64 = client
        .query_one("SELECT count(*) FROM push_mutations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "a refused batch applies nothing");
    // Exactly 500 is a batch like any other.
    let full: Vec<Value> = (0..500).map(unsupported).collect();
    let (status, body) = app
        .post(
            "/sync/push",
            &admin,
            json!({"device_id": till, "changes": full}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rejected"].as_array().unwrap().len(), 500);
}

#[tokio::test]
async fn arrays_in_bodies_are_capped() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let line = json!({"medicine_id": Uuid::now_v7(), "quantity": 1});
    let count_line = json!({"medicine_id": Uuid::now_v7(), "counted_quantity": 1});
    let rx_line = json!({"medicine_id": Uuid::now_v7(), "quantity": 1});
    let cases = [
        (
            "/sales",
            json!({"items": vec![line; 201], "payment_method": "cash"}),
            "200",
        ),
        (
            "/stockcount/submit",
            json!({"items": vec![count_line; 2001]}),
            "2000",
        ),
        (
            "/prescriptions",
            json!({"patient_name": "P", "prescriber_name": "Dr", "items": vec![rx_line; 101]}),
            "100",
        ),
    ];
    for (path, body, limit) in cases {
        let (status, answer) = app.post(path, &admin, body).await;
        assert_problem(status, &answer, StatusCode::BAD_REQUEST);
        assert!(
            answer["detail"].as_str().unwrap().contains(limit),
            "{path} names its cap {limit}: {answer}"
        );
    }
    app.assert_invariants().await;
}

/// Every paged list: the default, the cap of 200 (larger sizes are capped,
/// as the conventions say), and a 400 naming the parameter for nonsense.
#[tokio::test]
async fn page_sizes_are_capped_at_200_and_bad_paging_is_400() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, c) = app
        .post("/customers", &admin, json!({"name": "Ledger"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let ledger = format!("/customers/{}/ledger", c["id"].as_str().unwrap());
    // (path, default page size)
    let lists: Vec<(String, i64)> = vec![
        ("/customers".into(), 20),
        (ledger, 20),
        ("/suppliers".into(), 20),
        ("/medicines".into(), 20),
        ("/users".into(), 20),
        ("/sales".into(), 20),
        ("/coupons".into(), 20),
        ("/printing/print-jobs".into(), 20),
        ("/prescriptions".into(), 20),
        ("/dispensing/will-call".into(), 20),
        ("/approvals".into(), 20),
        ("/audit-log".into(), 20),
        ("/compliance/devices".into(), 50),
        ("/compliance/prescription-book".into(), 50),
        ("/compliance/classified-drugs-book".into(), 50),
        ("/sync/conflicts".into(), 50),
    ];
    for (path, default) in &lists {
        let (status, body) = app.get(path, &admin).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(body["page_size"], *default, "{path} default page size");
        assert_eq!(body["page"], 1, "{path}");
        for size in ["201", "1000", "2147483647"] {
            let (status, body) = app.get(&format!("{path}?page_size={size}"), &admin).await;
            assert_eq!(status, StatusCode::OK, "{path}?page_size={size}: {body}");
            assert_eq!(body["page_size"], 200, "{path} caps page_size {size}");
        }
        for (query, field) in [
            ("page_size=0", "page_size"),
            ("page_size=-1", "page_size"),
            ("page_size=abc", "page_size"),
            ("page_size=99999999999999999999", "page_size"),
            ("page=0", "page"),
            ("page=-5", "page"),
            ("page=1.5", "page"),
            ("page=10000001", "page"),
        ] {
            let (status, body) = app.get(&format!("{path}?{query}"), &admin).await;
            assert_problem(status, &body, StatusCode::BAD_REQUEST);
            assert_eq!(body["field"], field, "{path}?{query}: {body}");
        }
    }
    // The change feed's own cap: `limit` 1..5000.
    for bad in ["0", "5001", "x"] {
        let (status, body) = app.get(&format!("/sync/changes?limit={bad}"), &admin).await;
        assert_problem(status, &body, StatusCode::BAD_REQUEST);
        assert_eq!(body["field"], "limit");
    }
}

/// Fixed windows aligned to the clock: start a burst well inside one.
async fn inside_one_window(window_secs: i64) {
    let into = chrono::Utc::now().timestamp().rem_euclid(window_secs);
    if into > window_secs - 10 {
        let left = (window_secs - into) as u64;
        tokio::time::sleep(Duration::from_millis(left * 1000 + 200)).await;
    }
}

/// Per email is in `auth.rs` (`failed_logins_are_rate_limited_per_email`);
/// here the per-address limit, which stops spraying many emails.
#[tokio::test]
async fn failed_logins_are_rate_limited_per_client_address() {
    let app = TestApp::spawn_with(|c| {
        c.auth.login_failures_per_address = 4;
        c.auth.login_window_secs = 60;
    })
    .await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    inside_one_window(60).await;
    // A successful login does not count.
    assert_eq!(app.login(&user.email, PASSWORD).await.0, StatusCode::OK);
    for i in 0..4 {
        let (status, body) = app
            .login(&format!("spray{i}@nowhere.test"), "guess-guess")
            .await;
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }
    // The fifth attempt from this address is refused, even with the right
    // password of a real user, and says when to come back.
    let res = app
        .http
        .post(format!("{}/auth/login", app.base))
        .json(&json!({"email": user.email, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    let body: Value = res.json().await.unwrap();
    assert_problem(
        StatusCode::TOO_MANY_REQUESTS,
        &body,
        StatusCode::TOO_MANY_REQUESTS,
    );
}

/// Holds `FOR UPDATE` on one row from a direct connection until dropped
/// (the transaction rolls back when the connection closes).
pub struct RowLock {
    client: tokio_postgres::Client,
}

impl RowLock {
    pub async fn take(app: &TestApp, sql: &str, id: Uuid) -> RowLock {
        let url = app.config.database.url.clone().unwrap();
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client.batch_execute("BEGIN").await.unwrap();
        let n = client.execute(sql, &[&id]).await.unwrap();
        assert_eq!(n, 1, "the lock statement found its row");
        RowLock { client }
    }

    pub async fn release(self) {
        self.client.batch_execute("ROLLBACK").await.unwrap();
    }
}

#[tokio::test]
async fn a_statement_stuck_on_a_lock_becomes_a_503_problem_not_a_hang() {
    let app = TestApp::spawn_with(|c| c.database.statement_timeout_ms = 400).await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, locked) = app
        .post("/customers", &admin, json!({"name": "Locked"}))
        .await;
    let (_, free) = app
        .post("/customers", &admin, json!({"name": "Free"}))
        .await;
    let locked_id: Uuid = locked["id"].as_str().unwrap().parse().unwrap();
    let lock = RowLock::take(
        &app,
        "SELECT 1 FROM customers WHERE id = $1 FOR UPDATE",
        locked_id,
    )
    .await;

    let started = Instant::now();
    let res = app
        .http
        .put(format!("{}/customers/{locked_id}", app.base))
        .bearer_auth(&admin)
        .json(&json!({"name": "Renamed"}))
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().get("retry-after").is_some());
    let body: Value = res.json().await.unwrap();
    assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "answered after {elapsed:?}, not held until the lock goes"
    );
    // Other rows are unaffected while the lock is held.
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/customers/{}", free["id"].as_str().unwrap()),
            Some(&admin),
            Some(json!({"name": "Free renamed"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Once the lock goes, the same request succeeds; the refused one wrote nothing.
    let (_, before) = app.get(&format!("/customers/{locked_id}"), &admin).await;
    assert_eq!(before["name"], "Locked");
    lock.release().await;
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/customers/{locked_id}"),
            Some(&admin),
            Some(json!({"name": "Renamed"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn waiting_too_long_for_a_pool_connection_is_a_503_problem() {
    let app = TestApp::spawn_with(|c| {
        c.database.pool_size = 1;
        c.database.pool_wait_timeout_ms = 300;
        c.database.statement_timeout_ms = 4000;
    })
    .await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (_, customer) = app
        .post("/customers", &admin, json!({"name": "Held"}))
        .await;
    let id: Uuid = customer["id"].as_str().unwrap().parse().unwrap();
    let lock = RowLock::take(&app, "SELECT 1 FROM customers WHERE id = $1 FOR UPDATE", id).await;

    // This request takes the only connection and waits on the lock.
    let http = app.http.clone();
    let url = format!("{}/customers/{id}", app.base);
    let token = admin.clone();
    let holder = tokio::spawn(async move {
        http.put(url)
            .bearer_auth(token)
            .json(&json!({"name": "Renamed"}))
            .send()
            .await
            .unwrap()
            .status()
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Everyone else waits for the pool at most pool_wait_timeout_ms.
    let started = Instant::now();
    let res = app
        .http
        .get(format!("{}/auth/me", app.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().get("retry-after").is_some());
    let body: Value = res.json().await.unwrap();
    assert_problem(
        StatusCode::SERVICE_UNAVAILABLE,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
    );
    assert!(elapsed < Duration::from_secs(3), "waited {elapsed:?}");
    // Released in time, the holder finishes normally and the pool recovers.
    lock.release().await;
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    let (status, _) = app.get("/auth/me", &admin).await;
    assert_eq!(status, StatusCode::OK);
}
