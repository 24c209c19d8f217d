//! The read replica (`DATABASE_READ_URL`, a streaming standby) and which
//! reads go to it.
//!
//! Only reads that may be a few seconds old use it: the reports, the
//! dashboard, the compliance books and their CSV exports, and the sync
//! snapshot. Every write, every read inside a write and every answer that
//! must include the caller's own last write (the change feed's cursor,
//! single reads after a create, sign-in) stays on the primary.
//!
//! A task measures the standby's replay lag every `replica_check_ms` and
//! exports it (`db_replica_lag_seconds`). While the standby answers and is
//! at most `replica_max_lag_secs` behind, those reads go to it; otherwise
//! (and until the first measurement) they go to the primary, counted by
//! reason in `db_read_routing_total`.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use prometheus::{register_gauge, register_int_counter_vec, Gauge, IntCounterVec};

use actors::metrics::registered;

use crate::db::Pool;
use crate::sync::horizon::Horizon;
use crate::sync::snapshot::{self, Scope, Snapshot};
use crate::{Error, Result};

static LAG: LazyLock<Gauge> = LazyLock::new(|| {
    registered(register_gauge!(
        "db_replica_lag_seconds",
        "How far the read replica's replay is behind the primary, in seconds, at the last check (0 when caught up; +Inf when unreachable or unknown)"
    ))
});

static IN_USE: LazyLock<Gauge> = LazyLock::new(|| {
    registered(register_gauge!(
        "db_replica_in_use",
        "1 while the lag-tolerant reads go to the read replica, 0 while they go to the primary (replica lagging past the bound or unreachable)"
    ))
});

static ROUTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(register_int_counter_vec!(
        "db_read_routing_total",
        "Lag-tolerant reads (reports, dashboard, compliance books, CSV exports, sync snapshot) by the pool that served them and why",
        &["pool", "reason"]
    ))
});

/// What the last lag check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Health {
    /// Not measured yet: reads go to the primary.
    Starting = 0,
    /// Within the bound: reads go to the replica.
    InUse = 1,
    /// Behind by more than the bound (or no replay information).
    Lagging = 2,
    /// The check could not reach it.
    Unreachable = 3,
}

impl Health {
    fn from_u8(v: u8) -> Health {
        match v {
            1 => Health::InUse,
            2 => Health::Lagging,
            3 => Health::Unreachable,
            _ => Health::Starting,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Health::Starting => "starting",
            Health::InUse => "in_use",
            Health::Lagging => "lagging",
            Health::Unreachable => "unreachable",
        }
    }
}

/// The decision of one check: a measured lag (`None`: unknown) against the
/// bound.
pub fn judge(lag_secs: Option<f64>, max_lag_secs: f64) -> Health {
    match lag_secs {
        Some(lag) if lag <= max_lag_secs => Health::InUse,
        _ => Health::Lagging,
    }
}

/// The replica's lag in seconds, `NULL` when it cannot be told (a standby
/// that has replayed nothing since it started and is not streaming).
///
/// - Not in recovery (the read URL names a primary, or the primary itself):
///   nothing to wait for, 0.
/// - Streaming and everything received is replayed: caught up, 0, however
///   long ago the last transaction was (an idle primary sends nothing, so
///   `now() - pg_last_xact_replay_timestamp()` alone would grow forever).
/// - Otherwise: the age of the last replayed commit.
///
/// `pg_stat_wal_receiver` shows a role without `pg_read_all_stats` (or
/// `pg_monitor`) only that a receiver runs, not its status: for such a role
/// a running receiver counts as streaming.
///
/// The functions are named without their schema on purpose: a test
/// database shadows them to play a lagging standby.
const LAG_SQL: &str = "SELECT CASE \
      WHEN NOT pg_is_in_recovery() THEN 0::float8 \
      WHEN pg_last_wal_receive_lsn() IS NOT NULL \
           AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() \
           AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver \
                       WHERE coalesce(status, 'streaming') = 'streaming') \
        THEN 0::float8 \
      ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp()))::float8 \
    END";

/// Whether the replica has replayed the primary's WAL up to `$1` (a
/// `pg_lsn` as text). A server that is not in recovery has nothing to replay.
const REPLAYED_SQL: &str = "SELECT NOT pg_is_in_recovery() \
    OR coalesce(pg_last_wal_replay_lsn() >= $1::text::pg_lsn, false)";

/// The read replica of this process: its pool and the last check's verdict.
pub struct Replica {
    pub pool: Pool,
    max_lag_secs: f64,
    check_every: Duration,
    snapshot_wait: Duration,
    health: AtomicU8,
}

impl Replica {
    /// The replica reached through `pool` (which should connect lazily, so
    /// a replica that is down does not stop the start): reads go to it while
    /// it is at most `max_lag_secs` behind, as measured every `check_every`;
    /// a snapshot waits at most `snapshot_wait` for it to catch up.
    pub fn new(
        pool: Pool,
        max_lag_secs: f64,
        check_every: Duration,
        snapshot_wait: Duration,
    ) -> Replica {
        LAG.set(f64::INFINITY);
        IN_USE.set(0.0);
        Replica {
            pool,
            max_lag_secs,
            check_every: check_every.max(Duration::from_millis(10)),
            snapshot_wait,
            health: AtomicU8::new(Health::Starting as u8),
        }
    }

    /// How often the lag is measured.
    pub fn check_every(&self) -> Duration {
        self.check_every
    }

    pub fn health(&self) -> Health {
        Health::from_u8(self.health.load(Ordering::Relaxed))
    }

    fn set_health(&self, health: Health) -> Health {
        IN_USE.set(if health == Health::InUse { 1.0 } else { 0.0 });
        Health::from_u8(self.health.swap(health as u8, Ordering::Relaxed))
    }

    /// Measures the lag once and decides where the reads go.
    pub async fn check(&self) -> Health {
        let measured = async {
            let client = self.pool.get().await?;
            let row = client.query_one(LAG_SQL, &[]).await?;
            Ok::<Option<f64>, Error>(row.get(0))
        };
        // A check never outlives its period by much: a standby that hangs
        // counts as unreachable.
        let wait = self.check_every.max(Duration::from_secs(2));
        let (health, lag) = match tokio::time::timeout(wait, measured).await {
            Ok(Ok(lag)) => (judge(lag, self.max_lag_secs), lag),
            Ok(Err(_)) | Err(_) => (Health::Unreachable, None),
        };
        LAG.set(lag.unwrap_or(f64::INFINITY));
        let before = self.set_health(health);
        if before != health {
            match health {
                Health::InUse => tracing::info!(lag_secs = ?lag, "read replica in use"),
                Health::Lagging => tracing::warn!(
                    lag_secs = ?lag,
                    bound_secs = self.max_lag_secs,
                    "read replica behind its bound; lag-tolerant reads go to the primary"
                ),
                Health::Unreachable => {
                    tracing::warn!("read replica unreachable; lag-tolerant reads go to the primary")
                }
                Health::Starting => {}
            }
        }
        health
    }

    /// A connection to the replica, if it is in use and gives one now; a
    /// replica that fails to give one is marked unreachable until the next
    /// check finds it again.
    async fn client(&self) -> Option<Object> {
        if self.health() != Health::InUse {
            return None;
        }
        match self.pool.get().await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(error = ?e.to_string(), "read replica unreachable; reading from the primary");
                LAG.set(f64::INFINITY);
                self.set_health(Health::Unreachable);
                None
            }
        }
    }
}

fn count(pool: &str, reason: &str) {
    ROUTED.with_label_values(&[pool, reason]).inc();
}

/// Where the lag-tolerant reads of one request go: the primary and the
/// replica, if one is configured.
///
/// Which reads tolerate lag is decided by the domain, not by its callers: an
/// area whose figures may be a few seconds old (the dashboard, the reports,
/// the compliance books, the device register) opens its connection with its
/// own `connect(&Reads)`, so the API and the console read the same place.
pub struct Reads<'a> {
    pub primary: &'a Pool,
    pub replica: Option<&'a Replica>,
}

impl Reads<'_> {
    /// The pool for a lag-tolerant read: the replica while it is in use,
    /// else the primary.
    pub fn pool(&self) -> &Pool {
        match self.replica {
            Some(r) if r.health() == Health::InUse => {
                count("replica", "in_use");
                &r.pool
            }
            Some(r) => {
                count("primary", r.health().as_str());
                self.primary
            }
            None => self.primary,
        }
    }

    /// A connection for a lag-tolerant read: the streaming standby's while
    /// it is in use and reachable, else the primary's.
    pub async fn standby(&self) -> Result<Object> {
        if let Some(r) = self.replica {
            match r.client().await {
                Some(c) => {
                    count("replica", "in_use");
                    return Ok(c);
                }
                None => count("primary", r.health().as_str()),
            }
        }
        Ok(self.primary.get().await?)
    }

    /// The sync snapshot, from the replica when that gives exactly what the
    /// primary would.
    ///
    /// The snapshot promises that its arrays hold exactly the writes up to
    /// its `max_rev`. On the primary, `snapshot::read` gets that by waiting
    /// for the change-log writes in flight; a standby cannot see the
    /// primary's writes in flight, so a rev committed late (rev 10 after
    /// rev 11) could be missing below a standby's `max_rev` for good. So:
    /// the primary's settled horizon and its WAL position are taken first,
    /// the replica must have replayed that position (waiting at most
    /// `replica_snapshot_wait_ms`), and its snapshot is used only when its
    /// `max_rev` is that horizon: then every rev up to it is committed and
    /// replayed, and none after it is visible. Any other case (writes
    /// committed in between, the replica behind) reads the primary.
    ///
    /// A standby names no timeline of its own: its snapshot carries the
    /// primary's epoch, read with the primary's head, and only when both
    /// servers are of the same cluster (same system identifier). A replica
    /// that has been promoted meanwhile names its own epoch, which must be
    /// the one the primary named.
    pub async fn snapshot(&self, horizon: &Horizon, scope: Scope) -> Result<Snapshot> {
        let Some(replica) = self.replica.filter(|r| r.health() == Health::InUse) else {
            if let Some(r) = self.replica {
                count("primary", r.health().as_str());
            }
            return snapshot::read(self.primary, horizon, scope).await;
        };
        // The primary's highest committed rev, once every rev up to it is
        // settled (no write that drew a lower rev still in flight).
        let head = horizon.look_all(&self.primary.get().await?).await?;
        let top = head.top;
        let Some(epoch) = head.identity.epoch() else {
            // The write pool reached a standby: a failover in progress.
            return Err(Error::database_unavailable(2));
        };
        let settled = horizon
            .settle(self.primary, top, replica.snapshot_wait)
            .await?;
        if settled < top {
            count("primary", "snapshot_behind");
            return snapshot::read(self.primary, horizon, scope).await;
        }
        let fence: String = self
            .primary
            .get()
            .await?
            .query_one("SELECT pg_current_wal_insert_lsn()::text", &[])
            .await?
            .get(0);
        if !replayed(replica, &fence).await {
            count("primary", "snapshot_behind");
            return snapshot::read(self.primary, horizon, scope).await;
        }
        // The standby settles its own horizon over what it replayed.
        // A standby cannot draw a transaction id, which the horizon's check
        // needs: then (or on any other failure there) the primary answers.
        let Ok(mut from_replica) = snapshot::read(&replica.pool, &Horizon::new(), scope).await
        else {
            count("primary", "snapshot_failed");
            return snapshot::read(self.primary, horizon, scope).await;
        };
        let same_history = from_replica.server.system_id == head.identity.system_id
            && (from_replica.epoch.is_empty() || from_replica.epoch == epoch);
        if from_replica.max_rev == top && same_history {
            from_replica.epoch = epoch;
            count("replica", "in_use");
            return Ok(from_replica);
        }
        count("primary", "snapshot_moved");
        snapshot::read(self.primary, horizon, scope).await
    }
}

/// Whether the replica replays up to `lsn` within its snapshot wait.
async fn replayed(replica: &Replica, lsn: &str) -> bool {
    let Ok(client) = replica.pool.get().await else {
        return false;
    };
    let deadline = Instant::now() + replica.snapshot_wait;
    loop {
        match client.query_one(REPLAYED_SQL, &[&lsn]).await {
            Ok(row) if row.get::<_, bool>(0) => return true,
            Ok(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{judge, Health};

    #[test]
    fn a_lag_within_the_bound_keeps_the_replica_in_use() {
        assert_eq!(judge(Some(0.0), 5.0), Health::InUse);
        assert_eq!(judge(Some(5.0), 5.0), Health::InUse);
        assert_eq!(judge(Some(0.0), 0.0), Health::InUse);
    }

    #[test]
    fn a_lag_past_the_bound_or_unknown_sends_reads_to_the_primary() {
        assert_eq!(judge(Some(5.001), 5.0), Health::Lagging);
        assert_eq!(judge(Some(3600.0), 5.0), Health::Lagging);
        assert_eq!(judge(None, 5.0), Health::Lagging);
        assert_eq!(judge(Some(f64::NAN), 5.0), Health::Lagging);
    }

    #[test]
    fn health_round_trips_through_its_byte() {
        for h in [
            Health::Starting,
            Health::InUse,
            Health::Lagging,
            Health::Unreachable,
        ] {
            assert_eq!(Health::from_u8(h as u8), h);
        }
    }
}
