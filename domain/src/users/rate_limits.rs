//! Fixed-window counters kept in the database, so limits hold across every
//! server process.

use crate::tables::Table;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, OnConflict, Query};

use crate::{db, Result};

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
        .from(Table::RateLimits)
        .and_where(Expr::col("key").eq(key))
        .and_where(Expr::col("window_start").eq(window_start(window_secs)))
        .to_owned();
    Ok(db::fetch_opt(c, &q).await?.map(|r| r.get(0)).unwrap_or(0))
}

/// Records one hit for `key` and returns the window's count including it.
pub async fn hit<C: GenericClient + Sync>(c: &C, key: &str, window_secs: i64) -> Result<i32> {
    let q = Query::insert()
        .into_table(Table::RateLimits)
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

/// Slots claimed by one attempt, one per key, in the window current when it
/// was claimed: given back with [`release`] when the attempt turns out not to
/// count (a success, or a refusal before anything was evaluated).
#[derive(Debug)]
pub struct Claim {
    window_start: DateTime<Utc>,
    /// Each key with the window's count including this claim.
    counts: Vec<(String, i32)>,
}

impl Claim {
    /// True when any key is over its `limit` (same order as claimed).
    pub fn over(&self, limits: &[i32]) -> bool {
        self.counts
            .iter()
            .zip(limits)
            .any(|((_, hits), limit)| hits > limit)
    }
}

/// Claims one slot of every key at once, in one statement that counts and
/// answers: concurrent claims are serialised on the counter rows, so with a
/// limit of `n` at most `n` of them see a count within it, however many run
/// together. Keys are locked in the order given; callers give them in one
/// fixed order (email before address), so claims never wait on each other in
/// a cycle.
pub async fn claim<C: GenericClient + Sync>(
    c: &C,
    keys: &[&str],
    window_secs: i64,
) -> Result<Claim> {
    let start = window_start(window_secs);
    let mut q = Query::insert()
        .into_table(Table::RateLimits)
        .columns(["key", "window_start", "hits"])
        .on_conflict(
            OnConflict::columns(["key", "window_start"])
                .value("hits", Expr::col(("rate_limits", "hits")).add(1))
                .to_owned(),
        )
        .returning(Query::returning().columns(["key", "hits"]))
        .to_owned();
    for key in keys {
        q.values_panic([(*key).into(), start.into(), 1.into()]);
    }
    let rows = db::fetch_all(c, &q).await?;
    let counts = keys
        .iter()
        .map(|key| {
            let hits = rows
                .iter()
                .find(|r| r.get::<_, &str>(0) == *key)
                .map(|r| r.get(1))
                .unwrap_or(0);
            ((*key).to_owned(), hits)
        })
        .collect();
    Ok(Claim {
        window_start: start,
        counts,
    })
}

/// Gives the slots of `claim` back (never below zero), one key per
/// statement in the claim's order: a release never holds two counter rows
/// at once, so it cannot wait in a cycle with a claim (which locks them in
/// that order) and deadlock.
pub async fn release<C: GenericClient + Sync>(c: &C, claim: &Claim) -> Result<()> {
    for (key, _) in &claim.counts {
        let q = Query::update()
            .table(Table::RateLimits)
            .value("hits", Expr::col("hits").sub(1))
            .and_where(Expr::col("key").eq(key.as_str()))
            .and_where(Expr::col("window_start").eq(claim.window_start))
            .and_where(Expr::col("hits").gt(0))
            .to_owned();
        db::execute(c, &q).await?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(counts: &[(&str, i32)]) -> Claim {
        Claim {
            window_start: window_start(60),
            counts: counts.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect(),
        }
    }

    #[test]
    fn a_claim_is_over_when_any_count_passes_its_limit() {
        // The count includes the claim itself: the limit-th claim is within.
        assert!(!claim(&[("e", 10), ("a", 100)]).over(&[10, 100]));
        assert!(claim(&[("e", 11), ("a", 1)]).over(&[10, 100]));
        assert!(claim(&[("e", 1), ("a", 101)]).over(&[10, 100]));
        assert!(!claim(&[("e", 1)]).over(&[1]));
    }

    #[test]
    fn windows_are_aligned_and_retry_after_is_within_one() {
        let start = window_start(300).timestamp();
        assert_eq!(start % 300, 0);
        assert!((1..=300).contains(&retry_after(300)));
        // A zero window is treated as one second, never a division by zero.
        assert!(retry_after(0) >= 1);
    }
}
