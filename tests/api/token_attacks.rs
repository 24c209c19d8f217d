//! Token attacks (RFC 8725, OWASP API2): every forged, stale, misdirected or
//! misused token is a 401 with a problem body carrying `detail`. The server
//! pins HS256 and checks issuer, audience, expiry and not-before with an
//! explicit leeway (`src/auth/tokens.rs`), and the caller extractor reloads
//! the user on every request.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::common::{assert_problem, Role, TestApp, PASSWORD};

/// A throw-away RSA key made for this test only (it signs nothing real):
/// the server must refuse a token signed with it whatever the signature.
const TEST_ONLY_RSA_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDRQfIgJL3tXfnj\n1kIWH5sMUzAHT2dYVXxHuKzOqqRMoF0L0TjMtj/Lb8TX6E5t3J8Xmee6qU/+LmPY\n0Y7Y60Y6XFaLai+i6+QwbP97EUK5vi/lowGKctQfCIXIPWhLgZFJbuqmLcRv5Fya\nbbYhGkC2v6XRMUdubMKScZJL8ChMwFfD78aok7Yyg7BDJh1T2sKc+9F28jeT2/qf\nYZ0UUdTrNsNsckSZ9PNfUMxue74HwM2NAZvDKBqjyPlrsQrPN6cNT3HwgxnGexlS\nrEI5KixB/nEqMTz/SrvHOKD4+EEuimblbB96FO+9O4gkY04rxT0gz2exBKEgK4Uy\nwhZco58zAgMBAAECggEARmh88mnKaeqb4Rg/Zjg+MBhxaZRC/orM5UjzBBqQa6Pt\nisNb7C1KK8YwokDs2rRH52YGfVzoqGqtd8+S09Pd7lcRW5lf696ZCd4y3BLDs8GV\nVhvRsebPDp4MfYKD7BvtaZrjYwS1OrzIl8FgbaTqr1KulUOSeEop8aI7CkgFF0Vo\nkBl38TmJuaXxsvio6GQ2CqT/HOW32jks0lJg7OR7vkfDhNqpzM/B/evy51p+cq4R\nsyi1FXKOpRuIeQ03UfWvkbWpFERhS0l/CQtSY1P8SZBmSNuNaPSB2C7kaG/mXU3r\nXV5IMY4JQjlmhM996V1YuKsWApegJYnRce1Xn2eg2QKBgQDzQLDSeH127hbByM0Y\nwk/vIqGyLT7OyqkQadVDzIO0K30Cb7XI1iBw5F9qFb1O0pqc+o9h9hbJDQg2FJog\n6W2fyEpdXMkL451l3R4IQ/PzWbQJNUH4vVxX0CJEh0rLEbZ9WybER1LCR+wRBWpT\n0/DGVTjeF67eag+jZeqbyj3DbwKBgQDcOTNSGanZq7rxaoUWtqgE0d0XXCCBmJQE\nC8lmZWGeXa2LBPQhroUyOlNM4JTaBi7VmQYmjP/PgkWXdhchQtPGMa0Ddy93OPzD\nn/jsgPBWflW3J0lmOI0+s9NDYxS318tw8wzhoEGU9BbuJnXmGQ385VcMlJ07PSCS\ni59OTtbufQKBgB78Moncxz6K/WMZzOZGeiAf7TDhCosUzYxFruDAAFbG41mYGTPH\n8sHulSjSNBcCRKeSUwlLa4OYoV8iKK/gjBI6VR6nXwSgrb/39odfAIgS+RfjLNAe\nbtDQtky8Xw6W5wP4xGtkGmqc9rkEU5LyAE2DNYc0xRWXtP4/US8fB9cJAoGBAILq\nvkegWgi8vnWmDVhjXZ7/459vdSOVwOhm2WO2AUJUDkcGutsLFMO3SK37FIJICq+Q\nOMfSKoEBwL05xqZPQ/YesevNfroxdpIVF7YBMN86W1p2UHwkQlN0M7Nrw3VHI/oR\ngybeTh5uvPL2ikAvxNECxa0E7DO7MxHrTtkOpVdBAoGATA7gYVe1b8VervGyaoCs\nfMvxKz7rzkx5omfJK3pQzwr4S0js0/yeNtkpNmTyaxeDjitjXFB0M5QBraFnW1Eg\nBr4Pwn0WPWBUwTT95GJF4t0v+m1Ri5MXllJZmdzLM8dnZeHqV/a3YcESy2cF5CC9\nRCfPn6zq27+vd0uEJGBZu0Q=\n-----END PRIVATE KEY-----";

fn b64(data: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

fn unb64(s: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(s).unwrap()
}

/// Genuine-looking claims for `user` (what the server itself would issue),
/// in the session and token version of the `genuine` token.
fn claims(app: &TestApp, user: Uuid, branch: Uuid, genuine: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    let payload: Value =
        serde_json::from_slice(&unb64(genuine.split('.').nth(1).unwrap())).unwrap();
    json!({
        "sub": user.to_string(), "role": "admin", "branch_id": branch.to_string(),
        "org_id": app.org_id.to_string(), "iat": now, "nbf": now, "exp": now + 600,
        "jti": Uuid::now_v7().to_string(), "iss": app.config.auth.issuer,
        "aud": app.config.auth.audience, "typ": "access",
        "sid": payload["sid"], "ver": payload["ver"],
    })
}

fn sign_hs(alg: Algorithm, claims: &Value, secret: &str) -> String {
    encode(
        &Header::new(alg),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()),
    )
    .unwrap()
}

/// A token with an arbitrary header, HMAC-SHA256-signed with `secret` over
/// the exact header and payload text (whatever `alg` the header claims).
fn with_header(header: &Value, claims: &Value, secret: &str) -> String {
    let signing_input = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    format!("{signing_input}.{}", b64(&hs256(secret, &signing_input)))
}

/// HMAC-SHA256 through jsonwebtoken itself, so the test needs no extra crate.
fn hs256(secret: &str, signing_input: &str) -> Vec<u8> {
    let sig = jsonwebtoken::crypto::sign(
        signing_input.as_bytes(),
        &EncodingKey::from_secret(secret.as_bytes()),
        Algorithm::HS256,
    )
    .unwrap();
    unb64(&sig)
}

async fn expect_401(app: &TestApp, token: &str, what: &str) {
    let (status, body) = app.get("/auth/me", token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    // A write is refused the same way (the extractor runs before the body).
    let (status, body) = app
        .post("/branches", token, json!({"code": "ZZ", "name": "Forged"}))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{what} (write): {body}");
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
}

struct Signed {
    app: TestApp,
    branch: Uuid,
    user: Uuid,
    token: String,
    secret: String,
}

async fn signed_admin() -> Signed {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (user, token) = app.signed_in(branch, Role::Admin).await;
    let secret = app.config.auth.jwt_secret.clone();
    // Control: the genuine token and a token forged with the real secret and
    // genuine claims both work, so every 401 below is the attack's doing.
    assert_eq!(app.get("/auth/me", &token).await.0, StatusCode::OK);
    let genuine = sign_hs(
        Algorithm::HS256,
        &claims(&app, user.id, branch, &token),
        &secret,
    );
    assert_eq!(app.get("/auth/me", &genuine).await.0, StatusCode::OK);
    Signed {
        app,
        branch,
        user: user.id,
        token,
        secret,
    }
}

#[tokio::test]
async fn alg_none_in_every_spelling_is_401() {
    let s = signed_admin().await;
    let c = claims(&s.app, s.user, s.branch, &s.token);
    for alg in ["none", "None", "NONE", "nOnE"] {
        let header = json!({"alg": alg, "typ": "JWT"});
        let unsigned = format!(
            "{}.{}.",
            b64(header.to_string().as_bytes()),
            b64(c.to_string().as_bytes())
        );
        expect_401(&s.app, &unsigned, &format!("alg {alg}, no signature")).await;
        // `none` with a valid HMAC of the real secret attached is still refused.
        let hmac = with_header(&header, &c, &s.secret);
        expect_401(&s.app, &hmac, &format!("alg {alg} with an HMAC")).await;
    }
}

#[tokio::test]
async fn hs_rs_confusion_and_other_algorithms_are_401() {
    let s = signed_admin().await;
    let c = claims(&s.app, s.user, s.branch, &s.token);
    // A genuinely RS256-signed token.
    let rsa = EncodingKey::from_rsa_pem(TEST_ONLY_RSA_KEY.as_bytes()).unwrap();
    let rs256 = encode(&Header::new(Algorithm::RS256), &c, &rsa).unwrap();
    expect_401(&s.app, &rs256, "RS256-signed").await;
    // RS-declared headers carrying an HMAC made with the real secret: the
    // algorithm is pinned, so the header cannot pick the verifier.
    for alg in ["RS256", "RS512", "PS256", "ES256", "EdDSA"] {
        let token = with_header(&json!({"alg": alg, "typ": "JWT"}), &c, &s.secret);
        expect_401(&s.app, &token, &format!("{alg}-declared HMAC")).await;
    }
    // Another HMAC algorithm with the right secret is not HS256.
    for alg in [Algorithm::HS384, Algorithm::HS512] {
        expect_401(&s.app, &sign_hs(alg, &c, &s.secret), &format!("{alg:?}")).await;
    }
    // Header injection (`jwk`, `jku`, `kid`) changes nothing: the key is ours.
    let token = with_header(
        &json!({"alg": "HS256", "typ": "JWT", "kid": "../../dev/null", "jku": "http://127.0.0.1:1/keys"}),
        &c,
        "",
    );
    expect_401(&s.app, &token, "empty key with kid/jku").await;
}

#[tokio::test]
async fn tampered_payload_and_wrong_signature_are_401() {
    let s = signed_admin().await;
    let parts: Vec<&str> = s.token.split('.').collect();
    assert_eq!(parts.len(), 3);
    // Role, subject and branch swapped, signature kept.
    for (key, value) in [
        ("role", json!("auditor")),
        ("sub", json!(Uuid::now_v7().to_string())),
        ("branch_id", json!(Uuid::now_v7().to_string())),
        ("exp", json!(chrono::Utc::now().timestamp() + 86_400 * 365)),
    ] {
        let mut payload: Value = serde_json::from_slice(&unb64(parts[1])).unwrap();
        payload[key] = value;
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            b64(payload.to_string().as_bytes()),
            parts[2]
        );
        expect_401(&s.app, &tampered, &format!("tampered {key}")).await;
    }
    // One signature byte flipped.
    let mut sig = unb64(parts[2]);
    sig[0] ^= 0x01;
    let flipped = format!("{}.{}.{}", parts[0], parts[1], b64(&sig));
    expect_401(&s.app, &flipped, "flipped signature bit").await;
    // Signature stripped.
    expect_401(
        &s.app,
        &format!("{}.{}.", parts[0], parts[1]),
        "no signature",
    )
    .await;
    // Signed with another secret, or an empty one.
    let c = claims(&s.app, s.user, s.branch, &s.token);
    for secret in ["another-secret", ""] {
        expect_401(
            &s.app,
            &sign_hs(Algorithm::HS256, &c, secret),
            &format!("secret {secret:?}"),
        )
        .await;
    }
    // Not a JWT at all, or too many parts.
    for junk in ["x", "a.b", "a.b.c.d", &format!("{}.extra", s.token)] {
        expect_401(&s.app, junk, junk).await;
    }
}

#[tokio::test]
async fn expired_not_yet_valid_and_missing_time_claims_are_401() {
    let s = signed_admin().await;
    let leeway = s.app.config.auth.leeway_secs as i64;
    let now = chrono::Utc::now().timestamp();
    let mut cases = Vec::new();
    // Expired beyond the leeway.
    let mut c = claims(&s.app, s.user, s.branch, &s.token);
    c["iat"] = json!(now - 7200);
    c["nbf"] = json!(now - 7200);
    c["exp"] = json!(now - leeway - 5);
    cases.push(("expired", c));
    // Not yet valid beyond the leeway.
    let mut c = claims(&s.app, s.user, s.branch, &s.token);
    c["nbf"] = json!(now + leeway + 120);
    cases.push(("nbf in the future", c));
    // Each required time claim missing.
    for missing in ["exp", "nbf", "iat"] {
        let mut c = claims(&s.app, s.user, s.branch, &s.token);
        c.as_object_mut().unwrap().remove(missing);
        cases.push((missing, c));
    }
    for (what, c) in cases {
        expect_401(
            &s.app,
            &sign_hs(Algorithm::HS256, &c, &s.secret),
            &format!("{what} (with the real secret)"),
        )
        .await;
    }
    // Within the leeway both still pass: the leeway is explicit, not zero.
    let mut c = claims(&s.app, s.user, s.branch, &s.token);
    c["exp"] = json!(now - leeway / 2);
    let (status, body) = s
        .app
        .get("/auth/me", &sign_hs(Algorithm::HS256, &c, &s.secret))
        .await;
    assert_eq!(status, StatusCode::OK, "expiry within the leeway: {body}");
}

#[tokio::test]
async fn wrong_issuer_audience_type_and_subject_are_401() {
    let s = signed_admin().await;
    let mut cases = Vec::new();
    for (key, value) in [
        ("iss", json!("someone-else")),
        ("iss", json!("")),
        ("aud", json!("another-api")),
        ("aud", json!(["another-api"])),
        ("typ", json!("refresh")),
        ("sub", json!("not-a-uuid")),
        ("sub", json!(Uuid::now_v7().to_string())),
    ] {
        let mut c = claims(&s.app, s.user, s.branch, &s.token);
        c[key] = value.clone();
        cases.push((format!("{key} = {value}"), c));
    }
    for key in ["iss", "aud", "sub", "typ"] {
        let mut c = claims(&s.app, s.user, s.branch, &s.token);
        c.as_object_mut().unwrap().remove(key);
        cases.push((format!("{key} missing"), c));
    }
    for (what, c) in cases {
        expect_401(&s.app, &sign_hs(Algorithm::HS256, &c, &s.secret), &what).await;
    }
}

#[tokio::test]
async fn tokens_of_deleted_and_deactivated_users_are_401() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let (_, admin) = app.signed_in(branch, Role::Admin).await;

    // Deleted through the API (soft delete: is_deleted, is_active false).
    let (deleted, token) = app.signed_in(branch, Role::Pharmacist).await;
    let (_, login) = app.login(&deleted.email, PASSWORD).await;
    let refresh = login["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(app.get("/auth/me", &token).await.0, StatusCode::OK);
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/users/{}", deleted.id),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    expect_401(&app, &token, "deleted user").await;
    let (status, body) = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": refresh})),
        )
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);

    // Deactivated only (is_active false, not deleted), directly in the database.
    let (inactive, token) = app.signed_in(branch, Role::Cashier).await;
    let (_, login) = app.login(&inactive.email, PASSWORD).await;
    let refresh = login["refresh_token"].as_str().unwrap().to_owned();
    app.pool
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE users SET is_active = false WHERE id = $1",
            &[&inactive.id],
        )
        .await
        .unwrap();
    expect_401(&app, &token, "deactivated user").await;
    let (status, body) = app
        .call(
            Method::POST,
            "/auth/refresh",
            None,
            Some(json!({"refresh_token": refresh})),
        )
        .await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    let (status, body) = app.login(&inactive.email, PASSWORD).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
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

/// A reused refresh token means it leaked: the replay is refused and every
/// session of the user ends (its other tills too), refresh and access
/// tokens alike.
#[tokio::test]
async fn a_reused_refresh_token_is_401_and_ends_every_session_of_its_user() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Cashier).await;
    // Two sign-ins: two independent families (two tills).
    let (_, a) = app.login(&user.email, PASSWORD).await;
    let (_, b) = app.login(&user.email, PASSWORD).await;
    let a1 = a["refresh_token"].as_str().unwrap().to_owned();
    let b1 = b["refresh_token"].as_str().unwrap().to_owned();
    let b_access = b["access_token"].as_str().unwrap().to_owned();

    let (status, pair) = refresh(&app, &a1).await;
    assert_eq!(status, StatusCode::OK, "{pair}");
    let a2 = pair["refresh_token"].as_str().unwrap().to_owned();
    let (status, pair) = refresh(&app, &a2).await;
    assert_eq!(status, StatusCode::OK, "{pair}");
    let a3 = pair["refresh_token"].as_str().unwrap().to_owned();
    let a3_access = pair["access_token"].as_str().unwrap().to_owned();

    // An attacker replays the stolen, already rotated a1.
    let (status, body) = refresh(&app, &a1).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    // The whole family ends: the legitimate newest token no longer works.
    let (status, body) = refresh(&app, &a3).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    let client = app.pool.get().await.unwrap();
    let live: i64 = client
        .query_one(
            "SELECT count(*) FROM refresh_tokens WHERE user_id = $1 AND revoked_at IS NULL AND used_at IS NULL",
            &[&user.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(live, 0, "no refresh token of the user is left");
    // The other family ends too, and every access token with it.
    let (status, body) = refresh(&app, &b1).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    expect_401(&app, &a3_access, "access token of the reused family").await;
    expect_401(&app, &b_access, "access token of another session").await;
    // Signing in again works.
    assert_eq!(app.login(&user.email, PASSWORD).await.0, StatusCode::OK);
    // Unknown, empty and malformed refresh tokens are 401 or 400, never 500.
    for junk in [json!("0".repeat(64)), json!("")] {
        let (status, body) = app
            .call(
                Method::POST,
                "/auth/refresh",
                None,
                Some(json!({"refresh_token": junk})),
            )
            .await;
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    }
}

#[tokio::test]
async fn access_and_refresh_tokens_are_not_interchangeable() {
    let app = TestApp::spawn().await;
    let branch = app.branch("B1").await;
    let user = app.user(branch, Role::Admin).await;
    let (_, login) = app.login(&user.email, PASSWORD).await;
    let access = login["access_token"].as_str().unwrap().to_owned();
    let refresh_token = login["refresh_token"].as_str().unwrap().to_owned();
    // An access token presented as a refresh token.
    let (status, body) = refresh(&app, &access).await;
    assert_problem(status, &body, StatusCode::UNAUTHORIZED);
    // A refresh token presented as a bearer token.
    expect_401(&app, &refresh_token, "refresh token as bearer").await;
    // Neither attempt spent the refresh token.
    let (status, body) = refresh(&app, &refresh_token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn malformed_authorization_headers_are_401_with_detail() {
    let s = signed_admin().await;
    for header in [
        String::new(),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
        format!("Basic {}", s.token),
        format!("Token {}", s.token),
        s.token.clone(),
    ] {
        let res = s
            .app
            .http
            .get(format!("{}/auth/me", s.app.base))
            .header("Authorization", header.clone())
            .send()
            .await
            .unwrap();
        let status = res.status();
        let content_type = res
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert_problem(status, &body, StatusCode::UNAUTHORIZED);
        assert_eq!(
            content_type.as_deref(),
            Some("application/problem+json"),
            "header {header:?}"
        );
    }
}
