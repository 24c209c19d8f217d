//! `/auth`: login, refresh-token rotation, logout, password change and
//! who-am-I.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{Duration, Utc};
use deadpool_postgres::GenericClient;
use sea_query::Query;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{passwords, tokens, Caller};
use crate::http::extract::{client_address, Json};
use crate::state::AppState;
use domain::error::Problem;
use domain::users::rate_limits;
use domain::users::sessions;
use domain::{audit, users};
use domain::{db, input, Error, Result};

use actix_web::{get, post};
use utoipa_actix_web::service_config::ServiceConfig;

pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(login)
        .service(refresh)
        .service(logout)
        .service(change_password)
        .service(me);
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginRequest {
    pub email: String,
    pub password: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RefreshRequest {
    pub refresh_token: String,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct LogoutRequest {
    /// Optional: a refresh token of the caller; its session ends too (for a
    /// client that holds it apart from the access token).
    pub refresh_token: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct PasswordChange {
    /// The password in use now.
    pub current_password: String,
    /// At least 8 characters, not the current password.
    #[schema(min_length = 8)]
    pub new_password: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenResponse {
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: String,
    /// Access token lifetime in seconds.
    pub expires_in: i64,
    /// Single-use: each refresh returns a new one.
    pub refresh_token: String,
    pub user: users::User,
}

const BAD_CREDENTIALS: &str = "The email or password is incorrect.";

/// Claims one failed-attempt slot per email and per client address before a
/// password is checked (429 when either window is full). The claim counts as
/// a failure unless the caller releases it: a success gives it back, so only
/// failures fill the window, and never more of them than the limit, however
/// many attempts run at once.
async fn claim_attempt<C: GenericClient + Sync>(
    client: &C,
    state: &AppState,
    req: &HttpRequest,
    email: &str,
) -> Result<rate_limits::Claim> {
    let cfg = &state.config.auth;
    let email_key = format!("login:email:{email}");
    let addr_key = format!(
        "login:addr:{}",
        client_address(req, state.config.http.trust_forwarded_for)
    );
    let window = cfg.login_window_secs;
    // Email before address, always: one lock order for every claim.
    let claim = rate_limits::claim(client, &[&email_key, &addr_key], window).await?;
    if claim.over(&[cfg.login_failures_per_email, cfg.login_failures_per_address]) {
        // Refused before any check: the attempt does not count.
        rate_limits::release(client, &claim).await?;
        return Err(Error::TooManyRequests {
            detail: "Too many failed sign-in attempts; wait a few minutes and try again."
                .to_owned(),
            retry_after: rate_limits::retry_after(window),
        });
    }
    Ok(claim)
}

/// Sign in with email and password.
///
/// Failed attempts are limited per email and per client address in a fixed
/// window; an attempt holds its slot while its password is checked and gives
/// it back when it succeeds.
#[utoipa::path(tag = "auth", request_body = LoginRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 429, body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds until the window ends"))),
    ))]
#[post("/auth/login")]
pub async fn login(
    state: web::Data<AppState>,
    req: HttpRequest,
    Json(body): Json<LoginRequest>,
) -> Result<HttpResponse> {
    let creds = check_password(&state, &req, &body.email, body.password).await?;
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    let user = users::touch_login(&tx, creds.user.id)
        .await?
        .unwrap_or(creds.user);
    // The session carries the version read with the hash that was checked:
    // a change committed since then has already ended it.
    let session = sessions::open(&tx, user.id, creds.token_version).await?;
    let response = issue_pair(
        &tx,
        &state,
        user,
        creds.org_id,
        session,
        creds.token_version,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(response))
}

/// Checks an email and password under the login rate limits (the API's
/// login and the console's sign-in both go through here): the credentials
/// of an active user whose password matches, else 401 (the attempt counts)
/// or 429.
pub(crate) async fn check_password(
    state: &AppState,
    req: &HttpRequest,
    email: &str,
    password: String,
) -> Result<users::Credentials> {
    let email = input::text("email", email, input::max::EMAIL)?.to_lowercase();
    let (claim, creds) = {
        let client = state.pool.get().await?;
        let claim = claim_attempt(&client, state, req, &email).await?;
        (claim, users::credentials(&client, &email).await?)
    };
    // No connection is held while the password is hashed.
    let (hash, usable) = match &creds {
        Some(c) => (
            c.password_hash.clone(),
            c.user.is_active && !c.user.is_deleted,
        ),
        None => (passwords::decoy_hash().to_owned(), false),
    };
    let matches = passwords::verify_blocking(password, hash).await;
    let Some(creds) = creds.filter(|_| matches && usable) else {
        // The claimed slot stays taken: this is a failure of the window.
        return Err(Error::Unauthorized(BAD_CREDENTIALS.to_owned()));
    };
    let client = state.pool.get().await?;
    rate_limits::release(&client, &claim).await?;
    Ok(creds)
}

/// Issues an access token and a new refresh token in `session`.
async fn issue_pair<C: GenericClient + Sync>(
    client: &C,
    state: &AppState,
    user: users::User,
    org_id: Uuid,
    session: Uuid,
    token_version: i64,
) -> Result<TokenResponse> {
    let access = state.tokens.issue_access(
        user.id,
        user.role,
        user.branch_id,
        org_id,
        session,
        token_version,
    )?;
    let (refresh_token, digest) = tokens::new_refresh_token();
    let q = Query::insert()
        .into_table("refresh_tokens")
        .columns(["token_hash", "user_id", "family_id", "expires_at"])
        .values_panic([
            digest.into(),
            user.id.into(),
            session.into(),
            (Utc::now() + Duration::seconds(state.tokens.refresh_ttl_secs)).into(),
        ])
        .to_owned();
    db::execute(client, &q).await?;
    Ok(TokenResponse {
        access_token: access,
        token_type: "bearer".to_owned(),
        expires_in: state.tokens.access_ttl_secs,
        refresh_token,
        user,
    })
}

/// Exchange a refresh token for a new pair. Each refresh token works once;
/// presenting a used one ends every session and token of its user.
#[utoipa::path(tag = "auth", request_body = RefreshRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
#[post("/auth/refresh")]
pub async fn refresh(
    state: web::Data<AppState>,
    Json(body): Json<RefreshRequest>,
) -> Result<HttpResponse> {
    let digest = tokens::refresh_digest(body.refresh_token.trim());
    let mut client = state.pool.get().await?;
    let unauthorized =
        || Error::Unauthorized("The refresh token is invalid, expired or already used.".to_owned());
    let tx = client.transaction().await?;
    // Checking and consuming the token is one statement: two concurrent
    // refreshes with the same token cannot both succeed, and a token of a
    // logged-out session or of an older token version does not pass.
    let Some(consumed) = sessions::consume(&tx, digest.clone()).await? else {
        tx.rollback().await?;
        if let Some((user, session)) = sessions::end_all_on_reuse(&client, digest).await? {
            tracing::warn!(%user, %session, "refresh token reused; every token of the user ended");
        }
        return Err(unauthorized());
    };
    let creds = users::credentials_of(&tx, consumed.user_id)
        .await?
        .ok_or_else(unauthorized)?;
    let response = issue_pair(
        &tx,
        &state,
        creds.user,
        creds.org_id,
        consumed.session_id,
        consumed.token_version,
    )
    .await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(response))
}

/// Sign out: ends the session of the bearer token, that is its access
/// tokens and its refresh-token family, at once. A `refresh_token` of the
/// caller given in the body ends its session too. Other sessions of the
/// user (other tills) stay signed in.
#[utoipa::path(tag = "auth", security(("bearer" = [])),
    request_body(content = Option<LogoutRequest>, description = "May be omitted"),
    responses(
        (status = 204, description = "Signed out"),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
#[post("/auth/logout")]
pub async fn logout(
    state: web::Data<AppState>,
    caller: Caller,
    Json(body): Json<LogoutRequest>,
) -> Result<HttpResponse> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    sessions::revoke(&tx, caller.session_id).await?;
    if let Some(token) = body.refresh_token.as_deref().map(str::trim) {
        let digest = tokens::refresh_digest(token);
        // Another user's token is ignored: logout reveals nothing about it.
        if let Some(session) = sessions::of_refresh_token(&tx, digest, caller.user_id).await? {
            if session != caller.session_id {
                sessions::revoke(&tx, session).await?;
            }
        }
    }
    tx.commit().await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Change the signed-in user's own password (any role). `current_password`
/// must be right (a wrong one is a 400 naming it, and counts as a failed
/// sign-in attempt of the account: 429 when the window is full);
/// `new_password` follows the rules of user creation. Every token of the
/// user ends, on every till, and the answer is a fresh pair in a new session
/// (the shape of a login), so the caller stays signed in.
#[utoipa::path(tag = "auth", security(("bearer" = [])),
    request_body = PasswordChange,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 429, body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds until the window ends"))),
    ))]
#[post("/auth/password")]
pub async fn change_password(
    state: web::Data<AppState>,
    req: HttpRequest,
    caller: Caller,
    Json(body): Json<PasswordChange>,
) -> Result<HttpResponse> {
    passwords::validate_new_as(&body.new_password, "new_password")?;
    if body.new_password == body.current_password {
        return Err(Error::validation(
            "new_password",
            "`new_password` must differ from the current password.",
        ));
    }
    let ended = || Error::Unauthorized("This account is no longer active.".to_owned());
    let (claim, creds) = {
        let client = state.pool.get().await?;
        let creds = users::credentials_of(&client, caller.user_id)
            .await?
            .ok_or_else(ended)?;
        let claim = claim_attempt(&client, &state, &req, &creds.user.email).await?;
        (claim, creds)
    };
    let matches =
        passwords::verify_blocking(body.current_password, creds.password_hash.clone()).await;
    if !matches {
        // The claimed slot stays taken: a wrong guess counts.
        return Err(Error::validation(
            "current_password",
            "`current_password` is not the current password.",
        ));
    }
    let hash = passwords::hash_blocking(body.new_password).await?;
    let mut client = state.pool.get().await?;
    rate_limits::release(&client, &claim).await?;
    let tx = client.transaction().await?;
    // Conditional on the token version the caller's token carries: a change
    // that ended this sign-in meanwhile wins, and this one is a 401.
    let (user, version) = users::set_password(&tx, caller.user_id, hash, caller.token_version)
        .await?
        .ok_or_else(|| Error::Unauthorized("This sign-in has ended. Sign in again.".to_owned()))?;
    users::revoke_refresh_tokens(&tx, user.id).await?;
    audit::write(
        &tx,
        audit::Entry {
            actor_id: Some(caller.user_id),
            action: "user.password_change",
            entity_type: "user",
            entity_id: user.id.to_string(),
            before: None,
            after: serde_json::to_value(&user).ok(),
        },
    )
    .await?;
    let session = sessions::open(&tx, user.id, version).await?;
    let response = issue_pair(&tx, &state, user, creds.org_id, session, version).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(response))
}

/// The signed-in user.
#[utoipa::path(tag = "auth", security(("bearer" = [])),
    responses(
        (status = 200, body = users::User),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
#[get("/auth/me")]
pub async fn me(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    let client = state.pool.get().await?;
    let user = users::get(&client, caller.user_id)
        .await?
        .ok_or_else(|| Error::Unauthorized("This account is no longer active.".to_owned()))?;
    Ok(HttpResponse::Ok().json(user))
}
