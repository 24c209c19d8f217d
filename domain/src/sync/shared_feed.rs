//! Long polls woken by one commit read the feed together.
//!
//! A commit of a selling branch wakes every till following that branch at
//! once. Read one by one, each woken poll costs its own round trips (the
//! check with the head, maybe the horizon, the changes), about as many as
//! the sale that woke them. Here the first poll to ask for a (scope,
//! epoch, limit) leads: it waits a moment (`GATHER`) so the others woken
//! with it can join, then reads once for all of them from the lowest of
//! their cursors, with every joiner's token checked in the read's first
//! statement (`snapshot::feed_for`). Followers' cursors drift apart by a
//! few revs (each answered at its own moment), so each caller gets the
//! shared page cut to the changes after its own cursor, with the page's
//! `max_rev` and `has_more`: every rev up to that `max_rev` is final
//! whichever cursor it was read from, so the cut page is exactly what
//! the caller would have read alone up to there. A caller whose cursor
//! the page does not reach (a full page that ends at or before it), whose
//! leader failed, or whose leader went away reads alone, so a shared read
//! never answers what a poll alone would not.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::db::Pool;
use crate::sync::horizon::Horizon;
use crate::sync::snapshot::{self, ChangeFeed, Cursor, Scope};
use crate::users::sessions::Signer;
use crate::Result;

/// How long a leader waits for the polls woken with it. Polls are spread
/// over the HTTP workers' threads, so yielding once gathers only those of
/// its own thread; a couple of milliseconds gathers all of a wake and is
/// nothing beside the feed's lag (the commit and the horizon settling).
const GATHER: std::time::Duration = std::time::Duration::from_millis(2);

/// What a shared read is of.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    scope: Scope,
    epoch: String,
    limit: i64,
}

/// A caller of a gathering read: its token and its cursor.
type Caller = (Option<Signer>, i64);

/// A read gathering its callers until its leader starts it.
struct Gathering {
    /// The callers, the leader first; `None` once read.
    callers: Mutex<Option<Vec<Caller>>>,
    /// The answers, when read (the leader holds the sender).
    answers: watch::Receiver<Option<Arc<Answers>>>,
}

/// What a shared read answers: each caller's token check, taken by its
/// caller, and the page from the lowest cursor (`None` when it failed:
/// joiners read alone).
struct Answers {
    checks: Mutex<Vec<Option<Result<()>>>>,
    page: Option<ChangeFeed>,
}

/// The reads gathering now, per key.
#[derive(Default)]
pub struct SharedFeed {
    gathering: Mutex<HashMap<Key, Arc<Gathering>>>,
}

/// Where a caller stands in a gathering.
enum Place {
    Lead(watch::Sender<Option<Arc<Answers>>>),
    Join(usize),
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Plain data: a panic while holding the lock leaves it valid.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared page as the caller at `since` would have read it: the
/// changes after `since`, with the page's end. `None` when the page does
/// not reach past `since`.
fn cut_for(page: &ChangeFeed, since: i64) -> Option<ChangeFeed> {
    if page.max_rev < since || (page.has_more && page.max_rev <= since) {
        return None;
    }
    Some(ChangeFeed {
        changes: page
            .changes
            .iter()
            .filter(|c| c.rev > since)
            .cloned()
            .collect(),
        max_rev: page.max_rev,
        has_more: page.has_more,
        epoch: page.epoch.clone(),
    })
}

impl SharedFeed {
    /// The page `snapshot::feed` would answer this caller, read with the
    /// callers of the same scope that ask at the same moment.
    pub async fn read(
        &self,
        pool: &Pool,
        horizon: &Horizon,
        scope: Scope,
        cursor: Cursor<'_>,
        limit: i64,
        signer: Option<Signer>,
    ) -> Result<ChangeFeed> {
        let alone = || snapshot::feed(pool, horizon, scope, cursor, limit, signer);
        let Some(epoch) = cursor.epoch else {
            return alone().await;
        };
        let key = Key {
            scope,
            epoch: epoch.to_owned(),
            limit,
        };
        let (gathering, place) = self.join(&key, (signer, cursor.since));
        let shared = match place {
            Place::Lead(answers) => {
                let lead = Lead {
                    feed: self,
                    key,
                    gathering,
                };
                lead.read(answers, pool, horizon, cursor.since).await?
            }
            Place::Join(at) => joined(gathering, at).await,
        };
        match shared {
            Some(Err(refused)) => Err(refused),
            Some(Ok(page)) => match cut_for(&page, cursor.since) {
                Some(mine) => Ok(mine),
                None => alone().await,
            },
            None => alone().await,
        }
    }

    /// Joins the gathering read of `key`, or starts one.
    fn join(&self, key: &Key, caller: Caller) -> (Arc<Gathering>, Place) {
        let mut all = locked(&self.gathering);
        if let Some(g) = all.get(key) {
            if let Some(callers) = locked(&g.callers).as_mut() {
                callers.push(caller);
                return (g.clone(), Place::Join(callers.len() - 1));
            }
        }
        let (tx, rx) = watch::channel(None);
        let g = Arc::new(Gathering {
            callers: Mutex::new(Some(vec![caller])),
            answers: rx,
        });
        all.insert(key.clone(), g.clone());
        (g, Place::Lead(tx))
    }

    /// Stops `gathering` taking callers: its callers.
    fn close(&self, key: &Key, gathering: &Arc<Gathering>) -> Vec<Caller> {
        let mut all = locked(&self.gathering);
        if all.get(key).is_some_and(|g| Arc::ptr_eq(g, gathering)) {
            all.remove(key);
        }
        locked(&gathering.callers).take().unwrap_or_default()
    }

    /// Reads gathering now.
    pub fn gathering(&self) -> usize {
        locked(&self.gathering).len()
    }
}

/// A leader's hold on its gathering: closed when dropped, so a leader that
/// goes away (its client left) never leaves callers joining a read that
/// will not happen (they read alone when the sender drops).
struct Lead<'a> {
    feed: &'a SharedFeed,
    key: Key,
    gathering: Arc<Gathering>,
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        self.feed.close(&self.key, &self.gathering);
    }
}

/// A caller's share of a read: its refusal or the whole page; `None` when
/// it must read alone.
type Share = Option<Result<ChangeFeed>>;

impl Lead<'_> {
    /// Reads for every caller gathered; the leader's own share. The outer
    /// error is a fault before the checks (joiners then read alone).
    async fn read(
        self,
        answers: watch::Sender<Option<Arc<Answers>>>,
        pool: &Pool,
        horizon: &Horizon,
        since: i64,
    ) -> Result<Share> {
        // The polls the same commit woke run now, on every HTTP worker's
        // thread: let them join.
        tokio::time::sleep(GATHER).await;
        let callers = self.feed.close(&self.key, &self.gathering);
        let lowest = callers.iter().map(|c| c.1).min().unwrap_or(since);
        let signers: Vec<Option<Signer>> = callers.iter().map(|c| c.0).collect();
        let cursor = Cursor {
            since: lowest,
            epoch: Some(&self.key.epoch),
        };
        let (scope, limit) = (self.key.scope, self.key.limit);
        let (checks, page) =
            snapshot::feed_for(pool, horizon, scope, cursor, limit, &signers).await?;
        let mut checks: Vec<Option<Result<()>>> = checks.into_iter().map(Some).collect();
        let mine = checks.first_mut().and_then(Option::take).unwrap_or(Ok(()));
        let (page, failed) = match page {
            Ok(page) => (Some(page), None),
            Err(e) => (None, Some(e)),
        };
        let shared = Arc::new(Answers {
            checks: Mutex::new(checks),
            page,
        });
        answers.send_replace(Some(shared.clone()));
        if let Err(refused) = mine {
            return Ok(Some(Err(refused)));
        }
        match (failed, &shared.page) {
            // The page's refusal is the leader's own answer when it read
            // from its own cursor; else it reads alone.
            (Some(e), _) if lowest == since => Err(e),
            (Some(_), _) | (None, None) => Ok(None),
            (None, Some(page)) => Ok(Some(Ok(page.clone()))),
        }
    }
}

/// A joiner's share: its refusal or the page; `None` when it must read
/// alone.
async fn joined(gathering: Arc<Gathering>, at: usize) -> Share {
    let mut rx = gathering.answers.clone();
    drop(gathering);
    let answers = rx.wait_for(Option::is_some).await.ok()?.clone()?;
    let check = locked(&answers.checks).get_mut(at).and_then(Option::take)?;
    match check {
        Err(refused) => Some(Err(refused)),
        Ok(()) => answers.page.clone().map(Ok),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(limit: i64) -> Key {
        Key {
            scope: Some(uuid::Uuid::nil()),
            epoch: "e".to_owned(),
            limit,
        }
    }

    #[test]
    fn callers_of_one_cursor_join_the_first_until_it_closes() {
        let feed = SharedFeed::default();
        let (lead, first) = feed.join(&key(7), (None, 1));
        assert!(matches!(first, Place::Lead(_)));
        let (joined, second) = feed.join(&key(7), (None, 1));
        assert!(matches!(second, Place::Join(1)));
        assert!(Arc::ptr_eq(&lead, &joined));
        // Another page size is another read.
        let (_, other) = feed.join(&key(8), (None, 1));
        assert!(matches!(other, Place::Lead(_)));
        assert_eq!(feed.close(&key(7), &lead).len(), 2);
        // Closed: the next caller of that cursor leads a new read.
        let (again, third) = feed.join(&key(7), (None, 1));
        assert!(matches!(third, Place::Lead(_)));
        assert!(!Arc::ptr_eq(&lead, &again));
        // An old leader closing late leaves the new gathering alone.
        assert!(feed.close(&key(7), &lead).is_empty());
        assert_eq!(feed.gathering(), 2);
    }

    #[tokio::test]
    async fn a_joiner_whose_leader_went_away_reads_alone() {
        let feed = SharedFeed::default();
        let (_, lead) = feed.join(&key(1), (None, 1));
        let (g, place) = feed.join(&key(1), (None, 1));
        let Place::Join(at) = place else {
            panic!("the second caller should join")
        };
        drop(lead);
        assert!(joined(g, at).await.is_none());
    }

    fn page(revs: &[i64], max_rev: i64, has_more: bool) -> ChangeFeed {
        ChangeFeed {
            changes: revs
                .iter()
                .map(|&rev| crate::sync::snapshot::FeedChange {
                    rev,
                    entity: "customer".to_owned(),
                    entity_id: String::new(),
                    op: "upsert".to_owned(),
                    branch_id: None,
                    payload: serde_json::Value::Null,
                })
                .collect(),
            max_rev,
            has_more,
            epoch: "e".to_owned(),
        }
    }

    fn revs(p: &ChangeFeed) -> Vec<i64> {
        p.changes.iter().map(|c| c.rev).collect()
    }

    #[test]
    fn a_shared_page_is_cut_to_each_callers_cursor() {
        let shared = page(&[11, 12, 15], 16, false);
        // The lowest cursor's caller gets it whole; a later one the rest.
        assert_eq!(revs(&cut_for(&shared, 10).unwrap()), [11, 12, 15]);
        let later = cut_for(&shared, 12).unwrap();
        assert_eq!(
            (revs(&later), later.max_rev, later.has_more),
            (vec![15], 16, false)
        );
        // Nothing after a cursor at the page's end: an empty page, same end.
        assert!(cut_for(&shared, 16).unwrap().changes.is_empty());
        // A page ending before the cursor is not the caller's: alone.
        assert!(cut_for(&shared, 17).is_none());
        // A full page ending at or before the cursor says nothing of what
        // follows it: alone.
        let full = page(&[11, 12], 12, true);
        assert!(cut_for(&full, 12).is_none());
        assert_eq!(revs(&cut_for(&full, 11).unwrap()), [12]);
    }
}
