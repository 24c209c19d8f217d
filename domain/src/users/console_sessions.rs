//! Browser sessions of the back-office console. A console session rides on
//! a sign-in session (`auth_sessions`), so whatever ends a sign-in ends it;
//! on top it carries the form token (CSRF) and an idle limit, both checked
//! here in single statements.

use deadpool_postgres::GenericClient;
use uuid::Uuid;

use crate::{db, Result};

/// A live console session as a request finds it.
#[derive(Debug, Clone)]
pub struct ConsoleSession {
    pub auth_session_id: Uuid,
    pub user_id: Uuid,
    pub token_version: i64,
    pub csrf_token: String,
}

/// How long a console session lives: it ends after `idle_secs` without a
/// request of the user's, and `max_age_secs` after sign-in whatever it did.
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    pub idle_secs: i64,
    pub max_age_secs: i64,
}

/// Whether a request renews the session's idle clock: a click of the
/// user's does, a page's own background refresh does not (a page left open
/// must still idle out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    ByUser,
    Background,
}

/// Stores a new console session under the digest of its cookie token, and
/// removes every session that can no longer be used (idle or too old).
pub async fn open<C: GenericClient + Sync>(
    c: &C,
    digest: Vec<u8>,
    s: &ConsoleSession,
    life: Lifetime,
) -> Result<()> {
    let (auth, user, version, csrf) = (
        s.auth_session_id,
        s.user_id,
        s.token_version,
        s.csrf_token.clone(),
    );
    let (idle, max_age) = (life.idle_secs, life.max_age_secs);
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH gone AS (DELETE FROM console_sessions
                         WHERE last_seen_at < now() - {idle}::bigint * interval '1 second'
                            OR created_at < now() - {max_age}::bigint * interval '1 second')
           INSERT INTO console_sessions (token_hash, auth_session_id, user_id, token_version, csrf_token)
           VALUES ({digest}, {auth}, {user}, {version}, {csrf})"#
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(())
}

/// The session of `digest` if it was used within the last `idle_secs` and
/// began within `max_age_secs`, marking it used now when the user made the
/// request; `None` when there is none, it sat idle too long or it is too
/// old (checked and moved on in one conditional update).
pub async fn touch<C: GenericClient + Sync>(
    c: &C,
    digest: Vec<u8>,
    life: Lifetime,
    how: Use,
) -> Result<Option<ConsoleSession>> {
    let (idle, max_age) = (life.idle_secs, life.max_age_secs);
    let renew = how == Use::ByUser;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE console_sessions
           SET last_seen_at = CASE WHEN {renew} THEN now() ELSE last_seen_at END
           WHERE token_hash = {digest}
             AND last_seen_at >= now() - {idle}::bigint * interval '1 second'
             AND created_at >= now() - {max_age}::bigint * interval '1 second'
           RETURNING auth_session_id, user_id, token_version, csrf_token"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| ConsoleSession {
            auth_session_id: r.get(0),
            user_id: r.get(1),
            token_version: r.get(2),
            csrf_token: r.get(3),
        }))
}

/// Removes the session of `digest` (sign-out, or found idle) and returns
/// the sign-in session it rode on, for the caller to end.
pub async fn remove<C: GenericClient + Sync>(c: &C, digest: Vec<u8>) -> Result<Option<Uuid>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"DELETE FROM console_sessions WHERE token_hash = {digest} RETURNING auth_session_id"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values).await?.map(|r| r.get(0)))
}
