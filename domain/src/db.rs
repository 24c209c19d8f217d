//! Thin helpers that run sea-query statements through a pooled connection
//! with cached prepared statements, so every call site binds parameters.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{ClientWrapper, GenericClient, StatementCache};
use sea_query::PostgresQueryBuilder;
use sea_query_postgres::{PostgresBinder, PostgresValues};
use tokio_postgres::Row;

use crate::error::{Error, Result};

pub use deadpool_postgres::{Object, Pool, Transaction};

/// Builds a statement into SQL text and its bound values.
pub fn build(stmt: &impl PostgresBinder) -> (String, PostgresValues) {
    stmt.build_postgres(PostgresQueryBuilder)
}

pub async fn fetch_all<C: GenericClient + Sync>(
    client: &C,
    stmt: &impl PostgresBinder,
) -> Result<Vec<Row>> {
    let (sql, values) = build(stmt);
    let prepared = client.prepare_cached(&sql).await?;
    Ok(client.query(&prepared, &values.as_params()).await?)
}

pub async fn fetch_opt<C: GenericClient + Sync>(
    client: &C,
    stmt: &impl PostgresBinder,
) -> Result<Option<Row>> {
    let (sql, values) = build(stmt);
    let prepared = client.prepare_cached(&sql).await?;
    Ok(client.query_opt(&prepared, &values.as_params()).await?)
}

pub async fn fetch_one<C: GenericClient + Sync>(
    client: &C,
    stmt: &impl PostgresBinder,
) -> Result<Row> {
    let (sql, values) = build(stmt);
    let prepared = client.prepare_cached(&sql).await?;
    Ok(client.query_one(&prepared, &values.as_params()).await?)
}

pub async fn execute<C: GenericClient + Sync>(
    client: &C,
    stmt: &impl PostgresBinder,
) -> Result<u64> {
    let (sql, values) = build(stmt);
    let prepared = client.prepare_cached(&sql).await?;
    Ok(client.execute(&prepared, &values.as_params()).await?)
}

/// Converts the values of a `sea_query::raw_query!` (named, bound parameters)
/// for the postgres driver.
pub fn raw_values(values: sea_query::Values) -> PostgresValues {
    PostgresValues(
        values
            .0
            .into_iter()
            .map(sea_query_postgres::PostgresValue)
            .collect(),
    )
}

/// Runs SQL built by `sea_query::raw_query!`, for the statements the
/// builder cannot express (locking functions, `ON CONFLICT` on a partial index).
pub async fn raw_all<C: GenericClient + Sync>(
    client: &C,
    sql: &str,
    values: sea_query::Values,
) -> Result<Vec<Row>> {
    let prepared = client.prepare_cached(sql).await?;
    let values = raw_values(values);
    Ok(client.query(&prepared, &values.as_params()).await?)
}

/// `raw_all` planned afresh with its values on every call (an unnamed
/// statement), never with a cached generic plan: for the reports, whose
/// best plan depends on the values (one branch or the whole chain, a day
/// or a year), and whose planning costs little beside their run.
pub async fn raw_planned<C: GenericClient + Sync>(
    client: &C,
    sql: &str,
    values: sea_query::Values,
) -> Result<Vec<Row>> {
    let values = raw_values(values);
    Ok(client.query(sql, &values.as_params()).await?)
}

pub async fn raw_opt<C: GenericClient + Sync>(
    client: &C,
    sql: &str,
    values: sea_query::Values,
) -> Result<Option<Row>> {
    Ok(raw_all(client, sql, values).await?.into_iter().next())
}

/// A statement ready to run: its SQL text and bound values.
pub struct Stmt {
    sql: String,
    values: PostgresValues,
}

impl Stmt {
    /// From a sea-query statement.
    pub fn of(stmt: &impl PostgresBinder) -> Stmt {
        let (sql, values) = build(stmt);
        Stmt { sql, values }
    }

    /// From SQL built by `sea_query::raw_query!`.
    pub fn raw(sql: String, values: sea_query::Values) -> Stmt {
        Stmt {
            sql,
            values: raw_values(values),
        }
    }
}

/// Runs one statement.
pub async fn run<C: GenericClient + Sync>(client: &C, stmt: &Stmt) -> Result<Vec<Row>> {
    let prepared = client.prepare_cached(&stmt.sql).await?;
    Ok(client.query(&prepared, &stmt.values.as_params()).await?)
}

/// Runs statements pipelined on one connection: one round trip for all of
/// them instead of one each. They run in the order given (a later one may
/// rely on an earlier one's writes or locks, never on its result): each is
/// prepared first (a round trip only the first time on a connection), so
/// none goes out ahead of another while it waits for its preparation. The
/// first failure fails the whole call; the caller's transaction is then
/// aborted and rolls back.
pub async fn pipeline<C: GenericClient + Sync>(
    client: &C,
    stmts: &[Stmt],
) -> Result<Vec<Vec<Row>>> {
    let mut prepared = Vec::with_capacity(stmts.len());
    for s in stmts {
        prepared.push(client.prepare_cached(&s.sql).await?);
    }
    let params: Vec<_> = stmts.iter().map(|s| s.values.as_params()).collect();
    // `try_join_all` polls its futures in order the first time, and a query
    // is sent on its first poll: the send order is the order given.
    let runs = prepared
        .iter()
        .zip(&params)
        .map(|(p, v)| client.query(p, v));
    Ok(futures_util::future::try_join_all(runs).await?)
}

/// A transaction on one pooled connection whose `BEGIN` is sent without
/// waiting for its answer, so it goes out with the transaction's first
/// statement, in the same round trip (`Client::transaction` waits a round
/// trip for it). Statements run on `&*tx` (a `GenericClient`); the
/// connection runs requests in the order they were sent, so every one of
/// them is inside the transaction. Savepoints work the same way.
///
/// Dropped before `commit`, it rolls back: the `ROLLBACK` (or `ROLLBACK TO
/// SAVEPOINT`) is queued ahead of whatever the connection runs next, as
/// tokio-postgres does when its own transactions are dropped. A failed
/// statement fails the ones after it, so nothing is committed past an
/// error; `commit` waits for its answer, for as long as the statement
/// timeout at most (see `Tx::commit`).
pub struct Tx<'a> {
    client: &'a Object,
    /// The savepoint this is, or `None` for the transaction itself.
    savepoint: Option<&'static str>,
    finished: bool,
}

/// Sends `sql` (a fixed statement of ours) without waiting for its answer:
/// one poll puts it on the connection's queue; the connection discards the
/// answer. Its error, if any, shows in the statement after it.
fn send_unawaited(client: &Object, sql: &str) {
    use futures_util::FutureExt;
    let client: &tokio_postgres::Client = client;
    let _ = client.batch_execute(sql).now_or_never();
}

impl<'a> Tx<'a> {
    /// Begins a transaction on `client` (sent with its first statement).
    pub fn begin(client: &'a Object) -> Tx<'a> {
        send_unawaited(client, "BEGIN");
        Tx {
            client,
            savepoint: None,
            finished: false,
        }
    }

    /// A savepoint inside this transaction (sent with its first statement):
    /// dropped unfinished, only its own work rolls back.
    pub fn savepoint(&mut self, name: &'static str) -> Tx<'_> {
        send_unawaited(self.client, &format!("SAVEPOINT {name}"));
        Tx {
            client: self.client,
            savepoint: Some(name),
            finished: false,
        }
    }

    /// Commits (a savepoint: releases it into its transaction).
    ///
    /// With a synchronous standby, PostgreSQL writes the commit locally and
    /// then waits for the standby. The statement timeout does not bound
    /// that wait (the server disarms it before it commits), so a standby
    /// that hangs without disconnecting would hold the request, and its
    /// branch's actor, for as long as it hangs; and a cancel request in
    /// that wait ends it with a WARNING and a successful `COMMIT`, a write
    /// acknowledged on one node only. So the wait is bounded here, by the
    /// statement timeout (`bound_commits_by`), and never cancelled: past
    /// the bound the outcome is unknown, the answer is 503
    /// `database_unavailable` and the connection is abandoned, never
    /// pooled again (its session goes on waiting and acknowledges nothing;
    /// see `abandon`). A client that retries with its mutation id then
    /// gets one effect: the commit's locks keep the retry waiting until
    /// the standby answers (the first attempt's answer, replayed) or the
    /// node is lost (the new leader has the commit, replayed, or has not,
    /// and makes it now). No statement and no round trip is added.
    pub async fn commit(mut self) -> Result<()> {
        self.finished = true;
        let client: &tokio_postgres::Client = self.client;
        match self.savepoint {
            None => {
                let key = connection_key(&self.client.statement_cache);
                bounded(key, client.batch_execute("COMMIT")).await?
            }
            Some(name) => {
                client
                    .batch_execute(&format!("RELEASE SAVEPOINT {name}"))
                    .await?
            }
        }
        Ok(())
    }
}

impl Tx<'_> {
    /// Rolls back (a savepoint: its own work only), waiting for the answer.
    pub async fn rollback(mut self) -> Result<()> {
        self.finished = true;
        let client: &tokio_postgres::Client = self.client;
        match self.savepoint {
            None => client.batch_execute("ROLLBACK").await?,
            Some(name) => {
                client
                    .batch_execute(&format!("ROLLBACK TO SAVEPOINT {name}"))
                    .await?
            }
        }
        Ok(())
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.client
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.finished {
            match self.savepoint {
                None => send_unawaited(self.client, "ROLLBACK"),
                Some(name) => send_unawaited(self.client, &format!("ROLLBACK TO SAVEPOINT {name}")),
            }
        }
    }
}

/// Commits a transaction of the driver's (`client.transaction()`, for
/// writes that need its savepoints or its awaited `BEGIN`) with the same
/// bounded wait for a synchronous standby as `Tx::commit`, for the same
/// reasons: past the bound the answer is 503 `database_unavailable` and
/// the connection is abandoned, its `COMMIT` still waiting and never
/// cancelled. The driver's own `commit` is refused by clippy
/// (`clippy.toml`), so no write commits unbounded.
#[allow(clippy::disallowed_methods)]
pub async fn commit(tx: Transaction<'_>) -> Result<()> {
    // The transaction shares its connection's statement cache.
    let key = connection_key(&tx.statement_cache);
    bounded(key, tx.commit()).await
}

/// Waits for `commit` (a `COMMIT` sent on the connection `key`) for as
/// long as the bound; past it, abandons the connection. Dropping the
/// unfinished commit sends nothing more: the driver has already sent the
/// `COMMIT`, and a dropped transaction that began committing rolls
/// nothing back.
async fn bounded(
    key: usize,
    commit: impl std::future::Future<Output = std::result::Result<(), tokio_postgres::Error>>,
) -> Result<()> {
    let Some(bound) = commit_bound() else {
        return Ok(commit.await?);
    };
    match tokio::time::timeout(bound, commit).await {
        Ok(done) => Ok(done?),
        Err(_) => {
            abandon(key);
            tracing::warn!(
                bound_ms = bound.as_millis() as u64,
                "COMMIT unconfirmed within the statement timeout \
                 (a synchronous standby not answering?); its connection \
                 is abandoned and the request answered 503"
            );
            Err(Error::commit_unknown())
        }
    }
}

/// The longest a `COMMIT` is waited for, in milliseconds (0: no bound).
static COMMIT_BOUND_MS: AtomicU64 = AtomicU64::new(0);

/// Bounds every `Tx::commit` by `statement_timeout` (the pool's), so no
/// request waits past it for a commit. The longest bound any pool of the
/// process asked for holds: a process builds its pools from one
/// configuration, and a shorter bound set by one pool must not cut
/// another's commits short. Zero (no statement timeout) leaves commits
/// unbounded, as the server leaves them.
pub fn bound_commits_by(statement_timeout: Duration) {
    let ms = u64::try_from(statement_timeout.as_millis()).unwrap_or(u64::MAX);
    COMMIT_BOUND_MS.fetch_max(ms, Ordering::Relaxed);
}

fn commit_bound() -> Option<Duration> {
    match COMMIT_BOUND_MS.load(Ordering::Relaxed) {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    }
}

/// The pooled connections whose `COMMIT` went unconfirmed, by the address
/// of their statement cache (one per connection, for its whole life; the
/// hook never sees the pool's own object id).
static ABANDONED: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

fn connection_key(cache: &Arc<StatementCache>) -> usize {
    Arc::as_ptr(cache).addr()
}

/// Marks the connection `key` never to be handed out again: its session
/// is still waiting for a `COMMIT` (for the synchronous standby), so a
/// request on it would queue behind that wait. The pool's pre-recycle hook
/// (`abandoned`) drops it the next time the pool would hand it out;
/// dropping it closes the socket and leaves the server's session waiting
/// on, holding its locks until the standby answers or the node goes,
/// never acknowledging. (A mark outliving its connection, when a pool is
/// closed, costs at most one needless reconnect of a later connection at
/// the same address.)
fn abandon(key: usize) {
    ABANDONED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key);
}

/// The pool's pre-recycle check: true (and forgotten) for a connection
/// `abandon` marked, which the pool then drops instead of handing out.
pub fn abandoned(client: &ClientWrapper) -> bool {
    ABANDONED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&connection_key(&client.statement_cache))
}

/// Whether the database `pool` reaches answers and takes writes: false
/// while it cannot be reached (a failover under way, a restart) and while
/// the node reached is read-only (a hot standby, where every transaction
/// is read-only, or a database an operator has set read-only). The
/// readiness probe's question.
pub async fn takes_writes(pool: &Pool) -> bool {
    let Ok(client) = pool.get().await else {
        return false;
    };
    // Schema-qualified: a test database may shadow unqualified names to
    // play a standby for the read replica.
    match client
        .query_one(
            "SELECT pg_catalog.current_setting('transaction_read_only') = 'on'",
            &[],
        )
        .await
    {
        Ok(row) => matches!(row.try_get::<_, bool>(0), Ok(false)),
        Err(_) => false,
    }
}
