use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_problem, Role, TestApp};

async fn raw(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: &str,
) -> (StatusCode, String, Value) {
    let res = app
        .http
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = res.status();
    let ctype = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = res.text().await.unwrap();
    (
        status,
        ctype,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn malformed_json_is_a_400_problem_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, ctype, body) =
        raw(&app, Method::POST, "/branches", &admin, "{\"code\": \"X\",").await;
    assert_eq!(ctype, "application/problem+json");
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    let (_, list) = app.get("/branches", &admin).await;
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn wrong_type_and_missing_field_name_the_field() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, _, body) = raw(
        &app,
        Method::POST,
        "/branches",
        &admin,
        r#"{"code": 12, "name": "X"}"#,
    )
    .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "code");
    let (status, _, body) = raw(&app, Method::POST, "/branches", &admin, r#"{"code": "X2"}"#).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "name");
    let (status, _, body) = raw(
        &app,
        Method::POST,
        "/sessions/open",
        &admin,
        r#"{"opening_float": "lots"}"#,
    )
    .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "opening_float");
}

#[tokio::test]
async fn oversized_body_is_413() {
    let app = TestApp::spawn_with(|c| c.http.body_limit_bytes = 1024).await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let big = format!(r#"{{"code": "X", "name": "{}"}}"#, "a".repeat(4096));
    let (status, ctype, body) = raw(&app, Method::POST, "/branches", &admin, &big).await;
    assert_eq!(ctype, "application/problem+json");
    assert_problem(status, &body, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn unknown_route_is_404_and_wrong_method_405_as_problems() {
    let app = TestApp::spawn().await;
    let res = app
        .http
        .get(format!("{}/no/such/route", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let status = res.status();
    assert_problem(status, &res.json().await.unwrap(), StatusCode::NOT_FOUND);
    let res = app
        .http
        .delete(format!("{}/auth/login", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let status = res.status();
    assert_problem(
        status,
        &res.json().await.unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
    );
}

#[tokio::test]
async fn malformed_ids_and_query_values_are_client_errors() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, body) = app.get("/branches/not-a-uuid", &admin).await;
    assert_problem(status, &body, StatusCode::NOT_FOUND);
    let (status, body) = app.get("/users?page=zero", &admin).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    assert_eq!(body["field"], "page");
    let (status, body) = app.get("/users?page=0", &admin).await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
    let (status, body) = app
        .post("/sessions/open", &admin, json!({"opening_float": 1e30}))
        .await;
    assert_problem(status, &body, StatusCode::BAD_REQUEST);
}
