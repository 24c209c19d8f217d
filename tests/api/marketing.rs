use std::net::TcpListener;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::{assert_problem, TestApp};

const PATH: &str = "/marketing/contact";

fn enquiry(email: &str) -> Value {
    json!({"name": "Grace", "email": email, "phone": "+256700000002", "topic": "Franchise",
           "message": "Please call me about opening a branch."})
}

/// Sends an enquiry to the server at `base`, optionally as from a proxied
/// client; returns the status, the Retry-After header and the body.
async fn send(
    app: &TestApp,
    base: &str,
    body: Value,
    forwarded_for: Option<&str>,
) -> (StatusCode, Option<String>, Value) {
    let mut req = app.http.post(format!("{base}{PATH}")).json(&body);
    if let Some(ip) = forwarded_for {
        req = req.header("X-Forwarded-For", ip);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let retry = res
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = serde_json::from_str(&res.text().await.unwrap()).unwrap_or(Value::Null);
    (status, retry, body)
}

/// The limits count in fixed windows aligned to the clock: start a burst
/// well inside one, so it cannot straddle two.
async fn inside_one_window(window_secs: i64) {
    let now = chrono::Utc::now();
    let into = now.timestamp().rem_euclid(window_secs);
    if into > window_secs - 8 {
        let left = (window_secs - into) as u64;
        tokio::time::sleep(Duration::from_millis(left * 1000 + 200)).await;
    }
}

async fn stored(app: &TestApp) -> i64 {
    let client = app.pool.get().await.unwrap();
    client
        .query_one("SELECT count(*) FROM marketing_enquiries", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_public_enquiry_is_stored_and_answers_ok() {
    let app = TestApp::spawn().await;
    let (status, _, body) = send(&app, &app.base, enquiry("  Grace@Example.org "), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body, json!({"ok": true}));
    let minimal = json!({"name": "G", "email": "g@example.org", "message": "Hi"});
    let (status, _, _) = send(&app, &app.base, minimal, None).await;
    assert_eq!(status, StatusCode::CREATED);
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT name, email, phone, topic, message, client_address FROM marketing_enquiries
             ORDER BY created_at LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "Grace");
    assert_eq!(row.get::<_, String>(1), "Grace@Example.org");
    assert_eq!(row.get::<_, String>(2), "+256700000002");
    assert_eq!(row.get::<_, String>(3), "Franchise");
    assert_eq!(
        row.get::<_, String>(4),
        "Please call me about opening a branch."
    );
    assert_eq!(row.get::<_, String>(5), "127.0.0.1");
}

#[tokio::test]
async fn missing_or_malformed_fields_are_400_naming_the_field() {
    let app = TestApp::spawn().await;
    let good = enquiry("grace@example.org");
    let mut cases: Vec<(Value, &str)> = Vec::new();
    for (field, value) in [
        ("name", Value::Null),
        ("name", json!("  ")),
        ("message", Value::Null),
        ("message", json!("")),
        ("message", json!("x".repeat(5001))),
        ("email", Value::Null),
        ("email", json!("")),
        ("phone", json!(12345)),
        ("topic", json!("t".repeat(101))),
    ] {
        let mut b = good.clone();
        if value.is_null() {
            b.as_object_mut().unwrap().remove(field);
        } else {
            b[field] = value;
        }
        cases.push((b, field));
    }
    for bad in [
        "grace",
        "grace@",
        "@example.org",
        "grace@example",
        "grace@@example.org",
        "gr@ce@example.org",
        "grace smith@example.org",
        "grace@exa mple.org",
        "grace@.org",
        "grace@example.",
        "grace@example..org",
    ] {
        let mut b = good.clone();
        b["email"] = json!(bad);
        cases.push((b, "email"));
    }
    for (body, field) in cases {
        let (status, _, problem) = send(&app, &app.base, body.clone(), None).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{body}");
    }
    assert_eq!(stored(&app).await, 0);
}

#[tokio::test]
async fn the_sixth_enquiry_in_a_minute_from_one_email_is_429() {
    let app = TestApp::spawn().await;
    inside_one_window(app.config.marketing.window_secs).await;
    // Refused (400) messages do not count towards the limit.
    for _ in 0..3 {
        let mut b = enquiry("grace@example.org");
        b["message"] = json!(" ");
        let (status, _, _) = send(&app, &app.base, b, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
    for email in [
        "grace@example.org",
        "GRACE@example.org",
        "grace@EXAMPLE.org",
        "grace@example.org",
        "Grace@Example.Org",
    ] {
        let (status, _, body) = send(&app, &app.base, enquiry(email), None).await;
        assert_eq!(status, StatusCode::CREATED, "{email}: {body}");
    }
    let (status, retry, problem) = send(&app, &app.base, enquiry("grace@example.org"), None).await;
    assert_problem(status, &problem, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = retry.expect("Retry-After header").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Another address still passes, and the refused one was not stored.
    let (status, _, _) = send(&app, &app.base, enquiry("other@example.org"), None).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(stored(&app).await, 6);
}

#[tokio::test]
async fn one_client_address_is_limited_across_emails() {
    let app = TestApp::spawn_with(|c| c.marketing.enquiries_per_address = 3).await;
    inside_one_window(app.config.marketing.window_secs).await;
    for n in 0..3 {
        let (status, _, _) =
            send(&app, &app.base, enquiry(&format!("p{n}@example.org")), None).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, retry, problem) = send(&app, &app.base, enquiry("p9@example.org"), None).await;
    assert_problem(status, &problem, StatusCode::TOO_MANY_REQUESTS);
    assert!(retry.is_some());
    // X-Forwarded-For is ignored unless the proxy is trusted.
    let (status, _, _) = send(&app, &app.base, enquiry("p8@example.org"), Some("10.0.0.1")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stored(&app).await, 3);
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_is_counted_apart() {
    let app = TestApp::spawn_with(|c| {
        c.http.trust_forwarded_for = true;
        c.marketing.enquiries_per_address = 2;
    })
    .await;
    inside_one_window(app.config.marketing.window_secs).await;
    for n in 0..2 {
        let (status, _, _) = send(
            &app,
            &app.base,
            enquiry(&format!("a{n}@example.org")),
            Some("10.0.0.1"),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, _, _) = send(&app, &app.base, enquiry("a2@example.org"), Some("10.0.0.1")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let (status, _, _) = send(&app, &app.base, enquiry("b0@example.org"), Some("10.0.0.2")).await;
    assert_eq!(status, StatusCode::CREATED);
}

/// A second server process on the same database.
fn second_server(app: &TestApp) -> (String, actix_web::dev::ServerHandle) {
    let config = app.config.clone();
    let url = config.database.url.clone().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        actix_web::rt::System::new().block_on(async move {
            let pool = pharmacy::db::pool(&url, &config.database).unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let running = pharmacy::app::start(config, pool, listener).unwrap();
            tx.send((running.port, running.server.handle())).unwrap();
            let _ = running.server.await;
        })
    });
    let (port, handle) = rx.recv().unwrap();
    (format!("http://127.0.0.1:{port}/api/v1"), handle)
}

#[tokio::test]
async fn the_email_limit_holds_across_two_server_processes() {
    let app = TestApp::spawn().await;
    let (other, handle) = second_server(&app);
    inside_one_window(app.config.marketing.window_secs).await;
    // Eight at once, spread over both servers: exactly five pass.
    let sends = (0..8).map(|n| {
        let base = if n % 2 == 0 { &app.base } else { &other };
        send(&app, base, enquiry("grace@example.org"), None)
    });
    let mut statuses: Vec<StatusCode> = futures_util::future::join_all(sends)
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    statuses.sort();
    assert_eq!(statuses[..5], [StatusCode::CREATED; 5]);
    assert_eq!(statuses[5..], [StatusCode::TOO_MANY_REQUESTS; 3]);
    let (status, _, _) = send(&app, &other, enquiry("grace@example.org"), None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stored(&app).await, 5);
    handle.stop(false).await;
}

#[tokio::test]
async fn the_openapi_document_lists_the_front_desk_routes() {
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
        ("/api/v1/prescriptions", "get"),
        ("/api/v1/prescriptions", "post"),
        ("/api/v1/prescriptions/{id}", "get"),
        ("/api/v1/prescriptions/{id}", "delete"),
        ("/api/v1/prescriptions/{id}/dispense", "post"),
        ("/api/v1/prescriptions/{id}/cancel", "post"),
        ("/api/v1/dispensing/will-call", "get"),
        ("/api/v1/dispensing/will-call", "post"),
        ("/api/v1/dispensing/will-call/{id}/pickup", "post"),
        ("/api/v1/dispensing/will-call/{id}/cancel", "post"),
        ("/api/v1/approvals", "get"),
        ("/api/v1/approvals", "post"),
        ("/api/v1/approvals/{id}/approve", "post"),
        ("/api/v1/approvals/{id}/reject", "post"),
        ("/api/v1/marketing/contact", "post"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "missing {method} {path}"
        );
    }
    // The enquiry form is the one public route here.
    assert!(doc["paths"][PATH_IN_DOC]["post"].get("security").is_none());
    assert!(doc["paths"]["/api/v1/approvals"]["post"]["security"].is_array());
    let item = &doc["components"]["schemas"]["PrescriptionItem"]["properties"];
    assert_eq!(item["selling_price"]["type"], "string");
    assert_eq!(item["quantity"]["type"], "integer");
}

const PATH_IN_DOC: &str = "/api/v1/marketing/contact";
