//! The sync change log. Every committed write to a synced entity appends one
//! row here in the same transaction.
//!
//! Revisions come from a sequence, so a transaction that drew rev 10 may
//! commit after one that drew rev 11. A till that read 11 and moved its
//! cursor past 10 would never see 10. Readers therefore never hand out a
//! cursor above the settled horizon (`horizon.rs`): a rev at or below it is
//! committed or rolled back for good. What makes that horizon computable
//! without any lock is the one rule every writer keeps here: a rev is drawn
//! only by a transaction that already has its transaction id
//! (`change_log_next_rev()`, sql/0018), and each change row records that id.
//! Writers take no lock for the feed and never wait for readers.

use std::sync::LazyLock;

use deadpool_postgres::GenericClient;
use serde_json::Value as Json;
use tokio::sync::watch;
use uuid::Uuid;

use crate::db::{self, Stmt};
use crate::error::Result;

/// Counts change rows this process has appended (committed or not): the
/// feed's scanner (`live.rs`) looks for new commits when it moves, and tells
/// other server processes about them.
static LOCAL_WRITES: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

/// A receiver that wakes when this process appends change rows.
pub fn local_writes() -> watch::Receiver<u64> {
    LOCAL_WRITES.subscribe()
}

fn wrote_locally() {
    LOCAL_WRITES.send_modify(|n| *n = n.wrapping_add(1));
}

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

/// Allocates the next rev inside the caller's transaction (giving the
/// transaction its id first). Write the entity with this rev, then `append`
/// its change row with the same rev.
pub async fn allocate<C: GenericClient + Sync>(tx: &C) -> Result<i64> {
    let rows = db::run(tx, &allocate_stmt()).await?;
    rows.first()
        .map(|r| r.get::<_, i64>(0))
        .ok_or_else(|| crate::Error::internal("change_log_next_rev returned no row"))
}

/// SQL text and values of `allocate`, for a pipeline (one row, the rev).
pub fn allocate_stmt() -> Stmt {
    let q = sea_query::raw_query!(PostgresQueryBuilder, "SELECT change_log_next_rev()");
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
        "SELECT change_log_next_rev() FROM generate_series(1, {n})"
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
    wrote_locally();
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
