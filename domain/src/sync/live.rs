//! What keeps the change feed live in one server process: the settled
//! horizon (`horizon.rs`), the highest committed rev per branch that parked
//! long polls wait on, and the PostgreSQL `LISTEN/NOTIFY` link that tells
//! every process when any of them committed changes.
//!
//! Why writers do not `NOTIFY` in their own transactions: PostgreSQL queues
//! notifications under one lock held from just before commit until the
//! commit is flushed, so every notifying transaction commits alone. On the
//! 2-core test machine 16 clients inserting one row each committed 5,056
//! transactions/s without a notification and 339/s with one. Instead, each
//! process's *scanner* looks for new committed changes whenever this process
//! has appended some (a few looks, the first after 10 ms, as the commit lands)
//! and sends one `NOTIFY` (outside any write transaction) when it finds
//! them; every process's *listener* (one connection outside the pool,
//! reconnecting when lost) hears it and makes its own scanner look. The
//! scanner publishes the highest rev per branch, each on its own channel; a
//! parked poll wakes only when its branch's (or the organisation-wide) rev
//! moves. While polls are
//! parked the scanner also looks once a second, for writes made outside the
//! service.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{watch, Notify};
use tokio_postgres::{AsyncMessage, NoTls};
use uuid::Uuid;

use crate::db::{self, Pool};
use crate::sync::changes;
use crate::sync::horizon::Horizon;
use crate::sync::shared_feed::SharedFeed;
use crate::sync::snapshot::Scope;
use crate::{Error, Result};

/// The channel every process listens on.
pub const CHANNEL: &str = "pharmacy_change_log";

/// When the scanner looks after this process appended changes: the commit
/// usually lands within a few ms, a slow one within a second.
const LOOKS_AFTER_A_WRITE: [u64; 7] = [10, 10, 20, 40, 80, 160, 320];

/// How often the scanner looks while polls are parked, whatever it heard.
const PARKED_LOOK: Duration = Duration::from_secs(1);

/// How far below the last rev seen a scan starts at most: a rev drawn early
/// that commits late is still seen.
const SCAN_BACK: i64 = 500;

/// The highest committed rev seen, for the whole log, the
/// organisation-wide rows, and each branch: one channel each, so a commit
/// wakes only the parked polls that may see it.
struct Tops {
    all: watch::Sender<i64>,
    org: watch::Sender<i64>,
    branches: Mutex<HashMap<Uuid, watch::Sender<i64>>>,
}

impl Default for Tops {
    fn default() -> Self {
        Tops {
            all: watch::channel(0).0,
            org: watch::channel(0).0,
            branches: Mutex::new(HashMap::new()),
        }
    }
}

/// Raises a channel's value; true when it moved.
fn raise(tx: &watch::Sender<i64>, rev: i64) -> bool {
    tx.send_if_modified(|top| {
        let moved = rev > *top;
        if moved {
            *top = rev;
        }
        moved
    })
}

impl Tops {
    fn branch(&self, b: Uuid) -> watch::Sender<i64> {
        let mut map = self.branches.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(b).or_insert_with(|| watch::channel(0).0).clone()
    }

    /// Merges a scan's maxima; true when any of them moved.
    fn merge(&self, rows: &[(Option<Uuid>, i64)]) -> bool {
        let mut moved = false;
        for &(branch, rev) in rows {
            moved |= match branch {
                None => raise(&self.org, rev),
                Some(b) => raise(&self.branch(b), rev),
            };
            moved |= raise(&self.all, rev);
        }
        moved
    }

    fn waiter(&self, scope: Scope) -> Waiter {
        match scope {
            None => Waiter {
                a: self.all.subscribe(),
                b: None,
            },
            Some(b) => Waiter {
                a: self.org.subscribe(),
                b: Some(self.branch(b).subscribe()),
            },
        }
    }
}

/// What a parked poll waits on: the highest rev its caller may see.
pub struct Waiter {
    a: watch::Receiver<i64>,
    b: Option<watch::Receiver<i64>>,
}

impl Waiter {
    /// The highest rev the caller may see, as last published (marked seen).
    pub fn top(&mut self) -> i64 {
        let a = *self.a.borrow_and_update();
        let b = self.b.as_mut().map_or(0, |b| *b.borrow_and_update());
        a.max(b)
    }

    /// Until it may have moved; an error when the process is stopping.
    pub async fn changed(&mut self) -> std::result::Result<(), watch::error::RecvError> {
        match self.b.as_mut() {
            None => self.a.changed().await,
            Some(b) => tokio::select! {
                r = self.a.changed() => r,
                r = b.changed() => r,
            },
        }
    }
}

/// The feed's live state in one process (one per database pool).
pub struct Live {
    pub horizon: Horizon,
    /// The feed reads of long polls woken together.
    pub reads: SharedFeed,
    tops: Tops,
    parked: AtomicUsize,
    max_parked: usize,
    /// A notification arrived (or the listener reconnected): look.
    heard: Arc<Notify>,
    /// The listener's connection, to send notifications on.
    notifier: tokio::sync::Mutex<Option<tokio_postgres::Client>>,
    /// Dropped with `Live`: the background tasks end.
    _alive: watch::Sender<()>,
    alive: watch::Receiver<()>,
}

/// A parked poll's place; frees it when dropped.
pub struct Parked<'a>(&'a Live);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.parked.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Live {
    /// The live state without background tasks (nothing wakes parked polls
    /// but their own time limit); `start` adds them.
    pub fn new(max_parked: usize) -> Arc<Live> {
        let (alive_tx, alive_rx) = watch::channel(());
        Arc::new(Live {
            horizon: Horizon::new(),
            reads: SharedFeed::default(),
            tops: Tops::default(),
            parked: AtomicUsize::new(0),
            max_parked,
            heard: Arc::new(Notify::new()),
            notifier: tokio::sync::Mutex::new(None),
            _alive: alive_tx,
            alive: alive_rx,
        })
    }

    /// The live state with its scanner and, given the database's
    /// connection string, its listener. Call inside a Tokio runtime.
    pub fn start(pool: Pool, listen_url: Option<String>, max_parked: usize) -> Arc<Live> {
        let live = Live::new(max_parked);
        tokio::spawn(scanner(
            Arc::downgrade(&live),
            live.heard.clone(),
            pool,
            live.alive.clone(),
        ));
        match listen_url {
            Some(url) => {
                tokio::spawn(listener(Arc::downgrade(&live), url, live.alive.clone()));
            }
            None => tracing::warn!(
                "no database URL for the change-feed listener: long polls wake only for this process's writes"
            ),
        }
        live
    }

    /// Follows the highest committed rev a caller of `scope` may see.
    pub fn waiter(&self, scope: Scope) -> Waiter {
        self.tops.waiter(scope)
    }

    /// Polls parked right now.
    pub fn parked(&self) -> usize {
        self.parked.load(Ordering::Acquire)
    }

    /// A place for one more parked poll, or 503 when all are taken.
    pub fn park(&self) -> Result<Parked<'_>> {
        let taken = self
            .parked
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_parked).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Parked(self)),
            Err(_) => Err(Error::Unavailable {
                detail: "This server holds as many waiting change polls as it may; poll again \
                         after `Retry-After` seconds."
                    .to_owned(),
                retry_after: 2,
                code: crate::error::Code::Busy,
            }),
        }
    }

    /// Reads the committed changes above what was seen, by branch, and
    /// publishes their maxima; true when any moved.
    async fn scan(&self, pool: &Pool) -> Result<bool> {
        let client = pool.get().await?;
        let seen = *self.tops.all.borrow();
        let rows = if seen == 0 {
            // First look: the current maximum is the baseline.
            let top = self.horizon.look(&client).await?;
            vec![(None, top)]
        } else {
            let from = self
                .horizon
                .settled()
                .max(seen.saturating_sub(SCAN_BACK))
                .min(seen);
            let q = sea_query::raw_query!(
                PostgresQueryBuilder,
                r#"SELECT branch_id, max(rev) AS top,
                          pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin
                     FROM change_log WHERE rev > {from} GROUP BY branch_id"#
            );
            let found = db::raw_all(&client, &q.sql, q.values).await?;
            if let Some(xmin) = found.first().map(|r| r.get::<_, i64>("xmin")) {
                self.horizon.observe(xmin);
            }
            found
                .iter()
                .map(|r| (r.get("branch_id"), r.get("top")))
                .collect()
        };
        drop(client);
        Ok(self.tops.merge(&rows))
    }

    /// Tells the other processes (and this one's listener) to look.
    async fn announce(&self, pool: &Pool) {
        let q = format!("NOTIFY {CHANNEL}");
        let sent = {
            let notifier = self.notifier.lock().await;
            match notifier.as_ref() {
                Some(c) => c.batch_execute(&q).await.is_ok(),
                None => false,
            }
        };
        if !sent {
            if let Ok(c) = pool.get().await {
                if let Err(e) = c.batch_execute(&q).await {
                    tracing::warn!(error = %e, "could not announce new changes");
                }
            }
        }
    }
}

/// Looks for new committed changes when this process appended some, when
/// another process announced some, and once a second while polls are
/// parked; announces what this process's writes committed.
async fn scanner(
    live: std::sync::Weak<Live>,
    heard: Arc<Notify>,
    pool: Pool,
    mut alive: watch::Receiver<()>,
) {
    let mut local = changes::local_writes();
    loop {
        let Some(this) = live.upgrade() else { return };
        let parked = this.parked() > 0;
        drop(this);
        let after_write = tokio::select! {
            r = local.changed() => {
                if r.is_err() { return; }
                true
            }
            _ = heard.notified() => false,
            _ = tokio::time::sleep(PARKED_LOOK), if parked => false,
            _ = tokio::time::sleep(PARKED_LOOK), if !parked => continue,
            _ = alive.changed() => return,
        };
        let Some(this) = live.upgrade() else { return };
        if !after_write {
            if let Err(e) = this.scan(&pool).await {
                tracing::debug!(error = ?e, "change-feed scan failed");
            }
            continue;
        }
        // Our own write: look as its commit lands, then tell the others.
        let mut looks = LOOKS_AFTER_A_WRITE.iter();
        while let Some(ms) = looks.next() {
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            match this.scan(&pool).await {
                Ok(true) => {
                    this.announce(&pool).await;
                    if !local.has_changed().unwrap_or(false) {
                        break;
                    }
                    // More writes since: start over.
                    local.borrow_and_update();
                    looks = LOOKS_AFTER_A_WRITE.iter();
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::debug!(error = ?e, "change-feed scan failed");
                    break;
                }
            }
        }
    }
}

/// Holds the `LISTEN` connection, reconnecting when it is lost (and then
/// looking at once, for what was announced meanwhile).
async fn listener(live: std::sync::Weak<Live>, url: String, mut alive: watch::Receiver<()>) {
    let mut pause = Duration::from_millis(100);
    loop {
        match tokio_postgres::connect(&url, NoTls).await {
            Ok((client, mut conn)) => {
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<AsyncMessage>();
                let driver = tokio::spawn(async move {
                    let mut messages =
                        futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                    while let Some(Ok(m)) = messages.next().await {
                        if tx.send(m).is_err() {
                            break;
                        }
                    }
                });
                let listening = client
                    .batch_execute(&format!("LISTEN {CHANNEL}"))
                    .await
                    .is_ok();
                let own_pid: Option<i32> =
                    match client.query_one("SELECT pg_backend_pid()", &[]).await {
                        Ok(row) => Some(row.get(0)),
                        Err(_) => None,
                    };
                if listening {
                    pause = Duration::from_millis(100);
                    let Some(this) = live.upgrade() else { return };
                    *this.notifier.lock().await = Some(client);
                    this.heard.notify_one();
                    drop(this);
                    loop {
                        tokio::select! {
                            m = rx.recv() => match m {
                                Some(AsyncMessage::Notification(n)) => {
                                    if Some(n.process_id()) == own_pid { continue; }
                                    match live.upgrade() {
                                        Some(l) => l.heard.notify_one(),
                                        None => return,
                                    }
                                }
                                Some(_) => {}
                                None => break,
                            },
                            _ = alive.changed() => {
                                driver.abort();
                                return;
                            }
                        }
                    }
                    if let Some(this) = live.upgrade() {
                        *this.notifier.lock().await = None;
                    }
                    tracing::warn!("change-feed listener lost its connection; reconnecting");
                } else {
                    drop(client);
                }
                driver.abort();
            }
            Err(e) => tracing::warn!(error = %e, "change-feed listener cannot connect"),
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = alive.changed() => return,
        }
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_follows_its_scope_only() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let t = Tops::default();
        let (mut admin, mut of_a, mut of_b) =
            (t.waiter(None), t.waiter(Some(a)), t.waiter(Some(b)));
        assert!(t.merge(&[(None, 5), (Some(a), 9)]));
        assert_eq!((admin.top(), of_a.top(), of_b.top()), (9, 9, 5));
        assert!(!t.merge(&[(Some(a), 7)]), "never goes back");
        assert!(t.merge(&[(Some(b), 8)]));
        assert!(!of_a.a.has_changed().unwrap() && !of_a.b.as_ref().unwrap().has_changed().unwrap());
        assert_eq!((admin.top(), of_a.top(), of_b.top()), (9, 9, 8));
    }

    #[test]
    fn parked_places_are_bounded_and_freed() {
        let live = Live::new(2);
        let one = live.park().unwrap();
        let two = live.park().unwrap();
        let Err(full) = live.park() else {
            panic!("a third place")
        };
        assert_eq!(full.code(), crate::error::Code::Busy);
        drop(one);
        assert_eq!(live.parked(), 1);
        let _three = live.park().unwrap();
        drop(two);
    }
}
