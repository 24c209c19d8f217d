//! `/auth`: login, refresh-token rotation, and who-am-I.

use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{Duration, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{passwords, tokens, Caller};
use crate::http::extract::{client_address, Json};
use crate::state::AppState;
use crate::store::{rate_limits, users};
use actors::error::Problem;
use actors::{db, input, Error, Result};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/auth/login").route(web::post().to(login)))
        .service(web::resource("/auth/refresh").route(web::post().to(refresh)))
        .service(web::resource("/auth/me").route(web::get().to(me)));
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

/// Sign in with email and password.
#[utoipa::path(post, path = "/api/v1/auth/login", tag = "auth", request_body = LoginRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 429, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn login(
    state: web::Data<AppState>,
    req: HttpRequest,
    Json(body): Json<LoginRequest>,
) -> Result<HttpResponse> {
    let cfg = &state.config.auth;
    let email = input::text("email", &body.email, input::max::EMAIL)?.to_lowercase();
    let email_key = format!("login:email:{email}");
    let addr_key = format!(
        "login:addr:{}",
        client_address(&req, state.config.http.trust_forwarded_for)
    );
    let mut client = state.pool.get().await?;
    let window = cfg.login_window_secs;
    if rate_limits::count(&client, &email_key, window).await? >= cfg.login_failures_per_email
        || rate_limits::count(&client, &addr_key, window).await? >= cfg.login_failures_per_address
    {
        return Err(Error::TooManyRequests {
            detail: "Too many failed sign-in attempts; wait a few minutes and try again."
                .to_owned(),
            retry_after: rate_limits::retry_after(window),
        });
    }
    let creds = users::credentials(&client, &email).await?;
    let (hash, usable) = match &creds {
        Some(c) => (
            c.password_hash.clone(),
            c.user.is_active && !c.user.is_deleted,
        ),
        None => (passwords::decoy_hash().to_owned(), false),
    };
    let matches = passwords::verify_blocking(body.password, hash).await;
    let Some(creds) = creds.filter(|_| matches && usable) else {
        rate_limits::hit(&client, &email_key, window).await?;
        rate_limits::hit(&client, &addr_key, window).await?;
        return Err(Error::Unauthorized(BAD_CREDENTIALS.to_owned()));
    };
    let tx = client.transaction().await?;
    let user = users::touch_login(&tx, creds.user.id)
        .await?
        .unwrap_or(creds.user);
    let response = issue_pair(&tx, &state, user, creds.org_id, Uuid::now_v7()).await?;
    tx.commit().await?;
    Ok(HttpResponse::Ok().json(response))
}

/// Issues an access token and a new refresh token in `family`.
async fn issue_pair<C: GenericClient + Sync>(
    client: &C,
    state: &AppState,
    user: users::User,
    org_id: Uuid,
    family: Uuid,
) -> Result<TokenResponse> {
    let access = state
        .tokens
        .issue_access(user.id, user.role, user.branch_id, org_id)?;
    let (refresh_token, digest) = tokens::new_refresh_token();
    let q = Query::insert()
        .into_table("refresh_tokens")
        .columns(["token_hash", "user_id", "family_id", "expires_at"])
        .values_panic([
            digest.into(),
            user.id.into(),
            family.into(),
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
/// presenting a used one revokes its whole family.
#[utoipa::path(post, path = "/api/v1/auth/refresh", tag = "auth", request_body = RefreshRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn refresh(
    state: web::Data<AppState>,
    Json(body): Json<RefreshRequest>,
) -> Result<HttpResponse> {
    let digest = tokens::refresh_digest(body.refresh_token.trim());
    let client = state.pool.get().await?;
    let now = Utc::now();
    // Checking and consuming the token is one statement: two concurrent
    // refreshes with the same token cannot both succeed.
    let consume = Query::update()
        .table("refresh_tokens")
        .value("used_at", now)
        .and_where(Expr::col("token_hash").eq(digest.clone()))
        .and_where(Expr::col("used_at").is_null())
        .and_where(Expr::col("revoked_at").is_null())
        .and_where(Expr::col("expires_at").gt(now))
        .returning(Query::returning().columns(["user_id", "family_id"]))
        .to_owned();
    let unauthorized =
        || Error::Unauthorized("The refresh token is invalid, expired or already used.".to_owned());
    let Some(row) = db::fetch_opt(&client, &consume).await? else {
        revoke_family_on_reuse(&client, digest).await?;
        return Err(unauthorized());
    };
    let (user_id, family): (Uuid, Uuid) = (row.get(0), row.get(1));
    let user = users::get(&client, user_id)
        .await?
        .filter(|u| u.is_active)
        .ok_or_else(unauthorized)?;
    let org_id = users::org_of(&client, user_id)
        .await?
        .ok_or_else(unauthorized)?;
    let response = issue_pair(&client, &state, user, org_id, family).await?;
    Ok(HttpResponse::Ok().json(response))
}

/// A used token presented again means it leaked: end the whole family.
async fn revoke_family_on_reuse<C: GenericClient + Sync>(
    client: &C,
    digest: Vec<u8>,
) -> Result<()> {
    let q = Query::select()
        .column("family_id")
        .from("refresh_tokens")
        .and_where(Expr::col("token_hash").eq(digest))
        .and_where(Expr::col("used_at").is_not_null())
        .to_owned();
    if let Some(row) = db::fetch_opt(client, &q).await? {
        let family: Uuid = row.get(0);
        let revoke = Query::update()
            .table("refresh_tokens")
            .value("revoked_at", Utc::now())
            .and_where(Expr::col("family_id").eq(family))
            .and_where(Expr::col("revoked_at").is_null())
            .to_owned();
        db::execute(client, &revoke).await?;
        tracing::warn!(%family, "refresh token reused; family revoked");
    }
    Ok(())
}

/// The signed-in user.
#[utoipa::path(get, path = "/api/v1/auth/me", tag = "auth", security(("bearer" = [])),
    responses(
        (status = 200, body = users::User),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn me(state: web::Data<AppState>, caller: Caller) -> Result<HttpResponse> {
    let client = state.pool.get().await?;
    let user = users::get(&client, caller.user_id)
        .await?
        .ok_or_else(|| Error::Unauthorized("This account is no longer active.".to_owned()))?;
    Ok(HttpResponse::Ok().json(user))
}
