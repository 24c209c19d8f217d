//! Long polls woken by one commit read the feed together.
//!
//! A commit of a selling branch wakes every till following that branch at
//! once, and they hold the same cursor (they all saw the previous page).
//! Read one by one, each woken poll costs its own round trips (the check
//! with the head, maybe the horizon, the changes), about as many as the
//! sale that woke them. Here the first poll to ask for a (scope, cursor,
//! epoch, limit) leads: it waits a moment (`GATHER`) so the others woken
//! with it can join, then reads once for all of them, with every joiner's token
//! checked in the read's first statement (`snapshot::feed_for`). Each
//! gets its own refusal or the shared page. A joiner whose leader failed
//! or went away reads alone, so a shared read never answers what a poll
//! alone would not.

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
    since: i64,
    epoch: String,
    limit: i64,
}

/// A read gathering its callers until its leader starts it.
struct Gathering {
    /// The callers' signers, the leader's first; `None` once read.
    signers: Mutex<Option<Vec<Option<Signer>>>>,
    /// The answers, when read (the leader holds the sender).
    answers: watch::Receiver<Option<Arc<Answers>>>,
}

/// What a shared read answers: each caller's token check, taken by its
/// caller, and the page (`None` when it failed: joiners read alone).
struct Answers {
    checks: Mutex<Vec<Option<Result<()>>>>,
    page: Option<Arc<ChangeFeed>>,
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

impl SharedFeed {
    /// The page `snapshot::feed` would answer this caller, read with the
    /// callers of the same scope and cursor that ask at the same moment.
    pub async fn read(
        &self,
        pool: &Pool,
        horizon: &Horizon,
        scope: Scope,
        cursor: Cursor<'_>,
        limit: i64,
        signer: Option<Signer>,
    ) -> Result<Arc<ChangeFeed>> {
        let Some(epoch) = cursor.epoch else {
            let page = snapshot::feed(pool, horizon, scope, cursor, limit, signer).await?;
            return Ok(Arc::new(page));
        };
        let key = Key {
            scope,
            since: cursor.since,
            epoch: epoch.to_owned(),
            limit,
        };
        let (gathering, place) = self.join(&key, signer);
        match place {
            Place::Lead(answers) => {
                let lead = Lead {
                    feed: self,
                    key,
                    gathering,
                };
                lead.read(answers, pool, horizon, cursor).await
            }
            Place::Join(at) => {
                match joined(gathering, at).await {
                    Some(answer) => answer,
                    // The leader failed or went away: alone.
                    None => Ok(Arc::new(
                        snapshot::feed(pool, horizon, scope, cursor, limit, signer).await?,
                    )),
                }
            }
        }
    }

    /// Joins the gathering read of `key`, or starts one.
    fn join(&self, key: &Key, signer: Option<Signer>) -> (Arc<Gathering>, Place) {
        let mut all = locked(&self.gathering);
        if let Some(g) = all.get(key) {
            if let Some(signers) = locked(&g.signers).as_mut() {
                signers.push(signer);
                return (g.clone(), Place::Join(signers.len() - 1));
            }
        }
        let (tx, rx) = watch::channel(None);
        let g = Arc::new(Gathering {
            signers: Mutex::new(Some(vec![signer])),
            answers: rx,
        });
        all.insert(key.clone(), g.clone());
        (g, Place::Lead(tx))
    }

    /// Stops `gathering` taking callers: its signers.
    fn close(&self, key: &Key, gathering: &Arc<Gathering>) -> Vec<Option<Signer>> {
        let mut all = locked(&self.gathering);
        if all.get(key).is_some_and(|g| Arc::ptr_eq(g, gathering)) {
            all.remove(key);
        }
        locked(&gathering.signers).take().unwrap_or_default()
    }

    /// Reads gathering now (for tests and metrics).
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

impl Lead<'_> {
    async fn read(
        self,
        answers: watch::Sender<Option<Arc<Answers>>>,
        pool: &Pool,
        horizon: &Horizon,
        cursor: Cursor<'_>,
    ) -> Result<Arc<ChangeFeed>> {
        // The polls the same commit woke run now, on every HTTP worker's
        // thread: let them join.
        tokio::time::sleep(GATHER).await;
        let signers = self.feed.close(&self.key, &self.gathering);
        let (scope, limit) = (self.key.scope, self.key.limit);
        let (checks, page) =
            snapshot::feed_for(pool, horizon, scope, cursor, limit, &signers).await?;
        let mut checks: Vec<Option<Result<()>>> = checks.into_iter().map(Some).collect();
        let mine = checks.first_mut().and_then(Option::take).unwrap_or(Ok(()));
        let page = page.map(Arc::new);
        answers.send_replace(Some(Arc::new(Answers {
            checks: Mutex::new(checks),
            page: page.as_ref().ok().cloned(),
        })));
        mine?;
        page
    }
}

/// A joiner's answer: its refusal or the page; `None` when it must read
/// alone.
async fn joined(gathering: Arc<Gathering>, at: usize) -> Option<Result<Arc<ChangeFeed>>> {
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

    fn key(since: i64) -> Key {
        Key {
            scope: Some(uuid::Uuid::nil()),
            since,
            epoch: "e".to_owned(),
            limit: 100,
        }
    }

    #[test]
    fn callers_of_one_cursor_join_the_first_until_it_closes() {
        let feed = SharedFeed::default();
        let (lead, first) = feed.join(&key(7), None);
        assert!(matches!(first, Place::Lead(_)));
        let (joined, second) = feed.join(&key(7), None);
        assert!(matches!(second, Place::Join(1)));
        assert!(Arc::ptr_eq(&lead, &joined));
        // Another cursor is another read.
        let (_, other) = feed.join(&key(8), None);
        assert!(matches!(other, Place::Lead(_)));
        assert_eq!(feed.close(&key(7), &lead).len(), 2);
        // Closed: the next caller of that cursor leads a new read.
        let (again, third) = feed.join(&key(7), None);
        assert!(matches!(third, Place::Lead(_)));
        assert!(!Arc::ptr_eq(&lead, &again));
        // An old leader closing late leaves the new gathering alone.
        assert!(feed.close(&key(7), &lead).is_empty());
        assert_eq!(feed.gathering(), 2);
    }

    #[tokio::test]
    async fn a_joiner_whose_leader_went_away_reads_alone() {
        let feed = SharedFeed::default();
        let (_, lead) = feed.join(&key(1), None);
        let (g, place) = feed.join(&key(1), None);
        let Place::Join(at) = place else {
            panic!("the second caller should join")
        };
        drop(lead);
        assert!(joined(g, at).await.is_none());
    }
}
