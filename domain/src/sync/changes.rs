//! The sync change log. Every committed write to a synced entity appends one
//! row here in the same transaction.
//!
//! Revisions come from a sequence, so a transaction that allocated rev 10 may
//! commit after one that allocated rev 11. A till that read 11 and moved its
//! cursor past 10 would never see 10. To rule that out, every writer holds a
//! *shared* transaction-level advisory lock from before it allocates a rev
//! until it commits, and readers take the same lock *exclusively* for an
//! instant before reading the horizon (`max(rev)`): by then every rev at or
//! below the horizon is committed or rolled back. Writers never block each
//! other; a reader waits only for the writes already in flight.

use deadpool_postgres::GenericClient;
use serde_json::Value as Json;
use uuid::Uuid;

use crate::db::{self, Stmt};
use crate::error::Result;

/// Advisory lock key guarding rev allocation (arbitrary, fixed).
pub const REV_LOCK_KEY: i64 = 0x5048_4152_4d52_4556; // "PHARMREV"

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Create,
    Update,
    Delete,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Update => "update",
            Op::Delete => "delete",
        }
    }
}

/// One change to append.
pub struct Change<'a> {
    pub entity: &'a str,
    pub entity_id: String,
    pub op: Op,
    /// `None` for organisation-wide entities (medicines, customers, ...).
    pub branch_id: Option<Uuid>,
    pub payload: Json,
}

/// Allocates the next rev inside the caller's transaction, holding the
/// shared rev lock until that transaction ends. Write the entity with this
/// rev, then `append` its change row with the same rev.
pub async fn allocate<C: GenericClient + Sync>(tx: &C) -> Result<i64> {
    let rows = db::run(tx, &allocate_stmt()).await?;
    rows.first()
        .map(|r| r.get::<_, i64>(0))
        .ok_or_else(|| crate::Error::internal("nextval returned no row"))
}

/// SQL text and values of `allocate`, for a pipeline (one row, the rev).
pub fn allocate_stmt() -> Stmt {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT nextval('change_log_rev_seq')
           FROM (SELECT pg_advisory_xact_lock_shared({REV_LOCK_KEY})) AS rev_lock"#
    );
    Stmt::raw(q.sql, q.values)
}

/// `allocate` for `n` revs at once (one round trip), in ascending order.
pub async fn allocate_many<C: GenericClient + Sync>(tx: &C, n: usize) -> Result<Vec<i64>> {
    let rows = db::run(tx, &allocate_many_stmt(n)?).await?;
    Ok(revs_of(&rows))
}

/// The statement of `allocate_many`, for a pipeline (`revs_of` reads it).
pub fn allocate_many_stmt(n: usize) -> Result<Stmt> {
    let n = i32::try_from(n).map_err(crate::Error::internal)?;
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT nextval('change_log_rev_seq')
           FROM (SELECT pg_advisory_xact_lock_shared({REV_LOCK_KEY})) AS rev_lock,
                generate_series(1, {n})"#
    );
    Ok(Stmt::raw(q.sql, q.values))
}

/// The revs `allocate_many_stmt` answered, in ascending order.
pub fn revs_of(rows: &[tokio_postgres::Row]) -> Vec<i64> {
    let mut revs: Vec<i64> = rows.iter().map(|r| r.get::<_, i64>(0)).collect();
    revs.sort_unstable();
    revs
}

/// Appends several change rows (revs from `allocate`) in one statement.
pub async fn append_all<C: GenericClient + Sync>(
    tx: &C,
    rows: Vec<(i64, Change<'_>)>,
) -> Result<()> {
    if !rows.is_empty() {
        db::run(tx, &append_unnest_stmt(rows)).await?;
    }
    Ok(())
}

/// The statement of `append_all`, for a pipeline: constant text however
/// many rows (the rows as `unnest` arrays), so one prepared statement
/// serves every group size.
pub fn append_unnest_stmt(rows: Vec<(i64, Change<'_>)>) -> Stmt {
    let mut revs = Vec::with_capacity(rows.len());
    let mut entities = Vec::with_capacity(rows.len());
    let mut ids = Vec::with_capacity(rows.len());
    let mut ops = Vec::with_capacity(rows.len());
    let mut branches = Vec::with_capacity(rows.len());
    let mut payloads = Vec::with_capacity(rows.len());
    for (rev, c) in rows {
        revs.push(rev);
        entities.push(c.entity.to_owned());
        ids.push(c.entity_id);
        ops.push(c.op.as_str().to_owned());
        branches.push(c.branch_id.map(|b| b.to_string()).unwrap_or_default());
        payloads.push(c.payload.to_string());
    }
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"INSERT INTO change_log (rev, entity, entity_id, op, branch_id, payload)
           SELECT c.rev, c.entity, c.entity_id, c.op, nullif(c.branch, '')::uuid, c.payload::jsonb
           FROM unnest({revs}::int8[], {entities}::text[], {ids}::text[], {ops}::text[],
                       {branches}::text[], {payloads}::text[])
             AS c(rev, entity, entity_id, op, branch, payload)"#
    );
    Stmt::raw(q.sql, q.values)
}

/// Appends the change row for a rev from `allocate`.
pub async fn append<C: GenericClient + Sync>(tx: &C, rev: i64, change: Change<'_>) -> Result<()> {
    append_all(tx, vec![(rev, change)]).await
}

/// `allocate` then `append`, for writers that do not store the rev on the entity.
pub async fn record<C: GenericClient + Sync>(tx: &C, change: Change<'_>) -> Result<i64> {
    let rev = allocate(tx).await?;
    append(tx, rev, change).await?;
    Ok(rev)
}

/// Waits until no change-log write is in flight and returns the highest
/// committed rev. Every rev at or below it is final from then on.
pub async fn settled_horizon<C: GenericClient + Sync>(client: &C) -> Result<i64> {
    let lock = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT pg_advisory_lock({REV_LOCK_KEY})"
    );
    db::raw_all(client, &lock.sql, lock.values).await?;
    let max = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT coalesce(max(rev), 0)::bigint FROM change_log"
    );
    let result = db::raw_all(client, &max.sql, max.values).await;
    let unlock = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT pg_advisory_unlock({REV_LOCK_KEY})"
    );
    db::raw_all(client, &unlock.sql, unlock.values).await?;
    Ok(result?
        .first()
        .map(|r| r.get::<_, i64>(0))
        .unwrap_or_default())
}
