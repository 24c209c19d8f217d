use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{encode, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{assert_problem, Role, TestApp, PASSWORD};

#[tokio::test]
async fn login_returns_tokens_and_the_user_without_password_hash() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Pharmacist).await;
    let (status, body) = app.login(&user.email.to_uppercase(), PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "bearer");
    assert!(body["access_token"].is_string() && body["refresh_token"].is_string());
    assert_eq!(body["expires_in"], 3600);
    assert_eq!(body["user"]["id"], user.id.to_string());
    assert_eq!(body["user"]["role"], "pharmacist");
    assert_eq!(body["user"]["is_active"], 1);
    assert!(body["user"]["last_login_at"].is_string());
    assert!(
        !body.to_string().contains("argon2"),
        "no hash may leave the server"
    );
    let token = body["access_token"].as_str().unwrap();
    let (status, me) = app.get("/auth/me", token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["email"], user.email);
    assert!(me.get("password_hash").is_none());
}

#[tokio::test]
async fn bad_credentials_are_401_with_detail() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    let (status, body) = app.login(&user.email, "wrong-password").await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    let (status, body) = app.login("nobody@nowhere.test", PASSWORD).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
}

fn forge(claims: Value, secret: &str) -> String {
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

/// Claims for `sub` in the session and token version of the `genuine`
/// token (a token outside a live session of the user is refused).
fn claims_for(app: &TestApp, sub: &str, exp_offset: i64, genuine: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    let payload: Value =
        serde_json::from_slice(&base64_url_decode(genuine.split('.').nth(1).unwrap())).unwrap();
    json!({
        "sub": sub, "role": "admin", "branch_id": sub, "org_id": app.org_id.to_string(),
        "iat": now, "nbf": now, "exp": now + exp_offset, "jti": "x",
        "iss": app.config.auth.issuer, "aud": app.config.auth.audience, "typ": "access",
        "sid": payload["sid"], "ver": payload["ver"]
    })
}

#[tokio::test]
async fn every_bad_token_is_401_with_detail() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Admin).await;
    let secret = app.config.auth.jwt_secret.clone();
    let sub = user.id.to_string();

    // The genuine token works.
    assert_eq!(app.get("/auth/me", &token).await.0, StatusCode::OK);

    // Missing header.
    let (status, body) = app.call(Method::GET, "/auth/me", None, None).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // Malformed header (no Bearer scheme).
    let res = app
        .http
        .get(format!("{}/auth/me", app.base))
        .header("Authorization", token.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let body: Value = res.json().await.unwrap();
    assert!(body["detail"].is_string());

    // Garbage.
    let (status, body) = app.get("/auth/me", "not.a.jwt").await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // Tampered payload: role changed, signature kept.
    let parts: Vec<&str> = token.split('.').collect();
    let mut payload: Value = serde_json::from_slice(&base64_url_decode(parts[1])).unwrap();
    payload["role"] = json!("auditor");
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        base64_url_encode(payload.to_string().as_bytes()),
        parts[2]
    );
    let (status, body) = app.get("/auth/me", &tampered).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // Wrong signature (another secret).
    let (status, body) = app
        .get(
            "/auth/me",
            &forge(claims_for(&app, &sub, 600, &token), "another-secret"),
        )
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // alg: none.
    let header = base64_url_encode(br#"{"alg":"none","typ":"JWT"}"#);
    let body_part = base64_url_encode(claims_for(&app, &sub, 600, &token).to_string().as_bytes());
    let (status, body) = app.get("/auth/me", &format!("{header}.{body_part}.")).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // Expired (beyond the leeway).
    let (status, body) = app
        .get(
            "/auth/me",
            &forge(claims_for(&app, &sub, -3600, &token), &secret),
        )
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // Wrong audience.
    let mut other_aud = claims_for(&app, &sub, 600, &token);
    other_aud["aud"] = json!("someone-else");
    let (status, body) = app.get("/auth/me", &forge(other_aud, &secret)).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // A correctly signed token for the same user still works (control).
    assert_eq!(
        app.get(
            "/auth/me",
            &forge(claims_for(&app, &sub, 600, &token), &secret)
        )
        .await
        .0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_deactivated_users_token_stops_working() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (cashier, token) = app.signed_in(branch, Role::Cashier).await;
    assert_eq!(app.get("/auth/me", &token).await.0, StatusCode::OK);
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/users/{}", cashier.id),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app.get("/auth/me", &token).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    let (status, _) = app.login(&cashier.email, PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn refresh_tokens_rotate_and_work_once() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    let (_, login) = app.login(&user.email, PASSWORD).await;
    let first = login["refresh_token"].as_str().unwrap().to_owned();

    let (status, pair) = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": first})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{pair}");
    let second = pair["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    assert_eq!(
        app.get("/auth/me", pair["access_token"].as_str().unwrap())
            .await
            .0,
        StatusCode::OK
    );

    // Reusing the first token fails, and revokes the family: the second too.
    let (status, body) = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": first})),
        )
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    let (status, _) = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": second})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // An access token is not a refresh token.
    let access = login["access_token"].as_str().unwrap();
    let (status, _) = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": access})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn concurrent_refreshes_with_one_token_succeed_once() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    let (_, login) = app.login(&user.email, PASSWORD).await;
    let token = login["refresh_token"].as_str().unwrap().to_owned();
    let calls = (0..10).map(|_| {
        app.call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": token})),
        )
    });
    let results = futures_util::future::join_all(calls).await;
    let ok = results.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    assert_eq!(ok, 1);
}

#[tokio::test]
async fn failed_logins_are_rate_limited_per_email() {
    let app = TestApp::spawn_with(|c| c.auth.login_failures_per_email = 3).await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    for _ in 0..3 {
        assert_eq!(
            app.login(&user.email, "nope-nope").await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    let res = app
        .http
        .post(format!("{}/auth/login", app.base))
        .json(&json!({"email": user.email, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().get("retry-after").is_some());
    // Another email is unaffected.
    let other = app.user(branch, Role::Cashier).await;
    assert_eq!(app.login(&other.email, PASSWORD).await.0, StatusCode::OK);
}

#[tokio::test]
async fn role_gate_answers_403_with_detail() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, cashier) = app.signed_in(branch, Role::Cashier).await;
    let (status, body) = app
        .post("/branches", &cashier, json!({"code": "X1", "name": "X"}))
        .await;
    assert_problem(status, &body, StatusCode::FORBIDDEN);
}

fn base64_url_decode(s: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(s).unwrap()
}

fn base64_url_encode(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}
