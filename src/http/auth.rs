//! `/auth`: login, refresh-token rotation, logout, password change and
//! who-am-I.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::{tokens, Caller};
use crate::http::extract::{client_address, Json};
use crate::state::AppState;
use domain::error::Problem;
use domain::users;
use domain::users::sign_in::{self, TokenResponse};
use domain::{Error, Result};

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
    /// At least 8 characters (at most 256 bytes), not the current password.
    pub new_password: String,
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
    let address = client_address(&req, state.config.http.trust_forwarded_for);
    let limits = state.config.auth.login_limits();
    let creds =
        sign_in::check_password(&state.pool, limits, &address, &body.email, body.password).await?;
    let response = sign_in::login(&state.pool, &state.tokens, creds).await?;
    Ok(HttpResponse::Ok().json(response))
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
    let response = sign_in::refresh(&state.pool, &state.tokens, digest).await?;
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
    let other = body
        .refresh_token
        .as_deref()
        .map(|token| tokens::refresh_digest(token.trim()));
    sign_in::logout(&state.pool, caller.user_id, caller.session_id, other).await?;
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
    let address = client_address(&req, state.config.http.trust_forwarded_for);
    let change = sign_in::OwnPasswordChange {
        user_id: caller.user_id,
        token_version: caller.token_version,
        address: &address,
        current_password: body.current_password,
        new_password: body.new_password,
    };
    let limits = state.config.auth.login_limits();
    let response = sign_in::change_password(&state.pool, &state.tokens, limits, change).await?;
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
