//! Tokens that stop at once, and a login limit that cannot be raced: a password change
//! (by a manager or by the user), a deactivation (even when reactivated),
//! a role or branch change and a reused refresh token end every token
//! issued before them; `POST /auth/logout` ends one session; the failed-login
//! limit holds under concurrent attempts.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp, PASSWORD};

const NEW_PASSWORD: &str = "battery-staple-77";

/// A sign-in: (access token, refresh token).
async fn sign_in(app: &TestApp, email: &str, password: &str) -> (String, String) {
    let (status, body) = app.login(email, password).await;
    assert_eq!(status, StatusCode::OK, "login: {body}");
    pair(&body)
}

fn pair(body: &Value) -> (String, String) {
    (
        body["access_token"].as_str().expect("access").to_owned(),
        body["refresh_token"].as_str().expect("refresh").to_owned(),
    )
}

async fn refresh(app: &TestApp, token: &str) -> (StatusCode, Value) {
    app.call(
        Method::POST,
        "/auth/refresh",
        None,
        Some(json!({"refresh_token": token})),
    )
    .await
}

/// The access token works (a read and a write-guarded route).
async fn works(app: &TestApp, token: &str, what: &str) {
    let (status, body) = app.get("/auth/me", token).await;
    assert_eq!(status, StatusCode::OK, "{what}: {body}");
}

/// The access token is refused with a problem body, for reads and writes.
async fn dead(app: &TestApp, token: &str, what: &str) {
    let (status, body) = app.get("/auth/me", token).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
    let (status, body) = app
        .post("/sessions/open", token, json!({"opening_cash": 0}))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what} (write): {body}");
}

/// The refresh token no longer gives a pair.
async fn refresh_dead(app: &TestApp, token: &str, what: &str) {
    let (status, body) = refresh(app, token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
}

async fn put_user(app: &TestApp, admin: &str, id: Uuid, body: Value) {
    let (status, answer) = app
        .call(
            Method::PUT,
            &format!("/users/{id}"),
            Some(admin),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "PUT /users: {answer}");
}

async fn change_password(
    app: &TestApp,
    token: &str,
    current: &str,
    new: &str,
) -> (StatusCode, Value) {
    app.post(
        "/auth/password",
        token,
        json!({"current_password": current, "new_password": new}),
    )
    .await
}

#[tokio::test]
async fn a_password_change_through_put_users_ends_every_old_token() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let cashier = app.user(branch, Role::Cashier).await;
    // Two tills signed in as the cashier.
    let (a_access, a_refresh) = sign_in(&app, &cashier.email, PASSWORD).await;
    let (b_access, b_refresh) = sign_in(&app, &cashier.email, PASSWORD).await;
    works(&app, &a_access, "before the change").await;

    put_user(&app, &admin, cashier.id, json!({"password": NEW_PASSWORD})).await;

    dead(&app, &a_access, "till A after the password change").await;
    dead(&app, &b_access, "till B after the password change").await;
    refresh_dead(&app, &a_refresh, "till A's refresh token").await;
    refresh_dead(&app, &b_refresh, "till B's refresh token").await;
    let (status, _) = app.login(&cashier.email, PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the old password");
    let (fresh, _) = sign_in(&app, &cashier.email, NEW_PASSWORD).await;
    works(&app, &fresh, "a sign-in with the new password").await;
    // The manager's own token was not touched.
    works(&app, &admin, "the admin who changed it").await;
}

#[tokio::test]
async fn changing_ones_own_password_ends_every_old_token_and_answers_a_fresh_pair() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let cashier = app.user(branch, Role::Cashier).await;
    let (a_access, a_refresh) = sign_in(&app, &cashier.email, PASSWORD).await;
    let (b_access, b_refresh) = sign_in(&app, &cashier.email, PASSWORD).await;

    let (status, body) = change_password(&app, &a_access, PASSWORD, NEW_PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The shape of a login: the caller stays signed in with the new pair.
    assert_eq!(body["token_type"], "bearer");
    assert!(body["expires_in"].as_i64().unwrap() > 0);
    assert_eq!(body["user"]["id"], cashier.id.to_string());
    assert!(!body.to_string().contains("argon2"), "no hash leaves");
    let (new_access, new_refresh) = pair(&body);
    works(&app, &new_access, "the answered access token").await;

    dead(&app, &a_access, "the token that changed it").await;
    dead(&app, &b_access, "the other till's token").await;
    refresh_dead(&app, &a_refresh, "the old refresh token").await;
    refresh_dead(&app, &b_refresh, "the other till's refresh token").await;
    // The answered refresh token rotates as any other.
    let (status, body) = refresh(&app, &new_refresh).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    works(
        &app,
        body["access_token"].as_str().unwrap(),
        "after rotation",
    )
    .await;

    assert_eq!(
        app.login(&cashier.email, PASSWORD).await.0,
        StatusCode::UNAUTHORIZED
    );
    sign_in(&app, &cashier.email, NEW_PASSWORD).await;
    // The change is audited, without any hash.
    let client = app.pool.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT actor_id, after::text FROM audit_log WHERE action = 'user.password_change' AND entity_id = $1",
            &[&cashier.id.to_string()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<Uuid>>(0), Some(cashier.id));
    assert!(!row.get::<_, String>(1).contains("argon2"));
}

#[tokio::test]
async fn every_role_may_change_its_own_password() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    for role in [
        Role::Admin,
        Role::BranchManager,
        Role::InventoryManager,
        Role::Pharmacist,
        Role::Cashier,
        Role::Auditor,
    ] {
        let (user, token) = app.signed_in(branch, role).await;
        let (status, body) = change_password(&app, &token, PASSWORD, NEW_PASSWORD).await;
        assert_eq!(status, StatusCode::OK, "{role:?}: {body}");
        assert_eq!(body["user"]["role"], json!(role));
        sign_in(&app, &user.email, NEW_PASSWORD).await;
    }
}

#[tokio::test]
async fn a_refused_password_change_names_the_field_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Pharmacist).await;
    let cases = [
        (
            json!({"current_password": "not-the-password", "new_password": NEW_PASSWORD}),
            "current_password",
        ),
        (
            json!({"current_password": PASSWORD, "new_password": "short"}),
            "new_password",
        ),
        (
            json!({"current_password": PASSWORD, "new_password": PASSWORD}),
            "new_password",
        ),
        (
            json!({"current_password": PASSWORD, "new_password": "x".repeat(300)}),
            "new_password",
        ),
        (json!({"current_password": PASSWORD}), "new_password"),
        (json!({"new_password": NEW_PASSWORD}), "current_password"),
    ];
    for (body, field) in cases {
        let (status, answer) = app.post("/auth/password", &token, body.clone()).await;
        assert_problem(status, &answer, StatusCode::BAD_REQUEST);
        assert_eq!(answer["field"], field, "{body}: {answer}");
        // Nothing changed: the token still works, the password still signs in.
        works(&app, &token, "after a refused change").await;
    }
    sign_in(&app, &user.email, PASSWORD).await;
    // Without a token: 401.
    let (status, body) = app
        .call(
            Method::POST,
            "/auth/password",
            None,
            Some(json!({"current_password": PASSWORD, "new_password": NEW_PASSWORD})),
        )
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
}

/// A stolen access token cannot guess the password through the change
/// route faster than through login: wrong current passwords count against
/// the same window.
#[tokio::test]
async fn wrong_current_passwords_count_as_failed_sign_ins() {
    let app = TestApp::spawn_with(|c| {
        c.auth.login_failures_per_email = 3;
        c.auth.login_window_secs = 3600;
    })
    .await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Cashier).await;
    inside_one_window(3600).await;
    for i in 0..3 {
        let (status, body) =
            change_password(&app, &token, &format!("guess-{i}-guess"), NEW_PASSWORD).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
    let (status, body) = change_password(&app, &token, PASSWORD, NEW_PASSWORD).await;
    assert_problem(status, &body, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        app.login(&user.email, PASSWORD).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    works(&app, &token, "a refused change leaves the token").await;
}

#[tokio::test]
async fn deactivating_then_reactivating_keeps_old_tokens_dead() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let cashier = app.user(branch, Role::Cashier).await;
    let (access, refresh_token) = sign_in(&app, &cashier.email, PASSWORD).await;

    put_user(&app, &admin, cashier.id, json!({"is_active": false})).await;
    dead(&app, &access, "while deactivated").await;
    put_user(&app, &admin, cashier.id, json!({"is_active": true})).await;
    dead(&app, &access, "after reactivation").await;
    refresh_dead(&app, &refresh_token, "refresh after reactivation").await;
    // The account itself works again.
    let (fresh, _) = sign_in(&app, &cashier.email, PASSWORD).await;
    works(&app, &fresh, "a new sign-in after reactivation").await;

    // The same when the flag is flipped straight in the database: the
    // database bumps the version itself.
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE users SET is_active = false WHERE id = $1",
            &[&cashier.id],
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE users SET is_active = true WHERE id = $1",
            &[&cashier.id],
        )
        .await
        .unwrap();
    dead(&app, &fresh, "after a direct deactivation and reactivation").await;
}

#[tokio::test]
async fn a_role_or_branch_change_ends_old_tokens_and_other_edits_do_not() {
    let app = TestApp::spawn().await;
    let b1 = app.branch("B1").await;
    let b2 = app.branch("B2").await;
    let (_, admin) = app.signed_in(b1, Role::Admin).await;
    let user = app.user(b1, Role::Cashier).await;

    // A name or phone edit leaves the sessions alone.
    let (access, _) = sign_in(&app, &user.email, PASSWORD).await;
    put_user(
        &app,
        &admin,
        user.id,
        json!({"full_name": "Renamed", "phone": "0700"}),
    )
    .await;
    works(&app, &access, "after a name change").await;
    // Naming the same role again is no change either.
    put_user(&app, &admin, user.id, json!({"role": "cashier"})).await;
    works(&app, &access, "after naming the same role").await;

    put_user(&app, &admin, user.id, json!({"role": "pharmacist"})).await;
    dead(&app, &access, "after a role change").await;

    let (access, refresh_token) = sign_in(&app, &user.email, PASSWORD).await;
    put_user(&app, &admin, user.id, json!({"branch_id": b2})).await;
    dead(&app, &access, "after a branch change").await;
    refresh_dead(&app, &refresh_token, "refresh after a branch change").await;

    // A role change written straight into the database ends tokens too.
    let (access, _) = sign_in(&app, &user.email, PASSWORD).await;
    let client = app.pool.get().await.unwrap();
    client
        .execute(
            "UPDATE users SET role = 'auditor' WHERE id = $1",
            &[&user.id],
        )
        .await
        .unwrap();
    dead(&app, &access, "after a direct role change").await;
    // And the database refuses to lower a version (old tokens would revive).
    let lowered = client
        .execute(
            "UPDATE users SET token_version = token_version - 1 WHERE id = $1",
            &[&user.id],
        )
        .await;
    assert!(lowered.is_err(), "a lower token version is refused");
}

#[tokio::test]
async fn a_reused_refresh_token_ends_every_access_token_of_the_user() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Pharmacist).await;
    let (a_access, a1) = sign_in(&app, &user.email, PASSWORD).await;
    let (b_access, b1) = sign_in(&app, &user.email, PASSWORD).await;
    let (status, body) = refresh(&app, &a1).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (a2_access, _) = pair(&body);
    works(&app, &a2_access, "the rotated access token").await;

    // a1 is presented again: it leaked.
    refresh_dead(&app, &a1, "the replay").await;
    dead(&app, &a_access, "the first access token of the family").await;
    dead(&app, &a2_access, "the rotated access token").await;
    dead(&app, &b_access, "the other session's access token").await;
    refresh_dead(&app, &b1, "the other session's refresh token").await;
}

#[tokio::test]
async fn logout_ends_its_session_and_not_another() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    let (a_access, a1) = sign_in(&app, &user.email, PASSWORD).await;
    let (b_access, b_refresh) = sign_in(&app, &user.email, PASSWORD).await;
    // Rotate A once: its session now has two access tokens.
    let (status, body) = refresh(&app, &a1).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (a2_access, a2) = pair(&body);

    // Without a body (an empty body reads as `{}`).
    let (status, body) = app
        .call(Method::POST, "/auth/logout", Some(&a2_access), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    dead(&app, &a2_access, "the token that logged out").await;
    dead(&app, &a_access, "the session's earlier access token").await;
    refresh_dead(&app, &a2, "the session's refresh token").await;
    // Presenting the logged-out session's unused refresh token is no reuse:
    // the other session lives on.
    works(&app, &b_access, "the other session").await;
    let (status, body) = refresh(&app, &b_refresh).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the other session refreshes: {body}"
    );
    let (b2_access, _) = pair(&body);
    // Logging out again with a dead token: 401.
    let (status, body) = app
        .call(Method::POST, "/auth/logout", Some(&a2_access), None)
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    let (status, body) = app.call(Method::POST, "/auth/logout", None, None).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // A refresh token in the body ends its session too (when it is the
    // caller's); another user's is ignored.
    let (c_access, c_refresh) = sign_in(&app, &user.email, PASSWORD).await;
    let other = app.user(branch, Role::Cashier).await;
    let (o_access, o_refresh) = sign_in(&app, &other.email, PASSWORD).await;
    let (status, body) = app
        .post(
            "/auth/logout",
            &b2_access,
            json!({"refresh_token": c_refresh}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    dead(&app, &b2_access, "the caller's session").await;
    dead(&app, &c_access, "the session named by its refresh token").await;
    let (d_access, _) = sign_in(&app, &user.email, PASSWORD).await;
    let (status, _) = app
        .post(
            "/auth/logout",
            &d_access,
            json!({"refresh_token": o_refresh}),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    works(&app, &o_access, "another user's session").await;
    let (status, body) = refresh(&app, &o_refresh).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "another user's refresh token: {body}"
    );
    // The rows say so.
    let client = app.pool.get().await.unwrap();
    let live: i64 = client
        .query_one(
            "SELECT count(*) FROM auth_sessions WHERE user_id = $1 AND revoked_at IS NULL",
            &[&user.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(live, 0, "every session of the user was logged out");
}

fn b64_payload(token: &str) -> Value {
    serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap()
}

/// Even with the signing secret, a token must name a live session of its
/// own user and the user's current token version.
#[tokio::test]
async fn a_token_must_name_a_live_session_of_its_user_and_the_current_version() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, token) = app.signed_in(branch, Role::Admin).await;
    let (_, other_token) = app.signed_in(branch, Role::Cashier).await;
    let secret = app.config.auth.jwt_secret.clone();
    let sign = |claims: &Value| {
        encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let genuine = b64_payload(&token);
    // Control: re-signing the genuine claims works.
    works(&app, &sign(&genuine), "the genuine claims re-signed").await;
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut c = genuine.clone();
    c["sid"] = b64_payload(&other_token)["sid"].clone();
    cases.push(("another user's session", c));
    let mut c = genuine.clone();
    c["sid"] = json!(Uuid::now_v7().to_string());
    cases.push(("an unknown session", c));
    let mut c = genuine.clone();
    c["sid"] = json!("not-a-uuid");
    cases.push(("a malformed session", c));
    let mut c = genuine.clone();
    c["ver"] = json!(genuine["ver"].as_i64().unwrap() + 1);
    cases.push(("a future version", c));
    let mut c = genuine.clone();
    c["ver"] = json!("0");
    cases.push(("a version as text", c));
    for key in ["sid", "ver"] {
        let mut c = genuine.clone();
        c.as_object_mut().unwrap().remove(key);
        cases.push((
            if key == "sid" {
                "no session"
            } else {
                "no version"
            },
            c,
        ));
    }
    for (what, claims) in cases {
        dead(&app, &sign(&claims), what).await;
    }
}

/// Fixed windows aligned to the clock: start a burst well inside one.
async fn inside_one_window(window_secs: i64) {
    let into = chrono::Utc::now().timestamp().rem_euclid(window_secs);
    if into > window_secs - 20 {
        let left = (window_secs - into) as u64;
        tokio::time::sleep(Duration::from_millis(left * 1000 + 200)).await;
    }
}

/// Finding 7: 60 wrong passwords at once for one email, against a limit of
/// 10: exactly 10 are checked (401), the rest are refused unchecked (429).
#[tokio::test]
async fn the_login_limit_holds_under_sixty_concurrent_wrong_passwords() {
    let app = TestApp::spawn_with(|c| {
        c.auth.login_failures_per_email = 10;
        c.auth.login_failures_per_address = 1000;
        c.auth.login_window_secs = 3600;
        // Sixty at once on a loaded machine: wait for a connection rather
        // than answer 503, so every attempt meets the limit.
        c.database.pool_wait_timeout_ms = 60_000;
    })
    .await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    inside_one_window(3600).await;
    let attempts = (0..60).map(|i| {
        let (http, url, email) = (
            app.http.clone(),
            format!("{}/auth/login", app.base),
            user.email.clone(),
        );
        tokio::spawn(async move {
            http.post(url)
                .json(&json!({"email": email, "password": format!("wrong-guess-{i}")}))
                .send()
                .await
                .unwrap()
                .status()
        })
    });
    let mut statuses = BTreeMap::<u16, usize>::new();
    for status in futures_util::future::join_all(attempts).await {
        *statuses.entry(status.unwrap().as_u16()).or_default() += 1;
    }
    assert_eq!(
        statuses,
        BTreeMap::from([(401, 10), (429, 50)]),
        "at most the limit of failures are checked"
    );
    // The window is full: even the right password waits.
    assert_eq!(
        app.login(&user.email, PASSWORD).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let client = app.pool.get().await.unwrap();
    let hits: i32 = client
        .query_one(
            "SELECT hits FROM rate_limits WHERE key = $1",
            &[&format!("login:email:{}", user.email)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(hits, 10, "refused attempts are not counted");
}

/// Successes give their slot back: a user who signs in often never fills
/// the window with its own sign-ins, one at a time or several at once.
#[tokio::test]
async fn successful_sign_ins_do_not_fill_the_window() {
    let app = TestApp::spawn_with(|c| {
        c.auth.login_failures_per_email = 3;
        c.auth.login_window_secs = 3600;
    })
    .await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    inside_one_window(3600).await;
    // Three concurrent successes fit in the three slots, and give them back.
    let statuses =
        futures_util::future::join_all((0..3).map(|_| app.login(&user.email, PASSWORD))).await;
    assert!(
        statuses.iter().all(|(s, _)| *s == StatusCode::OK),
        "{statuses:?}"
    );
    for _ in 0..2 {
        assert_eq!(
            app.login(&user.email, "nope-nope").await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    for _ in 0..10 {
        assert_eq!(app.login(&user.email, PASSWORD).await.0, StatusCode::OK);
    }
    // The third failure is still checked (401), the fourth refused.
    assert_eq!(
        app.login(&user.email, "nope-nope").await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.login(&user.email, "nope-nope").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn the_openapi_document_lists_logout_and_password_change() {
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
    for path in ["/api/v1/auth/logout", "/api/v1/auth/password"] {
        let op = &doc["paths"][path]["post"];
        assert!(op.is_object(), "{path} is documented");
        assert!(op["security"].is_array(), "{path} needs a token");
    }
    assert!(doc["paths"]["/api/v1/auth/password"]["post"]["responses"]["200"].is_object());
    assert!(doc["paths"]["/api/v1/auth/logout"]["post"]["responses"]["204"].is_object());
    assert!(
        doc["components"]["schemas"]["PasswordChange"]["properties"]["new_password"].is_object()
    );
}

/// `GET /medicines/{id}`, `GET /customers/{id}` and `GET /sync/changes`
/// check the caller in the same round trip as their read: a signed-out, deactivated or demoted
/// token is refused there exactly as on every other route, before a
/// malformed id, another branch or a missing row is reported, and the read
/// is not shown.
#[tokio::test]
async fn the_reads_that_check_the_caller_with_their_read_refuse_dead_tokens_first() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let other = app.branch("B2").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let m = app
        .medicine(
            &admin,
            json!({"name": "Amoxicillin 500", "selling_price": "1500"}),
        )
        .await;
    let (status, c) = app
        .post("/customers", &admin, json!({"name": "Jane Customer"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{c}");
    let reads = [
        format!("/medicines/{}", m["id"].as_str().unwrap()),
        format!("/customers/{}", c["id"].as_str().unwrap()),
        "/sync/changes?since=0".to_owned(),
    ];
    let refused = [
        "/medicines/not-an-id".to_owned(),
        format!("/medicines/{}", Uuid::now_v7()),
        format!("/medicines/{}?branch_id={other}", m["id"].as_str().unwrap()),
        "/customers/not-an-id".to_owned(),
        format!("/customers/{}", Uuid::now_v7()),
        "/sync/changes?since=abc".to_owned(),
    ];
    let cashier = app.user(branch, Role::Cashier).await;
    let (live, _) = sign_in(&app, &cashier.email, PASSWORD).await;
    for path in &reads {
        let (status, body) = app.get(path, &live).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    // A malformed id is a missing row (the conventions' choice).
    let expected = [
        StatusCode::NOT_FOUND,
        StatusCode::NOT_FOUND,
        StatusCode::FORBIDDEN,
        StatusCode::NOT_FOUND,
        StatusCode::NOT_FOUND,
        StatusCode::BAD_REQUEST,
    ];
    for (path, want) in refused.iter().zip(expected) {
        let (status, body) = app.get(path, &live).await;
        assert_eq!(status, want, "{path} with a live token: {body}");
    }

    // Signed out.
    let (status, body) = app
        .call(Method::POST, "/auth/logout", Some(&live), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    for path in reads.iter().chain(&refused) {
        let (status, body) = app.get(path, &live).await;
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
        assert!(body.get("name").is_none(), "{path} showed the read: {body}");
    }

    // Demoted: a role change ends the token, so the role it states is
    // never trusted once it differs from the account's.
    let (pharmacist, _) = sign_in(&app, &cashier.email, PASSWORD).await;
    put_user(&app, &admin, cashier.id, json!({"role": "pharmacist"})).await;
    for path in &reads {
        let (status, body) = app.get(path, &pharmacist).await;
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }

    // Deactivated.
    let (fresh, _) = sign_in(&app, &cashier.email, PASSWORD).await;
    for path in &reads {
        let (status, body) = app.get(path, &fresh).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    put_user(&app, &admin, cashier.id, json!({"is_active": false})).await;
    for path in reads.iter().chain(&refused) {
        let (status, body) = app.get(path, &fresh).await;
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }
}

/// A long poll checks its token with every read of the feed: a till signed
/// out while its poll is parked gets 401 when a change wakes the poll, not
/// the change.
#[tokio::test]
async fn a_parked_poll_of_a_token_signed_out_meanwhile_wakes_to_a_401() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let cashier = app.user(branch, Role::Cashier).await;
    let (till, _) = sign_in(&app, &cashier.email, PASSWORD).await;
    let (_, feed) = app.get("/sync/changes?since=0&limit=500", &till).await;
    let top = feed["max_rev"].as_i64().unwrap();
    let path = format!("/sync/changes?since={top}&wait=10");
    let poll = app.get(&path, &till);
    let change = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, body) = app
            .call(Method::POST, "/auth/logout", Some(&till), None)
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        let (status, body) = app
            .post("/customers", &admin, json!({"name": "Woken Poll"}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    };
    let ((status, body), ()) = futures_util::join!(poll, change);
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
}

/// Tills of one branch parked on one cursor are woken by one change and
/// read it together (`shared_feed`): each still gets its own answer, the
/// change for the standing ones and 401 for one signed out meanwhile.
#[tokio::test]
async fn polls_woken_together_each_get_their_own_answer() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let mut tills = Vec::new();
    for _ in 0..4 {
        let cashier = app.user(branch, Role::Cashier).await;
        tills.push(sign_in(&app, &cashier.email, PASSWORD).await.0);
    }
    let (_, feed) = app.get("/sync/changes?since=0&limit=500", &tills[0]).await;
    let (top, epoch) = (feed["max_rev"].as_i64().unwrap(), feed["epoch"].clone());
    let path = format!("/sync/changes?since={top}&wait=10");
    let polls = futures_util::future::join_all(tills.iter().map(|t| app.get(&path, t)));
    let change = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (status, body) = app
            .call(Method::POST, "/auth/logout", Some(&tills[3]), None)
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        let (status, body) = app
            .post("/customers", &admin, json!({"name": "Woken Together"}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body
    };
    let (answers, created) = futures_util::join!(polls, change);
    for (status, page) in &answers[..3] {
        assert_eq!(*status, StatusCode::OK, "{page}");
        assert_eq!(page["epoch"], epoch);
        let ids: Vec<&Value> = page["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["entity_id"])
            .collect();
        assert!(ids.contains(&&created["id"]), "{page}");
        assert_eq!(page, &answers[0].1, "polls of one cursor read one page");
    }
    assert_problem(answers[3].0, &answers[3].1, StatusCode::UNAUTHORIZED);
}

/// `POST /sync/push` checks its token with the device's read: a signed-out
/// till's push answers 401 and applies nothing, also when its body would be
/// refused.
#[tokio::test]
async fn a_push_of_a_signed_out_till_answers_401_and_applies_nothing() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;
    let (status, d) = app
        .post(
            "/devices",
            &admin,
            json!({"name": "Till", "branch_id": branch}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{d}");
    let cashier = app.user(branch, Role::Cashier).await;
    let (till, _) = sign_in(&app, &cashier.email, PASSWORD).await;
    let customer = |cmid: &str| {
        json!({"entity": "customer", "op": "create", "client_mutation_id": cmid,
               "payload": {"id": Uuid::now_v7(), "name": "Pushed Customer"}})
    };
    let push = |changes: Vec<Value>| json!({"device_id": d["id"], "changes": changes});
    let (status, body) = app
        .post("/sync/push", &till, push(vec![customer("c-1")]))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .call(Method::POST, "/auth/logout", Some(&till), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    for body in [
        push(vec![customer("c-2")]),
        push(vec![json!({"entity": "customer"})]),
        json!({"device_id": "not-a-device", "changes": []}),
    ] {
        let (status, answer) = app.post("/sync/push", &till, body).await;
        assert_problem(status, &answer, StatusCode::UNAUTHORIZED);
    }
    let client = app.pool.get().await.unwrap();
    let pushed: i64 = client
        .query_one(
            "SELECT count(*) FROM customers WHERE name = 'Pushed Customer'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(pushed, 1);
}
