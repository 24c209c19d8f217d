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
