//! Controls on what clients may write: who may give credit, how long text
//! may be (in validation and in the database), what a sync conflict keeps,
//! and how long a client may take to send a request.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Role, TestApp};

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
