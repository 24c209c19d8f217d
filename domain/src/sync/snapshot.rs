//! What tills pull: the catalogue snapshot and the change feed.
//!
//! Both are cut at a *settled* horizon: a rev at or below it is committed
//! (or rolled back) for good, so a till that moves its cursor there never
//! skips a write that commits late (see `actors/src/changes.rs`). Waiting
//! for the horizon means taking the rev lock exclusively on a pooled
//! connection; `RevLockedConn` makes sure such a connection never goes back
//! to the pool still holding it.

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object, Pool};
use sea_query::{Expr, ExprTrait, JoinType, Order, Query};
use serde::Serialize;
use serde_json::Value as Json;
use tokio_postgres::{IsolationLevel, Row};
use uuid::Uuid;

use crate::coupons::{self, Coupon};
use crate::customers::{self, Customer};
use crate::stock::{self, Batch};
use crate::sync::changes::{self, REV_LOCK_KEY};
use crate::{db, wire, Error, Result};

use crate::branches::{self, Branch};
use crate::medicines::{self, Medicine, MedicineSnapshot};
use crate::suppliers::{self, Supplier};
use crate::users::{self, User};

/// Whose snapshot or feed: `None` is an admin's (every branch), `Some` a
/// branch caller's.
pub type Scope = Option<Uuid>;

/// A pooled connection that may hold the session-level rev lock. Dropped
/// while it may (an error between lock and unlock, or a request cancelled
/// mid-await), it is detached from the pool and closed, and the server frees
/// the lock with the session: a pooled connection holding it would stall
/// every writer.
struct RevLockedConn {
    conn: Option<Object>,
    may_hold_lock: bool,
}

impl RevLockedConn {
    fn new(conn: Object) -> Self {
        RevLockedConn {
            conn: Some(conn),
            may_hold_lock: false,
        }
    }
}

impl Drop for RevLockedConn {
    fn drop(&mut self) {
        if self.may_hold_lock {
            if let Some(conn) = self.conn.take() {
                tracing::warn!("closing a connection that may hold the rev lock");
                drop(Object::take(conn));
            }
        }
    }
}

fn conn_gone() -> Error {
    Error::internal("pooled connection already released")
}

// ---------------------------------------------------------------- snapshot

/// A category as tills mirror it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SnapshotCategory {
    pub slug: String,
    pub name: String,
    #[serde(serialize_with = "wire::ts")]
    #[schema(value_type = String)]
    pub created_at: DateTime<Utc>,
    pub rev: i64,
}

/// `GET /sync/snapshot`: every live (not deleted) synced row the caller may
/// mirror, consistent with `max_rev`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Snapshot {
    /// The pull cursor: pass it as `since` to `GET /sync/changes`.
    pub max_rev: i64,
    pub branches: Vec<Branch>,
    pub medicines: Vec<MedicineSnapshot>,
    pub suppliers: Vec<Supplier>,
    pub coupons: Vec<Coupon>,
    pub customers: Vec<Customer>,
    pub users: Vec<User>,
    pub batches: Vec<Batch>,
    pub categories: Vec<SnapshotCategory>,
}

/// Reads the snapshot in one REPEATABLE READ, read-only transaction whose
/// snapshot is taken while no change-log writer is in flight, so the arrays
/// hold exactly the writes up to `max_rev`.
pub async fn read(pool: &Pool, scope: Scope) -> Result<Snapshot> {
    let mut guard = RevLockedConn::new(pool.get().await?);
    guard.may_hold_lock = true;
    let conn = guard.conn.as_mut().ok_or_else(conn_gone)?;
    lock_revs(&*conn).await?;
    let tx = conn
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    // The first statement fixes the transaction's snapshot: every rev at or
    // below this one is committed and visible, no later one is.
    let max_rev = max_rev(&tx).await?;
    unlock_revs(&tx).await?;
    guard.may_hold_lock = false;
    // Sent together: the connection pipelines them, so the server runs the
    // next query while this side decodes the rows of the last.
    let (branches, medicines, suppliers, coupons, customers, users, batches, categories) = futures_util::try_join!(
        branches::list(&tx, scope),
        medicine_rows(&tx, scope),
        supplier_rows(&tx),
        coupon_rows(&tx),
        customer_rows(&tx),
        user_rows(&tx, scope),
        batch_rows(&tx, scope),
        category_rows(&tx),
    )?;
    let snapshot = Snapshot {
        max_rev,
        branches,
        medicines,
        suppliers,
        coupons,
        customers,
        users,
        batches,
        categories,
    };
    tx.commit().await?;
    Ok(snapshot)
}

/// Takes the rev lock exclusively (session level): returns once no
/// change-log writer is in flight.
async fn lock_revs<C: GenericClient + Sync>(c: &C) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT pg_advisory_lock({REV_LOCK_KEY})"
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(())
}

async fn unlock_revs<C: GenericClient + Sync>(c: &C) -> Result<()> {
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        "SELECT pg_advisory_unlock({REV_LOCK_KEY})"
    );
    db::raw_all(c, &q.sql, q.values).await?;
    Ok(())
}

async fn max_rev<C: GenericClient + Sync>(c: &C) -> Result<i64> {
    let q = Query::select()
        .expr(Expr::cust("coalesce(max(rev), 0)::bigint"))
        .from("change_log")
        .to_owned();
    Ok(db::fetch_one(c, &q).await?.get(0))
}

/// Live medicines with their stock in scope: one grouped aggregate of the
/// batches, hash-joined, instead of a subquery per medicine.
async fn medicine_rows<C: GenericClient + Sync>(
    c: &C,
    scope: Scope,
) -> Result<Vec<MedicineSnapshot>> {
    let stock = Query::select()
        .column("medicine_id")
        .expr_as(Expr::cust("sum(qty_remaining)"), "qty")
        .from("batches")
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(scope, |q, b| {
            q.and_where(Expr::col("branch_id").eq(b));
        })
        .group_by_col("medicine_id")
        .to_owned();
    let q = Query::select()
        .columns(medicines::COLUMNS.map(|col| ("m", col)))
        .expr_as(Expr::cust("coalesce(s.qty, 0)::bigint"), "stock_quantity")
        .from_as("medicines", "m")
        .join_subquery(
            JoinType::LeftJoin,
            stock,
            "s",
            Expr::col(("s", "medicine_id")).equals(("m", "id")),
        )
        .and_where(Expr::col(("m", "is_deleted")).eq(false))
        .to_owned();
    let rows = db::fetch_all(c, &q).await?;
    Ok(rows
        .iter()
        .map(|r| Medicine::from_row(r).snapshot())
        .collect())
}

/// Live rows of a table, optionally of one branch (deactivated ones
/// included: the till must know they are inactive). In no particular order:
/// sorting hundreds of thousands of batches by id would cost more than the
/// rest of the read.
async fn live_rows<C: GenericClient + Sync>(
    c: &C,
    table: &'static str,
    columns: &[&'static str],
    scope_col: Option<(&'static str, Uuid)>,
) -> Result<Vec<Row>> {
    let q = Query::select()
        .columns(columns.iter().copied())
        .from(table)
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(scope_col, |q, (col, b)| {
            q.and_where(Expr::col(col).eq(b));
        })
        .to_owned();
    db::fetch_all(c, &q).await
}

async fn supplier_rows<C: GenericClient + Sync>(c: &C) -> Result<Vec<Supplier>> {
    let rows = live_rows(c, "suppliers", &suppliers::COLUMNS, None).await?;
    Ok(rows.iter().map(Supplier::from_row).collect())
}

async fn coupon_rows<C: GenericClient + Sync>(c: &C) -> Result<Vec<Coupon>> {
    let rows = live_rows(c, "coupons", &coupons::COLUMNS, None).await?;
    Ok(rows.iter().map(Coupon::from_row).collect())
}

async fn customer_rows<C: GenericClient + Sync>(c: &C) -> Result<Vec<Customer>> {
    let rows = live_rows(c, "customers", &customers::COLUMNS, None).await?;
    Ok(rows.iter().map(Customer::from_row).collect())
}

async fn user_rows<C: GenericClient + Sync>(c: &C, scope: Scope) -> Result<Vec<User>> {
    let scope_col = scope.map(|b| ("branch_id", b));
    let rows = live_rows(c, "users", &users::COLUMNS, scope_col).await?;
    Ok(rows.iter().map(User::from_row).collect())
}

async fn batch_rows<C: GenericClient + Sync>(c: &C, scope: Scope) -> Result<Vec<Batch>> {
    let scope_col = scope.map(|b| ("branch_id", b));
    let rows = live_rows(c, "batches", &stock::COLUMNS, scope_col).await?;
    Ok(rows.iter().map(Batch::from_row).collect())
}

async fn category_rows<C: GenericClient + Sync>(c: &C) -> Result<Vec<SnapshotCategory>> {
    let q = Query::select()
        .columns(["slug", "name", "created_at", "rev"])
        .from("categories")
        .order_by("slug", Order::Asc)
        .to_owned();
    Ok(db::fetch_all(c, &q)
        .await?
        .iter()
        .map(|r| SnapshotCategory {
            slug: r.get("slug"),
            name: r.get("name"),
            created_at: r.get("created_at"),
            rev: r.get("rev"),
        })
        .collect())
}

// ------------------------------------------------------------- change feed

/// One change-log row as the feed carries it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FeedChange {
    pub rev: i64,
    /// `branch`, `medicine`, `category`, `supplier`, `coupon`, `customer`,
    /// `customer_ledger`, `user`, `batch` or `sale`.
    pub entity: String,
    pub entity_id: String,
    /// `create`, `update` or `delete` (a soft delete's tombstone).
    pub op: String,
    /// `null` for organisation-wide entities.
    #[schema(value_type = Option<String>)]
    pub branch_id: Option<Uuid>,
    /// The entity in its snapshot shape after the write.
    #[schema(value_type = Object)]
    pub payload: Json,
}

/// A page of the feed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChangeFeed {
    pub changes: Vec<FeedChange>,
    /// The cursor to pass as the next `since`: the settled horizon when
    /// `has_more` is false, else the rev of the last change returned.
    pub max_rev: i64,
    pub has_more: bool,
}

/// Changes with `since < rev <= horizon` the scope may see, in rev order,
/// at most `limit` of them.
pub async fn feed(pool: &Pool, scope: Scope, since: i64, limit: i64) -> Result<ChangeFeed> {
    let mut guard = RevLockedConn::new(pool.get().await?);
    guard.may_hold_lock = true;
    let horizon = changes::settled_horizon(guard.conn.as_ref().ok_or_else(conn_gone)?).await?;
    guard.may_hold_lock = false;
    let conn = guard.conn.as_ref().ok_or_else(conn_gone)?;
    // One more than asked tells whether more remain.
    let mut changes = change_rows(conn, scope, since, horizon, limit + 1).await?;
    let has_more = changes.len() as i64 > limit;
    changes.truncate(limit as usize);
    let max_rev = match changes.last() {
        Some(last) if has_more => last.rev,
        _ => horizon,
    };
    Ok(ChangeFeed {
        changes,
        max_rev,
        has_more,
    })
}

async fn change_rows<C: GenericClient + Sync>(
    c: &C,
    scope: Scope,
    since: i64,
    horizon: i64,
    limit: i64,
) -> Result<Vec<FeedChange>> {
    let q = match scope {
        None => sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT rev, entity, entity_id, op, branch_id, payload FROM change_log
               WHERE rev > {since} AND rev <= {horizon}
               ORDER BY rev LIMIT {limit}"#
        ),
        // The branch's rows and the organisation-wide ones, each read in rev
        // order and cut at `limit`, then merged (an OR would be one filtered
        // scan). The organisation-wide arm is an exact range scan of
        // `change_log_org_wide_idx` (sql/0007); the branch arm takes the
        // primary key or `change_log_branch_idx`, as the planner judges.
        Some(branch) => sea_query::raw_query!(
            PostgresQueryBuilder,
            r#"SELECT rev, entity, entity_id, op, branch_id, payload FROM (
                 (SELECT * FROM change_log
                   WHERE branch_id = {branch} AND rev > {since} AND rev <= {horizon}
                   ORDER BY rev LIMIT {limit})
                 UNION ALL
                 (SELECT * FROM change_log
                   WHERE branch_id IS NULL AND rev > {since} AND rev <= {horizon}
                   ORDER BY rev LIMIT {limit})
               ) AS visible
               ORDER BY rev LIMIT {limit}"#
        ),
    };
    Ok(db::raw_all(c, &q.sql, q.values)
        .await?
        .iter()
        .map(|r| FeedChange {
            rev: r.get("rev"),
            entity: r.get("entity"),
            entity_id: r.get("entity_id"),
            op: r.get("op"),
            branch_id: r.get("branch_id"),
            payload: r.get("payload"),
        })
        .collect())
}
