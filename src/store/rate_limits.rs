//! Fixed-window counters kept in the database, so limits hold across every
//! server process.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, OnConflict, Query};

use actors::{db, Result};

fn window_start(window_secs: i64) -> DateTime<Utc> {
    let now = Utc::now().timestamp();
    let start = now - now.rem_euclid(std::cmp::max(window_secs, 1));
    DateTime::from_timestamp(start, 0).unwrap_or_else(Utc::now)
}

/// Seconds until the current window ends (the Retry-After value).
pub fn retry_after(window_secs: i64) -> u64 {
    let end = window_start(window_secs).timestamp() + std::cmp::max(window_secs, 1);
    std::cmp::max(end - Utc::now().timestamp(), 1) as u64
}

/// Hits recorded for `key` in the current window.
pub async fn count<C: GenericClient + Sync>(c: &C, key: &str, window_secs: i64) -> Result<i32> {
    let q = Query::select()
        .column("hits")
        .from("rate_limits")
        .and_where(Expr::col("key").eq(key))
        .and_where(Expr::col("window_start").eq(window_start(window_secs)))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)).unwrap_or(0))
}

/// Records one hit for `key` and returns the window's count including it.
pub async fn hit<C: GenericClient + Sync>(c: &C, key: &str, window_secs: i64) -> Result<i32> {
    let q = Query::insert()
        .into_table("rate_limits")
        .columns(["key", "window_start", "hits"])
        .values_panic([key.into(), window_start(window_secs).into(), 1.into()])
        .on_conflict(
            OnConflict::columns(["key", "window_start"])
                .value("hits", Expr::col(("rate_limits", "hits")).add(1))
                .to_owned(),
        )
        .returning_col("hits")
        .to_owned();
    Ok(db::fetch_one(c, &q).await?.get(0))
}

/// Drops windows older than a day (called opportunistically).
pub async fn prune<C: GenericClient + Sync>(c: &C) -> Result<()> {
    let q = Query::delete()
        .from_table("rate_limits")
        .and_where(Expr::col("window_start").lt(Utc::now() - chrono::Duration::days(1)))
        .to_owned();
    db::execute(c, &q).await?;
    Ok(())
}
