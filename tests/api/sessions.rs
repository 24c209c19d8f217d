use reqwest::StatusCode;
use serde_json::json;

use crate::common::{assert_problem, Role, TestApp};

#[tokio::test]
async fn open_returns_the_spec_shape_and_missing_float_is_zero() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Cashier).await;
    let (status, s) = app.post("/sessions/open", &token, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["opening_float"], "0.00");
    assert_eq!(s["status"], "open");
    assert_eq!(s["user_id"], user.id.to_string());
    assert_eq!(s["branch_id"], branch.to_string());
    assert_eq!(s["break_minutes"], 0);
    assert_eq!(s["total_sales"], 0);
    assert_eq!(s["total_revenue"], "0.00");
    assert_eq!(s["total_vat"], "0.00");
    assert!(s["payment_breakdown"].is_string());
    assert!(s["closed_at"].is_null());
    assert!(s["opened_at"].as_str().unwrap().ends_with('Z'));
    let (status, current) = app.get("/sessions/current", &token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(current["id"], s["id"]);
}

#[tokio::test]
async fn a_second_open_returns_the_same_session() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, a) = app.signed_in(branch, Role::Cashier).await;
    let (_, b) = app.signed_in(branch, Role::Pharmacist).await;
    let (_, first) = app
        .post("/sessions/open", &a, json!({"opening_float": 50000}))
        .await;
    assert_eq!(first["opening_float"], "50000.00");
    let (status, second) = app
        .post("/sessions/open", &b, json!({"opening_float": 10}))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["opening_float"], "50000.00");
}

#[tokio::test]
async fn twenty_concurrent_opens_make_exactly_one_session() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, token) = app.signed_in(branch, Role::Cashier).await;
    let calls = (0..20).map(|i| app.post("/sessions/open", &token, json!({"opening_float": i})));
    let results = futures_util::future::join_all(calls).await;
    let ids: std::collections::HashSet<String> = results
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, StatusCode::OK, "{body}");
            body["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1);
    let client = app.pool.get().await.unwrap();
    let rows: i64 = client
        .query_one(
            "SELECT count(*) FROM cash_sessions WHERE branch_id = $1",
            &[&branch],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn the_database_refuses_a_second_open_session_whatever_the_process() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Cashier).await;
    app.post("/sessions/open", &token, json!({})).await;
    // A second writer that bypasses this process's actors is refused by the index.
    let client = app.pool.get().await.unwrap();
    let err = client
        .execute(
            "INSERT INTO cash_sessions (id, user_id, branch_id, status) VALUES ($1, $2, $3, 'open')",
            &[&uuid::Uuid::now_v7(), &user.id, &branch],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    );
}

#[tokio::test]
async fn non_admin_is_refused_another_branch_and_admin_is_allowed() {
    let app = TestApp::spawn().await;
    let a = app.branch("BA").await;
    let b = app.branch("BB").await;
    let (_, cashier) = app.signed_in(a, Role::Cashier).await;
    let (status, body) = app
        .post("/sessions/open", &cashier, json!({"branch_id": b}))
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    let (status, body) = app
        .get(&format!("/sessions/current?branch_id={b}"), &cashier)
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
    let client = app.pool.get().await.unwrap();
    let n: i64 = client
        .query_one("SELECT count(*) FROM cash_sessions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "a refused request changes nothing");

    let (_, admin) = app.signed_in(a, Role::Admin).await;
    let (status, s) = app
        .post("/sessions/open", &admin, json!({"branch_id": b}))
        .await;
    assert_eq!(status, StatusCode::OK, "{s}");
    assert_eq!(s["branch_id"], b.to_string());
}

#[tokio::test]
async fn negative_float_is_refused() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, token) = app.signed_in(branch, Role::Cashier).await;
    let (status, body) = app
        .post("/sessions/open", &token, json!({"opening_float": -5}))
        .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "opening_float");
}

#[tokio::test]
async fn a_full_branch_mailbox_answers_503_with_retry_after() {
    let app = TestApp::spawn_with(|c| c.actors.branch_mailbox = 1).await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Cashier).await;
    // Hold an uncommitted open session so the actor's insert waits on it:
    // the one permitted message stays in flight while the others arrive.
    let mut blocker = app.pool.get().await.unwrap();
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        "INSERT INTO cash_sessions (id, user_id, branch_id, status) VALUES ($1, $2, $3, 'open')",
        &[&uuid::Uuid::now_v7(), &user.id, &branch],
    )
    .await
    .unwrap();
    let first = tokio::spawn({
        let (http, url, token) = (
            app.http.clone(),
            format!("{}/sessions/open", app.base),
            token.clone(),
        );
        async move {
            http.post(url)
                .bearer_auth(token)
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let res = app
        .http
        .post(format!("{}/sessions/open", app.base))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().get("retry-after").is_some());
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    tx.rollback().await.unwrap();
    assert_eq!(first.await.unwrap(), StatusCode::OK);
}
