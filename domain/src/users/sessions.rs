//! Sign-in sessions: one per login, the refresh-token family and the access
//! tokens issued in it (`sid` claim). A revoked session ends both at once.

use crate::tables::Table;
use chrono::Utc;
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, Query};
use uuid::Uuid;

use crate::{db, Error, Result};

/// Opens a session for `user_id` at the user's `token_version` as read with
/// the credentials that were checked (never a later one: a change between
/// the check and this insert must end the new session too).
pub async fn open<C: GenericClient + Sync>(
    c: &C,
    user_id: Uuid,
    token_version: i64,
) -> Result<Uuid> {
    let id = Uuid::now_v7();
    let q = Query::insert()
        .into_table(Table::AuthSessions)
        .columns(["id", "user_id", "token_version"])
        .values_panic([id.into(), user_id.into(), token_version.into()])
        .to_owned();
    db::execute(c, &q).await?;
    Ok(id)
}

/// Ends a session and its refresh tokens, in one statement.
pub async fn revoke<C: GenericClient + Sync>(c: &C, session_id: Uuid) -> Result<()> {
    let now = Utc::now();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH s AS (UPDATE auth_sessions SET revoked_at = {now}
                      WHERE id = {session_id} AND revoked_at IS NULL)
           UPDATE refresh_tokens SET revoked_at = {now}
           WHERE family_id = {session_id} AND revoked_at IS NULL"#
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(())
}

/// The session a refresh token belongs to, when it is `user_id`'s.
pub async fn of_refresh_token<C: GenericClient + Sync>(
    c: &C,
    digest: Vec<u8>,
    user_id: Uuid,
) -> Result<Option<Uuid>> {
    let q = Query::select()
        .column("family_id")
        .from(Table::RefreshTokens)
        .and_where(Expr::col("token_hash").eq(digest))
        .and_where(Expr::col("user_id").eq(user_id))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)))
}

/// What the caller extractor needs to know about a token's user and
/// session, read in one statement.
pub struct TokenState {
    pub role: String,
    pub branch_id: uuid::Uuid,
    pub org_id: uuid::Uuid,
    pub active: bool,
    pub token_version: i64,
    pub session_live: bool,
}

impl TokenState {
    pub fn of(r: &tokio_postgres::Row) -> TokenState {
        TokenState {
            role: r.get("role"),
            branch_id: r.get("branch_id"),
            org_id: r.get("org_id"),
            active: r.get("active"),
            token_version: r.get("token_version"),
            session_live: r.get("session_live"),
        }
    }
}

/// The token state, if a token of `token_version` still stands on it; else
/// the 401 the token gets (the account is gone or inactive, the token's
/// version is not the user's, or its session was signed out).
pub fn standing(state: Option<TokenState>, token_version: i64) -> Result<TokenState> {
    let state = state
        .filter(|r| r.active)
        .ok_or_else(|| Error::Unauthorized("This account is no longer active.".to_owned()))?;
    if state.token_version != token_version {
        return Err(Error::Unauthorized(
            "This sign-in has ended: the password, role or branch of the account changed, \
             or its tokens were revoked. Sign in again."
                .to_owned(),
        ));
    }
    if !state.session_live {
        return Err(Error::Unauthorized(
            "This session has been signed out. Sign in again.".to_owned(),
        ));
    }
    Ok(state)
}

/// Who made a request, as its access token states it: what the caller
/// check compares, run with the request's first statement where the
/// request is made (a branch's group writer) instead of before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signer {
    pub user_id: Uuid,
    pub session_id: Uuid,
    pub token_version: i64,
}

/// Whether each signer's token still stands (`standing`), in one statement
/// of constant text. `None` (a request checked before) stands.
pub async fn check_signers<C: GenericClient + Sync>(
    c: &C,
    signers: &[Option<Signer>],
) -> Result<Vec<Result<()>>> {
    if signers.iter().all(Option::is_none) {
        return Ok(signers.iter().map(|_| Ok(())).collect());
    }
    let (users, sessions): (Vec<Uuid>, Vec<Uuid>) = signers
        .iter()
        .map(|s| s.map_or((Uuid::nil(), Uuid::nil()), |s| (s.user_id, s.session_id)))
        .unzip();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT k.ord, u.id IS NOT NULL AS found, u.role, u.branch_id, u.org_id,
                  coalesce(u.is_active AND NOT u.is_deleted, false) AS active,
                  coalesce(u.token_version, -1) AS token_version,
                  (s.id IS NOT NULL AND s.revoked_at IS NULL) AS session_live
           FROM unnest({users}::uuid[], {sessions}::uuid[]) WITH ORDINALITY AS k(user_id, session_id, ord)
           LEFT JOIN users u ON u.id = k.user_id
           LEFT JOIN auth_sessions s ON s.id = k.session_id AND s.user_id = u.id
           ORDER BY k.ord"#
    );
    let rows = db::raw_all(c, &q.sql, q.values).await?;
    Ok(signers
        .iter()
        .zip(rows.iter())
        .map(|(signer, r)| {
            let Some(signer) = signer else { return Ok(()) };
            let state = r.get::<_, bool>("found").then(|| TokenState::of(r));
            standing(state, signer.token_version).map(drop)
        })
        .collect())
}

/// A read guarded by its caller's token in its own statement: the token's
/// state as a subquery of one row (none when there is no such user), the
/// columns `TokenState::of` reads, to which the read is joined laterally
/// with [`stands_in`] in its WHERE. One statement answers the check and the
/// read, and the read finds nothing for a token that does not stand.
pub fn token_subquery(signer: Signer) -> sea_query::SelectStatement {
    let (user, session) = (signer.user_id, signer.session_id);
    Query::select()
        .expr_as(Expr::cust("u.role"), "role")
        .expr_as(Expr::cust("u.branch_id"), "branch_id")
        .expr_as(Expr::cust("u.org_id"), "org_id")
        .expr_as(Expr::cust("u.is_active AND NOT u.is_deleted"), "active")
        .expr_as(Expr::cust("u.token_version"), "token_version")
        .expr_as(
            Expr::cust("s.id IS NOT NULL AND s.revoked_at IS NULL"),
            "session_live",
        )
        .from_as(Table::Users, "u")
        .join_as(
            sea_query::JoinType::LeftJoin,
            Table::AuthSessions,
            "s",
            Expr::cust_with_values("s.id = $1 AND s.user_id = u.id", [session]),
        )
        .and_where(Expr::cust_with_values("u.id = $1", [user]))
        .to_owned()
}

/// The condition a guarded read adds: the token of `token_version` stands
/// on the state `alias` names (what [`standing`] decides, in SQL).
pub fn stands_in(alias: &str, token_version: i64) -> Expr {
    Expr::cust_with_values(
        format!("{alias}.active AND {alias}.session_live AND {alias}.token_version = $1"),
        [token_version],
    )
}

/// The user `user_id` and whether `session_id` is one of its live sessions.
/// `None` when there is no such user.
pub async fn token_state<C: GenericClient + Sync>(
    c: &C,
    user_id: Uuid,
    session_id: Uuid,
) -> Result<Option<TokenState>> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT u.role, u.branch_id, u.org_id,
                  (u.is_active AND NOT u.is_deleted) AS active,
                  u.token_version,
                  (s.id IS NOT NULL AND s.revoked_at IS NULL) AS session_live
           FROM users u
           LEFT JOIN auth_sessions s ON s.id = {session_id} AND s.user_id = u.id
           WHERE u.id = {user_id}"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| TokenState::of(&r)))
}

/// A refresh token consumed by `consume`: its user, session and the
/// session's token version.
pub struct Consumed {
    pub user_id: Uuid,
    pub session_id: Uuid,
    pub token_version: i64,
}

/// Checks and consumes a refresh token in one statement: it must be unused,
/// unrevoked and unexpired, its session live, the session's version the
/// user's current one and the user active. Two concurrent refreshes with
/// one token cannot both pass (the row lock serialises them).
pub async fn consume<C: GenericClient + Sync>(c: &C, digest: Vec<u8>) -> Result<Option<Consumed>> {
    let now = Utc::now();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"UPDATE refresh_tokens r SET used_at = {now}
           FROM auth_sessions s, users u
           WHERE r.token_hash = {digest}
             AND r.used_at IS NULL AND r.revoked_at IS NULL AND r.expires_at > {now}
             AND s.id = r.family_id AND s.revoked_at IS NULL
             AND u.id = s.user_id AND u.token_version = s.token_version
             AND u.is_active AND NOT u.is_deleted
           RETURNING r.user_id, r.family_id, s.token_version"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values).await?.map(|r| Consumed {
        user_id: r.get(0),
        session_id: r.get(1),
        token_version: r.get(2),
    }))
}

/// A refresh token that was already used, presented again, means it
/// leaked: end its session and every token of the user (the version bump
/// ends the user's other sessions and access tokens). Returns the user whose
/// tokens were ended, if the token was a used one.
pub async fn end_all_on_reuse<C: GenericClient + Sync>(
    c: &C,
    digest: Vec<u8>,
) -> Result<Option<(Uuid, Uuid)>> {
    let now = Utc::now();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"WITH used AS (SELECT user_id, family_id FROM refresh_tokens
                         WHERE token_hash = {digest} AND used_at IS NOT NULL),
                s AS (UPDATE auth_sessions SET revoked_at = {now}
                      WHERE id IN (SELECT family_id FROM used) AND revoked_at IS NULL),
                t AS (UPDATE refresh_tokens SET revoked_at = {now}
                      WHERE user_id IN (SELECT user_id FROM used) AND revoked_at IS NULL),
                u AS (UPDATE users SET token_version = token_version + 1
                      WHERE id IN (SELECT user_id FROM used))
           SELECT user_id, family_id FROM used"#
    );
    Ok(db::raw_opt(c, &q.sql, q.values)
        .await?
        .map(|r| (r.get(0), r.get(1))))
}
