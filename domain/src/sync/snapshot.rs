//! What tills pull: the catalogue snapshot and the change feed.
//!
//! Both are cut at a *settled* horizon (`horizon.rs`): a rev at or below it
//! is committed (or rolled back) for good, so a till that moves its cursor
//! there never skips a write that commits late. Readers take no lock and
//! never hold up a writer; a reader waits, holding no connection, only for
//! the writes in flight when it read.
//!
//! Over 600 lines: the snapshot and the feed share the scope rules, the row
//! shapes and the settled horizon; the next split is `feed` into its own
//! file.

use crate::tables::Table;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Object, Pool};
use sea_query::{Expr, ExprTrait, JoinType, Order, Query};
use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use serde_json::Value as Json;
use tokio_postgres::{IsolationLevel, Row};
use uuid::Uuid;

use crate::coupons::{self, Coupon};
use crate::customers::{self, Customer};
use crate::error::Code;
use crate::stock::{self, Batch};
use crate::sync::epoch::Identity;
use crate::sync::horizon::{Horizon, Seen};
use crate::{db, wire, Error, Result};

use crate::branches::{self, Branch};
use crate::medicines::{self, Medicine, MedicineSnapshot};
use crate::packs::{self, Pack};
use crate::suppliers::{self, Supplier};
use crate::users::sessions::{self, Signer};
use crate::users::{self, User};

/// Whose snapshot or feed: `None` is an admin's (every branch), `Some` a
/// branch caller's.
pub type Scope = Option<Uuid>;

/// How long a feed read waits for the writes in flight before it answers
/// what is settled (less, never skipping).
pub const FEED_SETTLE_WAIT: Duration = Duration::from_secs(2);

/// How long a snapshot waits for the writes in flight below its cut.
pub const SNAPSHOT_SETTLE_WAIT: Duration = Duration::from_secs(10);

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
    /// The database history `max_rev` counts in: pass it as `epoch` to
    /// `GET /sync/changes`. It changes after a failover or a restore; a
    /// cursor of another epoch is answered 409 `resnapshot`.
    #[schema(example = "7312345678901234567-3")]
    pub epoch: String,
    #[schema(value_type = Vec<Branch>)]
    pub branches: Rows<Branch>,
    #[schema(value_type = Vec<MedicineSnapshot>)]
    pub medicines: Rows<MedicineSnapshot>,
    #[schema(value_type = Vec<Supplier>)]
    pub suppliers: Rows<Supplier>,
    #[schema(value_type = Vec<Coupon>)]
    pub coupons: Rows<Coupon>,
    #[schema(value_type = Vec<Customer>)]
    pub customers: Rows<Customer>,
    #[schema(value_type = Vec<User>)]
    pub users: Rows<User>,
    #[schema(value_type = Vec<Batch>)]
    pub batches: Rows<Batch>,
    #[schema(value_type = Vec<SnapshotCategory>)]
    pub categories: Rows<SnapshotCategory>,
    /// Every medicine's live packs (deactivated ones with `is_active` false).
    #[schema(value_type = Vec<Pack>)]
    pub medicine_packs: Rows<Pack>,
    /// The server the arrays were read on (a standby names no timeline:
    /// its reader fills `epoch` with the primary's).
    #[serde(skip)]
    pub server: Identity,
}

/// A snapshot array: the rows its transaction read, with the changes that
/// committed late laid over them (by key: `None` removes the row).
#[derive(Debug)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    pub late: BTreeMap<String, Option<Json>>,
}

impl<T> From<Vec<T>> for Rows<T> {
    fn from(rows: Vec<T>) -> Self {
        Rows {
            rows,
            late: BTreeMap::new(),
        }
    }
}

impl<T: Keyed> Rows<T> {
    /// The row the transaction read under `key`, unless a late change
    /// replaced it.
    fn read_row(&self, key: &str) -> Option<&T> {
        self.rows.iter().find(|r| r.key() == key)
    }

    /// How many rows the array holds.
    pub fn len(&self) -> usize {
        let replaced = self
            .rows
            .iter()
            .filter(|r| self.late.contains_key(&r.key()))
            .count();
        self.rows.len() - replaced + self.late.values().filter(|v| v.is_some()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Keyed + Serialize> Serialize for Rows<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for row in &self.rows {
            if self.late.is_empty() || !self.late.contains_key(&row.key()) {
                seq.serialize_element(row)?;
            }
        }
        for row in self.late.values().flatten() {
            seq.serialize_element(row)?;
        }
        seq.end()
    }
}

/// What identifies a snapshot row in the change log (`entity_id`), and its rev.
pub trait Keyed {
    fn key(&self) -> String;
    fn rev(&self) -> i64;
}

macro_rules! keyed_by_id {
    ($($t:ty),*) => {$(
        impl Keyed for $t {
            fn key(&self) -> String {
                self.id.to_string()
            }
            fn rev(&self) -> i64 {
                self.rev
            }
        }
    )*};
}

keyed_by_id!(
    Branch,
    MedicineSnapshot,
    Supplier,
    Coupon,
    Customer,
    User,
    Batch,
    Pack
);

impl Keyed for SnapshotCategory {
    fn key(&self) -> String {
        self.slug.clone()
    }
    fn rev(&self) -> i64 {
        self.rev
    }
}

/// Reads the snapshot so that the arrays hold exactly the writes up to
/// `max_rev`, without a lock:
///
/// 1. waits until the revs committed so far are settled (the floor);
/// 2. reads `max_rev` (the highest rev visible) and every array in one
///    REPEATABLE READ, read-only transaction;
/// 3. waits until every rev up to `max_rev` is settled: a write that drew a
///    rev below `max_rev` may have committed after the transaction began;
/// 4. reads those late changes (above the floor, up to `max_rev`, written by
///    a transaction the snapshot could not see) and lays them over the
///    arrays, recomputing the stock of the medicines whose batches they move.
pub async fn read(pool: &Pool, horizon: &Horizon, scope: Scope) -> Result<Snapshot> {
    let top = horizon.look(&pool.get().await?).await?;
    let floor = horizon.settle(pool, top, SNAPSHOT_SETTLE_WAIT).await?;
    let (mut snapshot, seen) = read_in_one_transaction(pool, scope).await?;
    if !snapshot.epoch.is_empty() {
        // A failover since the first look starts the horizon again before
        // it is trusted below.
        horizon.adopt(&snapshot.epoch);
    }
    let settled = horizon
        .settle(pool, snapshot.max_rev, SNAPSHOT_SETTLE_WAIT)
        .await?;
    if settled < snapshot.max_rev {
        return Err(Error::busy(
            "A write is taking long to commit; ask for the snapshot again shortly.",
        ));
    }
    let late = late_changes(pool, floor, snapshot.max_rev, &seen).await?;
    if !late.is_empty() {
        tracing::debug!(late = late.len(), "snapshot completed with late changes");
        snapshot.lay_over(scope, late);
    }
    Ok(snapshot)
}

/// Step 2 of `read`: the arrays and `max_rev` in one transaction, and that
/// transaction's snapshot (`pg_snapshot` text).
async fn read_in_one_transaction(pool: &Pool, scope: Scope) -> Result<(Snapshot, String)> {
    let mut conn = pool.get().await?;
    let tx = conn
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    // The first statement fixes the transaction's snapshot, and names the
    // server's history the revs belong to.
    let sql = format!(
        "SELECT coalesce(max(rev), 0)::bigint AS max_rev, pg_current_snapshot()::text AS seen,
                {}
           FROM change_log",
        crate::sync::epoch::COLUMNS
    );
    let first = db::raw_all(&tx, &sql, sea_query::Values(Vec::new())).await?;
    let first = first
        .first()
        .ok_or_else(|| Error::internal("no row from the snapshot's first read"))?;
    let (max_rev, seen): (i64, String) = (first.get("max_rev"), first.get("seen"));
    let server = Identity::from_row(first);
    // Sent together: the connection pipelines them, so the server runs the
    // next query while this side decodes the rows of the last.
    let (branches, medicines, suppliers, coupons, customers, users, batches, categories, packs) = futures_util::try_join!(
        branches::list(&tx, scope),
        medicine_rows(&tx, scope),
        supplier_rows(&tx),
        coupon_rows(&tx),
        customer_rows(&tx),
        user_rows(&tx, scope),
        batch_rows(&tx, scope),
        category_rows(&tx),
        pack_rows(&tx),
    )?;
    let snapshot = Snapshot {
        max_rev,
        epoch: server.epoch().unwrap_or_default(),
        branches: branches.into(),
        medicines: medicines.into(),
        suppliers: suppliers.into(),
        coupons: coupons.into(),
        customers: customers.into(),
        users: users.into(),
        batches: batches.into(),
        categories: categories.into(),
        medicine_packs: packs.into(),
        server,
    };
    crate::db::commit(tx).await?;
    Ok((snapshot, seen))
}

/// Changes with `floor < rev <= max_rev` whose transaction the snapshot
/// `seen` could not see, in rev order (rows from before the `xid` column
/// are older than any floor).
async fn late_changes(
    pool: &Pool,
    floor: i64,
    max_rev: i64,
    seen: &str,
) -> Result<Vec<FeedChange>> {
    if floor >= max_rev {
        return Ok(Vec::new());
    }
    let seen = seen.to_owned();
    let q = sea_query::raw_query!(
        PostgresQueryBuilder,
        r#"SELECT rev, entity, entity_id, op, branch_id, payload FROM change_log
           WHERE rev > {floor} AND rev <= {max_rev} AND xid IS NOT NULL
             AND NOT pg_visible_in_snapshot(xid, CAST({seen}::text AS pg_snapshot))
           ORDER BY rev"#
    );
    let client = pool.get().await?;
    Ok(db::raw_all(&client, &q.sql, q.values)
        .await?
        .iter()
        .map(FeedChange::from_row)
        .collect())
}

/// The array a late change of `entity` lands in.
enum Target {
    Branches,
    Medicines,
    Suppliers,
    Coupons,
    Customers,
    Users,
    Batches,
    Categories,
    MedicinePacks,
}

impl Target {
    fn of(entity: &str) -> Option<Target> {
        Some(match entity {
            "branch" => Target::Branches,
            "medicine" => Target::Medicines,
            "supplier" => Target::Suppliers,
            "coupon" => Target::Coupons,
            "customer" => Target::Customers,
            "user" => Target::Users,
            "batch" => Target::Batches,
            "category" => Target::Categories,
            "medicine_pack" => Target::MedicinePacks,
            _ => return None,
        })
    }
}

/// Records a late change on `rows`: the payload replaces the row (a delete
/// removes it), unless the row read is already newer.
fn lay<T: Keyed>(rows: &mut Rows<T>, change: &FeedChange, keep: bool) {
    let key = change.entity_id.clone();
    if let Some(read) = rows.read_row(&key) {
        if read.rev() > change.rev && !rows.late.contains_key(&key) {
            return;
        }
    } else if !keep && !rows.late.contains_key(&key) {
        // Not in the array and not the caller's: nothing to remove.
        return;
    }
    let value = (keep && change.op != "delete").then(|| change.payload.clone());
    rows.late.insert(key, value);
}

impl Snapshot {
    /// Step 4 of `read`: the late changes, in rev order, over the arrays.
    fn lay_over(&mut self, scope: Scope, late: Vec<FeedChange>) {
        let mine = |payload: &Json| match scope {
            None => true,
            Some(b) => payload.get("branch_id").and_then(Json::as_str) == Some(&b.to_string()),
        };
        // Batches before and after, for the medicines' stock.
        let mut moved_batches: Vec<String> = Vec::new();
        for change in &late {
            let Some(target) = Target::of(&change.entity) else {
                continue;
            };
            match target {
                Target::Branches => {
                    let ours = scope.is_none_or(|b| change.entity_id == b.to_string());
                    lay(&mut self.branches, change, ours);
                }
                Target::Medicines => lay(&mut self.medicines, change, true),
                Target::Suppliers => lay(&mut self.suppliers, change, true),
                Target::Coupons => lay(&mut self.coupons, change, true),
                Target::Customers => lay(&mut self.customers, change, true),
                Target::Users => lay(&mut self.users, change, mine(&change.payload)),
                Target::Batches => {
                    lay(&mut self.batches, change, mine(&change.payload));
                    moved_batches.push(change.entity_id.clone());
                }
                Target::Categories => lay(&mut self.categories, change, true),
                Target::MedicinePacks => lay(&mut self.medicine_packs, change, true),
            }
        }
        self.restock(&moved_batches);
    }

    /// Medicine `stock_quantity` is the sum over the live batches in the
    /// array: moves it by what the late batch changes did.
    fn restock(&mut self, moved: &[String]) {
        let moved: BTreeSet<&String> = moved.iter().collect();
        let mut delta: HashMap<String, i64> = HashMap::new();
        for key in moved {
            let Some(after) = self.batches.late.get(key) else {
                continue;
            };
            if let Some(before) = self.batches.read_row(key) {
                *delta.entry(before.medicine_id.to_string()).or_default() -=
                    i64::from(before.qty_remaining);
            }
            if let Some(after) = after {
                let medicine = after.get("medicine_id").and_then(Json::as_str);
                let qty = after.get("qty_remaining").and_then(Json::as_i64);
                if let (Some(m), Some(q)) = (medicine, qty) {
                    *delta.entry(m.to_owned()).or_default() += q;
                }
            }
        }
        delta.retain(|_, v| *v != 0);
        if delta.is_empty() {
            return;
        }
        let medicines = &mut self.medicines;
        for m in medicines.rows.iter_mut() {
            if let Some(d) = delta.get(&m.id.to_string()) {
                m.stock_quantity += d;
            }
        }
        let read_stock: HashMap<String, i64> = medicines
            .rows
            .iter()
            .map(|m| (m.id.to_string(), m.stock_quantity))
            .collect();
        for (key, value) in medicines.late.iter_mut() {
            if let Some(Json::Object(m)) = value {
                // A late medicine row: the stock the transaction read (moved
                // above) or, for a medicine it did not see, the late batches'.
                let stock = read_stock
                    .get(key)
                    .copied()
                    .unwrap_or_else(|| delta.get(key).copied().unwrap_or(0));
                m.insert("stock_quantity".to_owned(), stock.into());
            }
        }
    }
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
        .from(Table::Batches)
        .and_where(Expr::col("is_deleted").eq(false))
        .apply_if(scope, |q, b| {
            q.and_where(Expr::col("branch_id").eq(b));
        })
        .group_by_col("medicine_id")
        .to_owned();
    let q = Query::select()
        .columns(medicines::COLUMNS.map(|col| ("m", col)))
        .expr_as(Expr::cust("coalesce(s.qty, 0)::bigint"), "stock_quantity")
        .from_as(Table::Medicines, "m")
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

async fn pack_rows<C: GenericClient + Sync>(c: &C) -> Result<Vec<Pack>> {
    let rows = live_rows(c, "medicine_packs", &packs::COLUMNS, None).await?;
    Ok(rows.iter().map(Pack::from_row).collect())
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
    rows.iter().map(User::from_row).collect()
}

async fn batch_rows<C: GenericClient + Sync>(c: &C, scope: Scope) -> Result<Vec<Batch>> {
    let scope_col = scope.map(|b| ("branch_id", b));
    let rows = live_rows(c, "batches", &stock::COLUMNS, scope_col).await?;
    Ok(rows.iter().map(Batch::from_row).collect())
}

async fn category_rows<C: GenericClient + Sync>(c: &C) -> Result<Vec<SnapshotCategory>> {
    let q = Query::select()
        .columns(["slug", "name", "created_at", "rev"])
        .from(Table::Categories)
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
    /// `branch`, `medicine`, `medicine_pack`, `category`, `supplier`, `coupon`, `customer`,
    /// `customer_ledger`, `user`, `batch`, `sale` or `credit_note` (a sale or
    /// credit note comes again as an `update` when the tax authority
    /// accepts it, with its `fiscal` identifiers).
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ChangeFeed {
    pub changes: Vec<FeedChange>,
    /// The cursor to pass as the next `since`: the settled horizon when
    /// `has_more` is false (`since` itself when nothing new committed, or
    /// when a long poll ended without a change), else the rev of the last
    /// change returned.
    pub max_rev: i64,
    pub has_more: bool,
    /// The database history `max_rev` counts in: pass it back as `epoch`.
    #[schema(example = "7312345678901234567-3")]
    pub epoch: String,
}

impl FeedChange {
    fn from_row(r: &Row) -> FeedChange {
        FeedChange {
            rev: r.get("rev"),
            entity: r.get("entity"),
            entity_id: r.get("entity_id"),
            op: r.get("op"),
            branch_id: r.get("branch_id"),
            payload: r.get("payload"),
        }
    }
}

impl ChangeFeed {
    /// No change: the cursor stays where it was.
    pub fn nothing_since(since: i64, epoch: &str) -> ChangeFeed {
        ChangeFeed {
            changes: Vec::new(),
            max_rev: since,
            has_more: false,
            epoch: epoch.to_owned(),
        }
    }
}

/// A till's cursor: `since` and, when it sends it, the epoch of the answer
/// that gave it.
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    pub since: i64,
    pub epoch: Option<&'a str>,
}

/// 409 `resnapshot` unless the cursor belongs to the database's current
/// history: its epoch (when sent) is the current one, and `since` is not
/// beyond the head (no server of this history handed it out; it came from
/// a history that was lost, or the till made it up).
pub fn check_cursor(cursor: Cursor<'_>, epoch: &str, head: i64) -> Result<()> {
    if let Some(theirs) = cursor.epoch.filter(|e| *e != epoch) {
        return Err(Error::coded(
            Code::Resnapshot,
            Some("epoch"),
            format!(
                "The cursor belongs to another history of the database (epoch {theirs}, now {epoch}): \
                 after a failover or a restore its revs may be renumbered. Take a fresh snapshot."
            ),
        ));
    }
    if cursor.since > head {
        return Err(Error::coded(
            Code::Resnapshot,
            Some("since"),
            format!(
                "`since` ({}) is beyond the head of the change feed ({head}): the cursor came from \
                 a database history that is gone (a failover or a restore). Take a fresh snapshot.",
                cursor.since
            ),
        ));
    }
    Ok(())
}

/// Changes with `since < rev <= horizon` the scope may see, in rev order,
/// at most `limit` of them, where the horizon is settled and at least the
/// highest rev committed when the read began (unless the writes in flight
/// below it take longer than `FEED_SETTLE_WAIT`: then what is settled).
/// With nothing committed past `since`, one round trip and no wait.
///
/// A cursor of another epoch, or beyond the head, is 409 `resnapshot`
/// (`check_cursor`), never an empty page: the epoch is read in the same
/// statement as the head, on the connection that reads the changes.
pub async fn feed(
    pool: &Pool,
    horizon: &Horizon,
    scope: Scope,
    cursor: Cursor<'_>,
    limit: i64,
    signer: Option<Signer>,
) -> Result<ChangeFeed> {
    let (checks, page) = feed_for(pool, horizon, scope, cursor, limit, &[signer]).await?;
    // A refused token gets its refusal before anything the read found.
    checks.into_iter().try_for_each(|c| c)?;
    page
}

/// `feed` for several callers of one scope holding one cursor (long polls
/// woken by the same commit, `shared_feed::SharedFeed`): their tokens are checked
/// in the read's first statement, each with its own answer, and the page
/// is read once. The outer error is a fault before the checks; the page's
/// error (a cursor of another history, a fault) is every standing
/// caller's answer. When every caller was refused the page is not read.
pub async fn feed_for(
    pool: &Pool,
    horizon: &Horizon,
    scope: Scope,
    cursor: Cursor<'_>,
    limit: i64,
    signers: &[Option<Signer>],
) -> Result<(Vec<Result<()>>, Result<ChangeFeed>)> {
    let conn = pool.get().await?;
    // The callers' token checks go with the first look: one round trip.
    let (checked, seen) = futures_util::join!(
        sessions::check_signers(&conn, signers),
        horizon.look_all(&conn)
    );
    let checks = checked?;
    if !checks.iter().any(Result::is_ok) {
        // Nobody to read for: never answered to anyone.
        return Ok((
            checks,
            Err(Error::internal("a feed read for refused callers")),
        ));
    }
    let page = match seen {
        Ok(seen) => page_after(pool, horizon, conn, seen, scope, cursor, limit).await,
        Err(fault) => Err(fault),
    };
    Ok((checks, page))
}

/// The page after the first look (`seen`), on its connection.
async fn page_after(
    pool: &Pool,
    horizon: &Horizon,
    mut conn: Object,
    seen: Seen,
    scope: Scope,
    cursor: Cursor<'_>,
    limit: i64,
) -> Result<ChangeFeed> {
    let since = cursor.since;
    let epoch = primary_epoch(&seen.identity)?;
    check_cursor(cursor, &epoch, seen.head())?;
    let top = seen.top;
    if top <= since {
        return Ok(ChangeFeed::nothing_since(since, &epoch));
    }
    let mut settled = horizon.settled();
    if settled < top {
        // Waiting holds no connection.
        drop(conn);
        settled = horizon.settle(pool, top, FEED_SETTLE_WAIT).await?;
        if settled <= since {
            return Ok(ChangeFeed::nothing_since(since, &epoch));
        }
        conn = pool.get().await?;
        // Another connection: it must still reach the same history. The
        // look and the page go out together (one round trip); the page is
        // discarded when the look finds another history.
        let (again, page) = futures_util::join!(
            horizon.look_all(&conn),
            change_rows(&conn, scope, since, settled, limit + 1)
        );
        if primary_epoch(&again?.identity)? != epoch {
            return Err(Error::database_unavailable(2));
        }
        return Ok(cut_page(page?, limit, settled, epoch));
    }
    // One more than asked tells whether more remain.
    let changes = change_rows(&conn, scope, since, settled, limit + 1).await?;
    Ok(cut_page(changes, limit, settled, epoch))
}

/// The page of `changes` (read one beyond `limit`) up to the horizon
/// `settled`, in the history `epoch`.
fn cut_page(mut changes: Vec<FeedChange>, limit: i64, settled: i64, epoch: String) -> ChangeFeed {
    let has_more = changes.len() as i64 > limit;
    changes.truncate(limit as usize);
    let max_rev = match changes.last() {
        Some(last) if has_more => last.rev,
        _ => settled,
    };
    ChangeFeed {
        changes,
        max_rev,
        has_more,
        epoch,
    }
}

/// The epoch of the server the feed reads, which must be a primary: the
/// write pool reaching a standby is a failover in progress (503, retry).
fn primary_epoch(server: &Identity) -> Result<String> {
    server.epoch().ok_or_else(|| Error::database_unavailable(2))
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
        .map(FeedChange::from_row)
        .collect())
}
