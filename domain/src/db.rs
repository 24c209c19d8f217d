//! Thin helpers that run sea-query statements through a pooled connection
//! with cached prepared statements, so every call site binds parameters.

use deadpool_postgres::GenericClient;
use sea_query::PostgresQueryBuilder;
use sea_query_postgres::{PostgresBinder, PostgresValues};
use tokio_postgres::Row;

use crate::error::Result;

pub use deadpool_postgres::{Pool, Transaction};

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
