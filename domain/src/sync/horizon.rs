//! The settled horizon of the change log: a rev such that every rev at or
//! below it is committed or rolled back for good. A till's cursor never
//! passes it, so a rev drawn early and committed late is never skipped.
//!
//! No lock is taken, by readers or writers. The rule that makes it work is
//! in `changes.rs`: a transaction gets its id before it draws a rev. So:
//!
//! 1. A *sample* reads the sequence's last value `h0` and only then draws a
//!    fresh transaction id `b`, in one statement. Every transaction that drew
//!    a rev up to `h0` drew it before the read, so it had its id before `b`.
//! 2. Once a later snapshot's `xmin` (the oldest transaction still running,
//!    `pg_snapshot_xmin(pg_current_snapshot())`) is at least `b`, every
//!    transaction older than `b` has ended: `h0` is settled.
//!
//! Each server process keeps its samples in memory, oldest first, and
//! settles them as it sees `xmin` move (every feed read reports it). A
//! reader that needs a horizon at least `target` waits for it; it waits for
//! the writes that were in flight, never the other way round, and between
//! checks it holds no connection. One check at a time runs per process;
//! other waiters wait for its news.
//!
//! What is settled holds for one history of the database (`epoch.rs`):
//! every look reads the epoch with the revs, and a new one (a failover, a
//! restore) starts the horizon again from nothing, since the new primary's
//! sequence and transaction ids may be behind what this process saw.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use deadpool_postgres::GenericClient;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::db::{self, Pool};
use crate::sync::epoch::{self, Identity};
use crate::Result;

/// First pause between two checks of a waiter, doubled up to `MAX_PAUSE`.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
const MAX_PAUSE: Duration = Duration::from_millis(10);

/// Most samples waiting to settle.
const MAX_PENDING: usize = 1024;

/// One sample: every rev up to `h0` is settled once every transaction older
/// than `xid` has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    h0: i64,
    xid: i64,
}

#[derive(Debug, Default)]
struct State {
    /// Every rev up to this is settled (only grows within one epoch).
    settled: i64,
    /// Samples not yet settled, in the order taken (`h0` and `xid` grow).
    pending: VecDeque<Sample>,
    /// The epoch the above was learnt in (`None` until the first look at a
    /// primary).
    epoch: Option<String>,
}

impl State {
    /// Takes note of the epoch a primary just named; true when it is not
    /// the one known, and what was known is forgotten.
    fn adopt(&mut self, epoch: &str) -> bool {
        match self.epoch.as_deref() {
            Some(known) if known == epoch => false,
            None => {
                self.epoch = Some(epoch.to_owned());
                false
            }
            Some(_) => {
                *self = State {
                    epoch: Some(epoch.to_owned()),
                    ..State::default()
                };
                true
            }
        }
    }

    /// Settles the samples whose transaction-id bound `xmin` has reached.
    fn observe(&mut self, xmin: i64) -> bool {
        let before = self.settled;
        while let Some(s) = self.pending.front().copied() {
            if s.xid > xmin {
                break;
            }
            self.settled = self.settled.max(s.h0);
            self.pending.pop_front();
        }
        self.settled > before
    }

    fn push(&mut self, s: Sample) {
        // Samples come in the order taken, so a later one settles no
        // earlier: it is only worth keeping when it covers more revs.
        if s.h0 <= self.newest_h0() {
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            // A long transaction holds `xmin` back: keep the oldest (they
            // settle first) and let the newest stand for the rest.
            self.pending.pop_back();
        }
        self.pending.push_back(s);
    }

    fn newest_h0(&self) -> i64 {
        self.pending.back().map_or(self.settled, |s| s.h0)
    }
}

/// One process's view of the settled horizon of one database.
#[derive(Debug)]
pub struct Horizon {
    state: Mutex<State>,
    /// Held by the one waiter that checks with the database.
    checker: tokio::sync::Mutex<()>,
    /// The settled rev, for waiters that are not checking.
    news: watch::Sender<i64>,
}

impl Default for Horizon {
    fn default() -> Self {
        Horizon {
            state: Mutex::new(State::default()),
            checker: tokio::sync::Mutex::new(()),
            news: watch::channel(0).0,
        }
    }
}

/// What a look reads: the highest visible rev, the snapshot's `xmin`, the
/// head of the rev sequence and the server's identity, in one statement.
pub struct Seen {
    pub top: i64,
    pub xmin: i64,
    /// The highest rev the sequence has handed out (committed or not): no
    /// cursor of this epoch can be beyond it.
    pub head: i64,
    pub identity: Identity,
}

impl Seen {
    /// The head of the feed: no cursor the server handed out in this epoch
    /// is beyond it.
    pub fn head(&self) -> i64 {
        self.top.max(self.head)
    }
}

impl Horizon {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every rev up to this is settled.
    pub fn settled(&self) -> i64 {
        self.lock().settled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this plain-data lock leaves valid data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes note of the epoch a primary named: a new one forgets what was
    /// settled (the new history's revs settle from nothing).
    pub fn adopt(&self, epoch: &str) {
        if self.lock().adopt(epoch) {
            tracing::warn!(epoch, "the database's epoch changed (failover or restore): the feed's horizon starts again");
            self.news.send_replace(0);
        }
    }

    /// Records a snapshot's `xmin`: samples it reaches are settled.
    pub fn observe(&self, xmin: i64) {
        let (moved, settled) = {
            let mut s = self.lock();
            (s.observe(xmin), s.settled)
        };
        if moved {
            self.news.send_replace(settled);
        }
    }

    fn push(&self, sample: Sample) {
        self.lock().push(sample);
    }

    /// The highest committed rev and the oldest running transaction, in one
    /// read (the `xmin` and a primary's epoch are recorded).
    pub async fn look<C: GenericClient + Sync>(&self, c: &C) -> Result<i64> {
        Ok(self.look_all(c).await?.top)
    }

    /// `look`, answering everything the statement read.
    pub async fn look_all<C: GenericClient + Sync>(&self, c: &C) -> Result<Seen> {
        let seen = look(c).await?;
        if let Some(epoch) = seen.identity.epoch() {
            self.adopt(&epoch);
        }
        self.observe(seen.xmin);
        Ok(seen)
    }

    /// A settled horizon of at least `target`: waits while writes that drew
    /// revs up to `target` are still in flight, at most `wait`, then answers
    /// the best it knows (which may be lower: the caller then reads less and
    /// never skips).
    pub async fn settle(&self, pool: &Pool, target: i64, wait: Duration) -> Result<i64> {
        let deadline = Instant::now() + wait;
        let mut news = self.news.subscribe();
        let mut pause = FIRST_PAUSE;
        loop {
            let settled = self.settled();
            let now = Instant::now();
            if settled >= target || now >= deadline {
                return Ok(settled);
            }
            let left = deadline - now;
            match self.checker.try_lock() {
                Ok(_checking) => {
                    let sample = self.lock().newest_h0() < target;
                    self.check(pool, sample).await?;
                    if self.settled() >= target {
                        return Ok(self.settled());
                    }
                    // Still checking: the others keep waiting for news.
                    tokio::time::sleep(pause.min(left)).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                Err(_) => {
                    let _ = tokio::time::timeout(MAX_PAUSE.min(left), news.changed()).await;
                }
            }
        }
    }

    /// One round trip: reads `xmin`, and with `sample` takes a new sample.
    async fn check(&self, pool: &Pool, sample: bool) -> Result<()> {
        let client = pool.get().await?;
        if sample {
            let (s, xmin) = take_sample(&client).await?;
            self.push(s);
            self.observe(xmin);
        } else {
            self.look_all(&client).await?;
        }
        Ok(())
    }
}

fn values() -> sea_query::Values {
    sea_query::Values(Vec::new())
}

/// The highest visible rev and the `xmin` of the same snapshot, the
/// sequence's head and the server's identity.
pub async fn look<C: GenericClient + Sync>(c: &C) -> Result<Seen> {
    let sql = format!(
        "SELECT coalesce(max(rev), 0)::bigint AS top,
                pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin,
                (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END
                   FROM change_log_rev_seq) AS head,
                {}
           FROM change_log",
        epoch::COLUMNS
    );
    let rows = db::raw_all(c, &sql, values()).await?;
    let row = rows
        .first()
        .ok_or_else(|| crate::Error::internal("no row from the change-log look"))?;
    Ok(Seen {
        top: row.get("top"),
        xmin: row.get("xmin"),
        head: row.get("head"),
        identity: Identity::from_row(row),
    })
}

/// A sample (the sequence first, then a new transaction id: the subquery
/// is evaluated before the outer select list) and the statement's `xmin`.
async fn take_sample<C: GenericClient + Sync>(c: &C) -> Result<(Sample, i64)> {
    let rows = db::raw_all(
        c,
        "SELECT s.h0,
                pg_current_xact_id()::text::bigint AS xid,
                pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin
           FROM (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END AS h0
                   FROM change_log_rev_seq OFFSET 0) AS s",
        values(),
    )
    .await?;
    let row = rows
        .first()
        .ok_or_else(|| crate::Error::internal("no row from the horizon sample"))?;
    Ok((
        Sample {
            h0: row.get("h0"),
            xid: row.get("xid"),
        },
        row.get("xmin"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(h0: i64, xid: i64) -> Sample {
        Sample { h0, xid }
    }

    #[test]
    fn a_new_epoch_forgets_what_was_settled() {
        let mut st = State::default();
        assert!(!st.adopt("1-1"));
        st.push(s(10, 100));
        st.observe(100);
        st.push(s(20, 200));
        assert!(!st.adopt("1-1"));
        assert_eq!(st.settled, 10);
        assert!(st.adopt("1-2"));
        assert_eq!(st.settled, 0);
        assert!(st.pending.is_empty());
        assert_eq!(st.epoch.as_deref(), Some("1-2"));
    }

    #[test]
    fn a_sample_settles_once_xmin_reaches_its_id() {
        let mut st = State::default();
        st.push(s(10, 100));
        assert!(!st.observe(99));
        assert_eq!(st.settled, 0);
        assert!(st.observe(100));
        assert_eq!(st.settled, 10);
        assert!(st.pending.is_empty());
    }

    #[test]
    fn samples_settle_in_order_and_the_horizon_never_goes_back() {
        let mut st = State::default();
        st.push(s(10, 100));
        st.push(s(20, 150));
        st.observe(120);
        assert_eq!(st.settled, 10);
        st.observe(110);
        assert_eq!(st.settled, 10);
        st.observe(200);
        assert_eq!(st.settled, 20);
        // An old sample adds nothing.
        st.push(s(5, 300));
        assert!(st.pending.is_empty());
    }

    #[test]
    fn a_later_sample_is_kept_only_when_it_covers_more() {
        let mut st = State::default();
        st.push(s(10, 100));
        st.push(s(10, 120));
        st.push(s(30, 130));
        assert_eq!(st.pending, VecDeque::from([s(10, 100), s(30, 130)]));
        assert_eq!(st.newest_h0(), 30);
        st.observe(129);
        assert_eq!(st.settled, 10);
    }

    #[test]
    fn the_queue_is_bounded_and_keeps_its_oldest_samples() {
        let mut st = State::default();
        for i in 0..(MAX_PENDING as i64 + 10) {
            st.push(s(i + 1, 1000 + i));
        }
        assert_eq!(st.pending.len(), MAX_PENDING);
        assert_eq!(st.pending.front(), Some(&s(1, 1000)));
        assert_eq!(st.newest_h0(), MAX_PENDING as i64 + 10);
    }
}
