//! Signing in and out: the password check under the login rate limits, the
//! token pair of a sign-in, its rotation, logout, a password change, and
//! the console's browser sessions. The API's `/auth` and the console's
//! sign-in both go through here; the web layer signs the tokens
//! ([`TokenIssuer`]) and reads the client's address.

use crate::tables::Table;
use chrono::{Duration, Utc};
use deadpool_postgres::GenericClient;
use sea_query::Query;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::console_sessions::{self, ConsoleSession, Lifetime};
use super::{credentials, credentials_of, passwords, rate_limits, sessions};
use super::{revoke_refresh_tokens, set_password, touch_login, Credentials, User};
use crate::db::{self, Pool};
use crate::{audit, input, Error, Result};

/// What signs a sign-in's tokens: the web layer's keys (the domain keeps
/// the rows, not the signing secret).
pub trait TokenIssuer {
    /// A signed access token of `user` in `session` at `token_version`.
    fn access_token(
        &self,
        user: &User,
        org_id: Uuid,
        session: Uuid,
        token_version: i64,
    ) -> Result<String>;
    /// A fresh opaque refresh token and the digest stored for it.
    fn refresh_token(&self) -> (String, Vec<u8>);
    /// Access token lifetime in seconds.
    fn access_ttl_secs(&self) -> i64;
    /// Refresh token lifetime in seconds.
    fn refresh_ttl_secs(&self) -> i64;
}

/// The login rate limits: failed attempts per email and per client
/// address in a fixed window.
#[derive(Debug, Clone, Copy)]
pub struct LoginLimits {
    pub failures_per_email: i32,
    pub failures_per_address: i32,
    pub window_secs: i64,
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
    pub user: User,
}

const BAD_CREDENTIALS: &str = "The email or password is incorrect.";

/// Claims one failed-attempt slot per email and per client address before a
/// password is checked (429 when either window is full). The claim counts as
/// a failure unless the caller releases it: a success gives it back, so only
/// failures fill the window, and never more of them than the limit, however
/// many attempts run at once.
async fn claim_attempt<C: GenericClient + Sync>(
    client: &C,
    limits: LoginLimits,
    address: &str,
    email: &str,
) -> Result<rate_limits::Claim> {
    let email_key = format!("login:email:{email}");
    let addr_key = format!("login:addr:{address}");
    let window = limits.window_secs;
    // Email before address, always: one lock order for every claim.
    let claim = rate_limits::claim(client, &[&email_key, &addr_key], window).await?;
    if claim.over(&[limits.failures_per_email, limits.failures_per_address]) {
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

/// Checks an email and password from `address` under the login rate limits
/// (the API's login and the console's sign-in both go through here): the
/// credentials of an active user whose password matches, else 401 (the
/// attempt counts) or 429.
pub async fn check_password(
    pool: &Pool,
    limits: LoginLimits,
    address: &str,
    email: &str,
    password: String,
) -> Result<Credentials> {
    let email = input::text("email", email, input::max::EMAIL)?.to_lowercase();
    let (claim, creds) = {
        let client = pool.get().await?;
        let claim = claim_attempt(&client, limits, address, &email).await?;
        (claim, credentials(&client, &email).await?)
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
    let client = pool.get().await?;
    rate_limits::release(&client, &claim).await?;
    Ok(creds)
}

/// Issues an access token and a new refresh token in `session`.
async fn issue_pair<C: GenericClient + Sync>(
    client: &C,
    issuer: &impl TokenIssuer,
    user: User,
    org_id: Uuid,
    session: Uuid,
    token_version: i64,
) -> Result<TokenResponse> {
    let access = issuer.access_token(&user, org_id, session, token_version)?;
    let (refresh_token, digest) = issuer.refresh_token();
    let q = Query::insert()
        .into_table(Table::RefreshTokens)
        .columns(["token_hash", "user_id", "family_id", "expires_at"])
        .values_panic([
            digest.into(),
            user.id.into(),
            session.into(),
            (Utc::now() + Duration::seconds(issuer.refresh_ttl_secs())).into(),
        ])
        .to_owned();
    db::execute(client, &q).await?;
    Ok(TokenResponse {
        access_token: access,
        token_type: "bearer".to_owned(),
        expires_in: issuer.access_ttl_secs(),
        refresh_token,
        user,
    })
}

/// Opens a session for checked credentials and answers its token pair.
pub async fn login(
    pool: &Pool,
    issuer: &impl TokenIssuer,
    creds: Credentials,
) -> Result<TokenResponse> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let user = touch_login(&tx, creds.user.id).await?.unwrap_or(creds.user);
    // The session carries the version read with the hash that was checked:
    // a change committed since then has already ended it.
    let session = sessions::open(&tx, user.id, creds.token_version).await?;
    let response = issue_pair(
        &tx,
        issuer,
        user,
        creds.org_id,
        session,
        creds.token_version,
    )
    .await?;
    crate::db::commit(tx).await?;
    Ok(response)
}

/// Exchanges the refresh token of `digest` for a new pair. Each refresh
/// token works once; presenting a used one ends every session and token of
/// its user.
pub async fn refresh(
    pool: &Pool,
    issuer: &impl TokenIssuer,
    digest: Vec<u8>,
) -> Result<TokenResponse> {
    let mut client = pool.get().await?;
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
    let creds = credentials_of(&tx, consumed.user_id)
        .await?
        .ok_or_else(unauthorized)?;
    let response = issue_pair(
        &tx,
        issuer,
        creds.user,
        creds.org_id,
        consumed.session_id,
        consumed.token_version,
    )
    .await?;
    crate::db::commit(tx).await?;
    Ok(response)
}

/// Ends `session` of `user_id`, and the session of the refresh token of
/// `other` too when it is that user's (another user's token is ignored:
/// logout reveals nothing about it).
pub async fn logout(
    pool: &Pool,
    user_id: Uuid,
    session: Uuid,
    other: Option<Vec<u8>>,
) -> Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    sessions::revoke(&tx, session).await?;
    if let Some(digest) = other {
        if let Some(found) = sessions::of_refresh_token(&tx, digest, user_id).await? {
            if found != session {
                sessions::revoke(&tx, found).await?;
            }
        }
    }
    crate::db::commit(tx).await?;
    Ok(())
}

/// A password change asked by the signed-in user.
pub struct OwnPasswordChange<'a> {
    pub user_id: Uuid,
    /// The token version the caller's token carries.
    pub token_version: i64,
    /// The client's address, for the login rate limits.
    pub address: &'a str,
    pub current_password: String,
    pub new_password: String,
}

/// Changes the signed-in user's own password: `current_password` must be
/// right (a wrong one is a 400 naming it, and counts as a failed sign-in
/// attempt of the account: 429 when the window is full); `new_password`
/// follows the rules of user creation. Every token of the user ends, and
/// the answer is a fresh pair in a new session.
pub async fn change_password(
    pool: &Pool,
    issuer: &impl TokenIssuer,
    limits: LoginLimits,
    change: OwnPasswordChange<'_>,
) -> Result<TokenResponse> {
    passwords::validate_new_as(&change.new_password, "new_password")?;
    if change.new_password == change.current_password {
        return Err(Error::validation(
            "new_password",
            "`new_password` must differ from the current password.",
        ));
    }
    let ended = || Error::Unauthorized("This account is no longer active.".to_owned());
    let (claim, creds) = {
        let client = pool.get().await?;
        let creds = credentials_of(&client, change.user_id)
            .await?
            .ok_or_else(ended)?;
        let claim = claim_attempt(&client, limits, change.address, &creds.user.email).await?;
        (claim, creds)
    };
    let matches =
        passwords::verify_blocking(change.current_password, creds.password_hash.clone()).await;
    if !matches {
        // The claimed slot stays taken: a wrong guess counts.
        return Err(Error::validation(
            "current_password",
            "`current_password` is not the current password.",
        ));
    }
    let hash = passwords::hash_blocking(change.new_password).await?;
    let mut client = pool.get().await?;
    rate_limits::release(&client, &claim).await?;
    let tx = client.transaction().await?;
    // Conditional on the token version the caller's token carries: a change
    // that ended this sign-in meanwhile wins, and this one is a 401.
    let (user, version) = set_password(&tx, change.user_id, hash, change.token_version)
        .await?
        .ok_or_else(|| Error::Unauthorized("This sign-in has ended. Sign in again.".to_owned()))?;
    revoke_refresh_tokens(&tx, user.id).await?;
    audit::write(
        &tx,
        audit::Entry {
            actor_id: Some(change.user_id),
            action: "user.password_change",
            entity_type: "user",
            entity_id: user.id.to_string(),
            before: None,
            after: serde_json::to_value(&user).ok(),
        },
    )
    .await?;
    let session = sessions::open(&tx, user.id, version).await?;
    let response = issue_pair(&tx, issuer, user, creds.org_id, session, version).await?;
    crate::db::commit(tx).await?;
    Ok(response)
}

/// Opens a console (browser) session of `digest` for checked credentials,
/// with the sign-in it rides on, and its form token `csrf`.
pub async fn open_console(
    pool: &Pool,
    creds: &Credentials,
    digest: Vec<u8>,
    csrf: String,
    life: Lifetime,
) -> Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let user_id = touch_login(&tx, creds.user.id)
        .await?
        .map_or(creds.user.id, |u| u.id);
    let auth_session = sessions::open(&tx, user_id, creds.token_version).await?;
    let session = ConsoleSession {
        auth_session_id: auth_session,
        user_id,
        token_version: creds.token_version,
        csrf_token: csrf,
    };
    console_sessions::open(&tx, digest, &session, life).await?;
    crate::db::commit(tx).await?;
    Ok(())
}

/// Ends the console session of `digest` and the sign-in it rode on.
pub async fn end_console(pool: &Pool, digest: Vec<u8>) -> Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    if let Some(auth_session) = console_sessions::remove(&tx, digest).await? {
        sessions::revoke(&tx, auth_session).await?;
    }
    crate::db::commit(tx).await?;
    Ok(())
}
