//! Controls on what clients may write: who may give credit, how long text
//! may be (in validation and in the database), what a sync conflict keeps,
//! and how long a client may take to send a request.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp};

/// A branch with an admin, a branch manager, a pharmacist, a cashier and a till.
struct Desk {
    app: TestApp,
    admin: String,
    manager: String,
    pharmacist: String,
    cashier: String,
    device: String,
}

impl Desk {
    async fn open() -> Desk {
        let app = TestApp::spawn().await;
        let branch = app.branch("KLA").await;
        let (_, admin) = app.signed_in(branch, Role::Admin).await;
        let (_, manager) = app.signed_in(branch, Role::BranchManager).await;
        let (_, pharmacist) = app.signed_in(branch, Role::Pharmacist).await;
        let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
        let (status, d) = app
            .post(
                "/devices",
                &admin,
                json!({"name": "Till", "branch_id": branch}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "device: {d}");
        let device = d["id"].as_str().unwrap().to_owned();
        Desk {
            app,
            admin,
            manager,
            pharmacist,
            cashier,
            device,
        }
    }

    async fn push(&self, token: &str, changes: Vec<Value>) -> Value {
        let body = json!({"device_id": self.device, "changes": changes});
        let (status, answer) = self.app.post("/sync/push", token, body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }

    async fn customer(&self, token: &str, body: Value) -> Value {
        let (status, c) = self.app.post("/customers", token, body).await;
        assert_eq!(status, StatusCode::CREATED, "{c}");
        c
    }

    async fn put(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        self.app
            .call(Method::PUT, path, Some(token), Some(body))
            .await
    }

    async fn count(&self, sql: &str) -> i64 {
        let client = self.app.pool.get().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }
}

fn customer_change(cmid: &str, op: &str, payload: Value) -> Value {
    json!({"client_mutation_id": cmid, "entity": "customer", "op": op, "payload": payload})
}

/// The single rejection of a push answer: (code, field).
fn rejection(answer: &Value) -> (String, Value) {
    let rejected = answer["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1, "{answer}");
    assert_eq!(answer["accepted"], json!([]), "{answer}");
    (
        rejected[0]["code"].as_str().unwrap().to_owned(),
        rejected[0]["field"].clone(),
    )
}

// ---------------------------------------------------------------- credit

#[tokio::test]
async fn only_admins_and_branch_managers_give_credit_through_rest() {
    let d = Desk::open().await;
    // A cashier (or a pharmacist) may not create a customer with credit.
    for token in [&d.cashier, &d.pharmacist] {
        for body in [
            json!({"name": "Big Spender", "credit_limit": 99_999_999}),
            json!({"name": "Big Spender", "is_credit_allowed": true}),
            json!({"name": "Big Spender", "is_credit_allowed": 1, "credit_limit": "100.00"}),
        ] {
            let (status, problem) = d.app.post("/customers", token, body).await;
            assert_problem(status, &problem, StatusCode::FORBIDDEN);
        }
    }
    assert_eq!(d.count("SELECT count(*) FROM customers").await, 0);
    // Without credit they still may.
    let plain = d
        .customer(
            &d.cashier,
            json!({"name": "Plain", "credit_limit": 0, "is_credit_allowed": false}),
        )
        .await;
    let path = format!("/customers/{}", plain["id"].as_str().unwrap());
    // Nor raise it on an existing customer: nothing changes.
    for body in [
        json!({"credit_limit": 99_999_999}),
        json!({"is_credit_allowed": true}),
        json!({"phone": "0700000001", "credit_limit": 1}),
    ] {
        let (status, problem) = d.put(&d.cashier, &path, body).await;
        assert_problem(status, &problem, StatusCode::FORBIDDEN);
    }
    let (_, now) = d.app.get(&path, &d.admin).await;
    assert_eq!(now["credit_limit"], "0.00");
    assert_eq!(now["is_credit_allowed"], false);
    assert_eq!(now["phone"], "");
    // A branch manager may, creating or updating; so may an admin.
    let (status, raised) = d
        .put(
            &d.manager,
            &path,
            json!({"credit_limit": 50_000, "is_credit_allowed": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{raised}");
    assert_eq!(raised["credit_limit"], "50000.00");
    d.customer(
        &d.manager,
        json!({"name": "Trusted", "credit_limit": 10_000, "is_credit_allowed": true}),
    )
    .await;
    d.customer(
        &d.admin,
        json!({"name": "Trusted too", "credit_limit": 10_000, "is_credit_allowed": true}),
    )
    .await;
    // A cashier may send the current values back (a whole record), lower
    // the limit and stop credit, but not raise it again.
    let (status, same) = d
        .put(
            &d.cashier,
            &path,
            json!({"phone": "0700000002", "credit_limit": 50_000, "is_credit_allowed": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{same}");
    assert_eq!(same["phone"], "0700000002");
    let (status, lowered) = d
        .put(&d.cashier, &path, json!({"credit_limit": 20_000}))
        .await;
    assert_eq!(status, StatusCode::OK, "{lowered}");
    assert_eq!(lowered["credit_limit"], "20000.00");
    let (status, problem) = d
        .put(&d.cashier, &path, json!({"credit_limit": 20_000.01}))
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (status, stopped) = d
        .put(&d.cashier, &path, json!({"is_credit_allowed": false}))
        .await;
    assert_eq!(status, StatusCode::OK, "{stopped}");
    assert_eq!(stopped["is_credit_allowed"], false);
    let (status, problem) = d
        .put(&d.cashier, &path, json!({"is_credit_allowed": true}))
        .await;
    assert_problem(status, &problem, StatusCode::FORBIDDEN);
    let (_, now) = d.app.get(&path, &d.admin).await;
    assert_eq!(now["credit_limit"], "20000.00");
    assert_eq!(now["is_credit_allowed"], false);
}

#[tokio::test]
async fn a_cashier_pushing_credit_is_rejected_as_forbidden() {
    let d = Desk::open().await;
    let id = Uuid::now_v7();
    // Creating a customer with credit.
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "c-1",
                "create",
                json!({"id": id, "name": "Big Spender", "is_credit_allowed": 1,
                       "credit_limit": 99_999_999}),
            )],
        )
        .await;
    assert_eq!(rejection(&answer).0, "forbidden");
    assert_eq!(d.count("SELECT count(*) FROM customers").await, 0);
    // Creating without credit is accepted.
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "c-2",
                "create",
                json!({"id": id, "name": "Big Spender", "is_credit_allowed": 0,
                       "credit_limit": 0}),
            )],
        )
        .await;
    assert_eq!(answer["rejected"], json!([]), "{answer}");
    // Raising it by an update, with or without a base_rev: forbidden.
    let (_, c) = d.app.get(&format!("/customers/{id}"), &d.admin).await;
    let rev = c["rev"].as_i64().unwrap();
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "c-3",
                "update",
                json!({"id": id, "base_rev": rev, "credit_limit": 99_999_999}),
            )],
        )
        .await;
    assert_eq!(rejection(&answer).0, "forbidden");
    // A stale update that raises it is refused too, not kept as a conflict
    // for head office to apply.
    let (s, _) = d
        .put(
            &d.admin,
            &format!("/customers/{id}"),
            json!({"name": "Big Spender Ltd"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "c-4",
                "update",
                json!({"id": id, "base_rev": rev, "name": "Spender",
                       "is_credit_allowed": 1, "credit_limit": 5000}),
            )],
        )
        .await;
    assert_eq!(rejection(&answer).0, "forbidden");
    assert_eq!(d.count("SELECT count(*) FROM sync_conflicts").await, 0);
    let (_, c) = d.app.get(&format!("/customers/{id}"), &d.admin).await;
    assert_eq!(c["credit_limit"], "0.00");
    assert_eq!(c["is_credit_allowed"], false);
    // The same push by an admin applies.
    let answer = d
        .push(
            &d.admin,
            vec![customer_change(
                "a-1",
                "update",
                json!({"id": id, "is_credit_allowed": 1, "credit_limit": 5000}),
            )],
        )
        .await;
    assert_eq!(answer["rejected"], json!([]), "{answer}");
    let (_, c) = d.app.get(&format!("/customers/{id}"), &d.admin).await;
    assert_eq!(c["credit_limit"], "5000.00");
    // A till sending the whole record back unchanged is fine for a cashier.
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "c-5",
                "update",
                json!({"id": id, "phone": "0700000003", "is_credit_allowed": 1,
                       "credit_limit": 5000}),
            )],
        )
        .await;
    assert_eq!(answer["rejected"], json!([]), "{answer}");
}

// ---------------------------------------------------------- text lengths

#[tokio::test]
async fn over_long_text_is_400_naming_the_field_and_stores_nothing() {
    let d = Desk::open().await;
    let cases = [
        (json!({"name": "n".repeat(201)}), "name"),
        (json!({"name": "Ok", "phone": "7".repeat(51)}), "phone"),
        (
            json!({"name": "Ok", "national_id": "C".repeat(51)}),
            "national_id",
        ),
        (json!({"name": "Ok", "notes": "z".repeat(2001)}), "notes"),
        (
            json!({"name": "Ok", "image_url": "u".repeat(1001)}),
            "image_url",
        ),
        // The review's phone: a million characters.
        (
            json!({"name": "Ok", "phone": "7".repeat(1_000_000)}),
            "phone",
        ),
    ];
    for (body, field) in cases {
        let (status, problem) = d.app.post("/customers", &d.cashier, body).await;
        assert_problem(status, &problem, StatusCode::BAD_REQUEST);
        assert_eq!(problem["field"], field, "{problem}");
    }
    // At the limit is fine; characters are counted, not bytes.
    let ok = d
        .customer(
            &d.cashier,
            json!({"name": "é".repeat(200), "phone": "7".repeat(50), "notes": "z".repeat(2000)}),
        )
        .await;
    assert_eq!(d.count("SELECT count(*) FROM customers").await, 1);
    let path = format!("/customers/{}", ok["id"].as_str().unwrap());
    let (status, problem) = d
        .put(&d.cashier, &path, json!({"phone": "7".repeat(51)}))
        .await;
    assert_problem(status, &problem, StatusCode::BAD_REQUEST);
    assert_eq!(problem["field"], "phone");
    // Through push too, as an `invalid` rejection naming the field.
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "long",
                "create",
                json!({"name": "Pushed", "phone": "7".repeat(100_000)}),
            )],
        )
        .await;
    assert_eq!(
        rejection(&answer),
        ("validation_failed".to_owned(), json!("phone"))
    );
    assert_eq!(d.count("SELECT count(*) FROM customers").await, 1);
    // A user's phone (synced to every till of the branch).
    let (status, user) = d
        .app
        .post(
            "/users",
            &d.admin,
            json!({"email": "long.phone@test.pharmacy", "password": "a-long-password",
                   "full_name": "Long Phone", "role": "cashier",
                   "branch_id": d.app.branch("EBB").await, "phone": "7".repeat(1_000_000)}),
        )
        .await;
    assert_problem(status, &user, StatusCode::BAD_REQUEST);
    assert_eq!(user["field"], "phone");
    assert_eq!(
        d.count("SELECT count(*) FROM users WHERE email = 'long.phone@test.pharmacy'")
            .await,
        0
    );
    // Others: a supplier's contact, a medicine's barcode, a branch's address.
    let (status, p) = d
        .app
        .post(
            "/suppliers",
            &d.admin,
            json!({"name": "S", "contact_person": "c".repeat(201)}),
        )
        .await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "contact_person");
    let (status, p) = d
        .app
        .post(
            "/medicines",
            &d.admin,
            json!({"name": "M", "selling_price": 100, "barcode": "6".repeat(101)}),
        )
        .await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "barcode");
    let (status, p) = d
        .app
        .post(
            "/branches",
            &d.admin,
            json!({"code": "JJA", "name": "Jinja", "address": "a".repeat(501)}),
        )
        .await;
    assert_problem(status, &p, StatusCode::BAD_REQUEST);
    assert_eq!(p["field"], "address");
    assert_eq!(
        d.count("SELECT count(*) FROM suppliers").await
            + d.count("SELECT count(*) FROM medicines").await
            + d.count("SELECT count(*) FROM branches WHERE code = 'JJA'")
                .await,
        0
    );
}

#[tokio::test]
async fn the_database_refuses_over_long_text_written_directly() {
    let d = Desk::open().await;
    d.customer(&d.admin, json!({"name": "Direct"})).await;
    let client = d.app.pool.get().await.unwrap();
    for sql in [
        "UPDATE customers SET phone = repeat('7', 51)",
        "UPDATE customers SET notes = repeat('z', 2001)",
        "UPDATE users SET phone = repeat('7', 1000000)",
        "UPDATE branches SET address = repeat('a', 501)",
        "UPDATE devices SET name = repeat('d', 201)",
        "INSERT INTO customers (id, name, national_id) VALUES (gen_random_uuid(), 'x', repeat('C', 51))",
    ] {
        let err = client
            .execute(sql, &[])
            .await
            .expect_err("an over-long value must be refused");
        assert_eq!(
            err.code(),
            Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION),
            "{sql}: {err}"
        );
    }
    // At the limit it is accepted.
    client
        .execute("UPDATE customers SET phone = repeat('7', 50)", &[])
        .await
        .unwrap();
}

/// Text columns that clients never write (server-made values, codes checked
/// against a list or a foreign key, digests, ids, JSON answers we build).
const SERVER_WRITTEN: &[(&str, &str)] = &[
    ("audit_log", "action"),
    ("audit_log", "entity_id"),
    ("audit_log", "entity_type"),
    ("audit_log", "request_id"),
    ("branches", "currency_code"),
    ("change_log", "entity"),
    ("change_log", "entity_id"),
    ("currencies", "name"),
    ("currencies", "symbol"),
    ("customer_ledger", "request_digest"),
    ("exchange_rates", "base_currency_code"),
    ("exchange_rates", "currency_code"),
    ("invoice_counters", "last_hash"),
    ("medicines", "category"),
    ("prescription_counters", "branch_code"),
    ("prescriptions", "rx_number"),
    ("push_mutations", "entity_id"),
    ("push_mutations", "request_digest"),
    ("sales", "invoice_hash"),
    ("sales", "invoice_number"),
    ("sales", "previous_invoice_hash"),
    ("sales", "request_digest"),
    ("sales_days", "method"),
    ("schema_migrations", "checksum"),
    ("schema_migrations", "name"),
    ("settings", "base_currency"),
    ("stock_movements", "reference_type"),
    ("sync_conflicts", "entity_id"),
    ("sync_conflicts", "entity_type"),
    ("users", "password_hash"),
];

#[tokio::test]
async fn every_client_written_text_column_has_a_length_check() {
    let d = Desk::open().await;
    let client = d.app.pool.get().await.unwrap();
    // Text columns with no CHECK constraint involving them.
    let rows = client
        .query(
            "SELECT c.table_name::text, c.column_name::text
               FROM information_schema.columns c
              WHERE c.table_schema = 'public' AND c.data_type = 'text'
                AND NOT EXISTS (
                    SELECT 1 FROM pg_constraint k
                      JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
                     WHERE k.contype = 'c'
                       AND k.conrelid = format('public.%I', c.table_name)::regclass
                       AND a.attname = c.column_name)
              ORDER BY 1, 2",
            &[],
        )
        .await
        .unwrap();
    let all: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let unchecked: Vec<&(String, String)> = all
        .iter()
        .filter(|(t, c)| !SERVER_WRITTEN.contains(&(t.as_str(), c.as_str())))
        .collect();
    assert!(
        unchecked.is_empty(),
        "text columns without a length CHECK (add one, or list them as server-written): {unchecked:?}"
    );
    // The list names only columns that exist and have no CHECK.
    for (t, c) in SERVER_WRITTEN {
        assert!(
            all.iter().any(|(at, ac)| at == t && ac == c),
            "{t}.{c} is listed as server-written but is not an unchecked text column: {all:?}"
        );
    }
}

// ------------------------------------------------------------- conflicts

#[tokio::test]
async fn a_conflict_keeps_only_the_fields_the_entity_has() {
    let d = Desk::open().await;
    let c = d
        .customer(&d.admin, json!({"name": "Sarah", "phone": "0700000001"}))
        .await;
    let id = c["id"].as_str().unwrap().to_owned();
    let base_rev = c["rev"].as_i64().unwrap();
    let (s, _) = d
        .put(
            &d.admin,
            &format!("/customers/{id}"),
            json!({"name": "Sarah N."}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    // A stale update carrying a large junk field next to a real change.
    let junk = "j".repeat(2 * 1024 * 1024);
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "stale-1",
                "update",
                json!({"id": id, "base_rev": base_rev, "name": "Sara",
                       "updated_at": "2026-01-01T00:00:00.000Z",
                       "junk": junk, "nested": {"more": "junk"}}),
            )],
        )
        .await;
    assert_eq!(rejection(&answer).0, "conflict");
    let (_, list) = d.app.get("/sync/conflicts", &d.admin).await;
    let conflict = &list["items"][0];
    let payload = conflict["payload"].as_object().unwrap();
    let mut keys: Vec<&str> = payload.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["base_rev", "id", "name", "updated_at"],
        "{payload:?}"
    );
    assert_eq!(conflict["client_version"]["name"], "Sara");
    assert!(conflict["client_version"].get("junk").is_none());
    assert!(
        d.count("SELECT max(octet_length(payload::text) + octet_length(client_version::text))::bigint FROM sync_conflicts")
            .await
            < 4096
    );
    // A stale update whose own field is over-long is refused, not kept.
    let answer = d
        .push(
            &d.cashier,
            vec![customer_change(
                "stale-2",
                "update",
                json!({"id": id, "base_rev": base_rev, "name": "n".repeat(100_000)}),
            )],
        )
        .await;
    assert_eq!(
        rejection(&answer),
        ("validation_failed".to_owned(), json!("name"))
    );
    assert_eq!(d.count("SELECT count(*) FROM sync_conflicts").await, 1);
    // And the kept conflict resolves as before.
    let (status, resolved) = d
        .app
        .post(
            &format!(
                "/sync/conflicts/{}/resolve",
                conflict["id"].as_str().unwrap()
            ),
            &d.admin,
            json!({"strategy": "client"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{resolved}");
    assert_eq!(resolved["payload"]["name"], "Sara");
}

// ---------------------------------------------------------- slow clients

/// Opens a raw connection, sends `head`, then trickles `body` one byte every
/// `gap`; answers what the server sent and when it closed the connection
/// (`None`: still open after `give_up`).
async fn trickle(
    app: &TestApp,
    head: String,
    body: Vec<u8>,
    gap: Duration,
    give_up: Duration,
) -> (String, Option<Duration>) {
    let addr = app.root.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    let sender = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for byte in body {
            tokio::time::sleep(gap).await;
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
        }
        // Keep the write half open: only the server may end the connection.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        let left = give_up.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, reader.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break Some(started.elapsed()),
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
            Err(_) => break None,
        }
    };
    sender.abort();
    (String::from_utf8_lossy(&received).into_owned(), closed)
}

fn post_head(addr: &str, path: &str, extra: &str) -> String {
    format!(
        "POST /api/v1{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{extra}\r\n"
    )
}

#[tokio::test]
async fn a_trickled_body_gets_408_and_the_connection_closes_within_the_timeout() {
    let app = TestApp::spawn_with(|c| {
        c.http.body_timeout_secs = 2;
        c.http.push_body_timeout_secs = 30;
    })
    .await;
    let addr = app.root.trim_start_matches("http://").to_owned();
    let login = br#"{"email":"someone@test.pharmacy","password":"not-the-password"}"#.to_vec();
    // One byte every half second: the body would take half a minute.
    let head = post_head(
        &addr,
        "/auth/login",
        &format!("Content-Length: {}\r\n", login.len()),
    );
    let (text, closed) = trickle(
        &app,
        head,
        login.clone(),
        Duration::from_millis(500),
        Duration::from_secs(15),
    )
    .await;
    let closed = closed.expect("the server must close a connection trickling its body");
    assert!(
        closed >= Duration::from_millis(1500) && closed < Duration::from_secs(6),
        "closed after {closed:?}"
    );
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    // Chunked, the same.
    let chunked: Vec<u8> = format!("{:x}\r\n", login.len())
        .into_bytes()
        .into_iter()
        .chain(login.iter().copied())
        .collect();
    let head = post_head(&addr, "/auth/login", "Transfer-Encoding: chunked\r\n");
    let (text, closed) = trickle(
        &app,
        head,
        chunked,
        Duration::from_millis(500),
        Duration::from_secs(15),
    )
    .await;
    let closed = closed.unwrap_or_else(|| panic!("a chunked trickle is closed too: {text}"));
    assert!(closed < Duration::from_secs(6), "closed after {closed:?}");
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    // A route answering before it reads the body (401: no token) closes
    // at once instead of draining what the client still trickles.
    let head = post_head(&addr, "/customers", "Transfer-Encoding: chunked\r\n");
    let body = b"5\r\n{\"nam\r\n".to_vec();
    let (text, closed) = trickle(
        &app,
        head,
        body,
        Duration::from_millis(500),
        Duration::from_secs(15),
    )
    .await;
    let closed = closed.expect("an unauthenticated trickle is closed");
    assert!(closed < Duration::from_secs(3), "closed after {closed:?}");
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
}

#[tokio::test]
async fn slow_headers_are_cut_off_and_push_bodies_get_their_own_deadline() {
    let app = TestApp::spawn_with(|c| {
        c.http.client_request_timeout_ms = 1000;
        c.http.body_timeout_secs = 1;
        c.http.push_body_timeout_secs = 30;
    })
    .await;
    let addr = app.root.trim_start_matches("http://").to_owned();
    // Headers trickled: the head deadline ends the connection.
    let head = format!("POST /api/v1/auth/login HTTP/1.1\r\nHost: {addr}\r\n");
    let rest = b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".to_vec();
    let (_, closed) = trickle(
        &app,
        head,
        rest,
        Duration::from_millis(400),
        Duration::from_secs(15),
    )
    .await;
    let closed = closed.expect("slow headers must be cut off");
    assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
    // A push body taking three seconds is within its own deadline (30 s),
    // though above the 1 s of other routes: it is answered normally.
    let branch = app.branch("KLA").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let body = br#"{"device_id":"x","changes":[]}"#.to_vec();
    let gap = Duration::from_millis(3000 / body.len() as u64);
    let head = post_head(
        &addr,
        "/sync/push",
        &format!(
            "Authorization: Bearer {cashier}\r\nContent-Length: {}\r\n",
            body.len()
        ),
    );
    let (text, _) = trickle(&app, head, body, gap, Duration::from_secs(10)).await;
    assert!(
        text.starts_with("HTTP/1.1 400") || text.starts_with("HTTP/1.1 404"),
        "a slow but timely push body is read and judged: {text}"
    );
    assert!(!text.starts_with("HTTP/1.1 408"), "{text}");
}
