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

/// Stores a new console session under the digest of its cookie token, and
/// removes every session idle for longer than `idle_secs` (they can no
/// longer be used).
pub async fn open<C: GenericClient + Sync>(
    c: &C,
    digest: Vec<u8>,
    s: &ConsoleSession,
    idle_secs: i64,
) -> Result<()> {
    let (auth, user, version, csrf) = (
        s.auth_session_id,
        s.user_id,
        s.token_version,
        s.csrf_token.clone(),
    );
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH gone AS (DELETE FROM console_sessions
                         WHERE last_seen_at < now() - {idle_secs}::bigint * interval '1 second')
           INSERT INTO console_sessions (token_hash, auth_session_id, user_id, token_version, csrf_token)
           VALUES ({digest}, {auth}, {user}, {version}, {csrf})"#
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(())
}

/// The session of `digest` if it was used within the last `idle_secs`,
/// marking it used now; `None` when there is none or it sat idle too long
/// (checked and moved on in one conditional update).
pub async fn touch<C: GenericClient + Sync>(
    c: &C,
    digest: Vec<u8>,
    idle_secs: i64,
) -> Result<Option<ConsoleSession>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE console_sessions SET last_seen_at = now()
           WHERE token_hash = {digest}
             AND last_seen_at >= now() - {idle_secs}::bigint * interval '1 second'
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
