//! Group commit for a branch's requests, with a fallback: the one routine
//! the sale desk and the payment desk use.
//!
//! A branch's writes are serialised on its actor, and each used to pay for
//! a commit (a WAL flush), an actor hop and its round trips while the next
//! waited. Here a request joins its branch's queue; at most one drain
//! command per branch is in the actor's mailbox at a time, and when it runs
//! it takes every request waiting (up to `max`) and makes them in one
//! transaction (`Group::together`: set-based statements, a constant number
//! of round trips). A refused request leaves nothing behind and the others
//! go on; a fault (deadlock with another server process, lost connection,
//! a compare-and-set another process won) drops the group's transaction
//! and every request is made again alone (`Group::alone`). A commit the
//! database did not confirm in time (`Error::commit_unknown`) is not made
//! again: every request of the group is answered 503 and retried.
//!
//! Admission stays bounded: a branch's queue holds at most the branch
//! mailbox capacity, and a request that finds it full is refused (503) at
//! once. Both bounds are per branch and read on every request, so a
//! branch's override (`Registry::set_branch_overrides`) applies to the next
//! one. Queued requests count in the branch actor's depth, a full queue in
//! its refusals, and a request's wait (until a drain takes it) is the
//! actor's wait.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{oneshot, Notify};
use uuid::Uuid;

use crate::db::Pool;
use crate::error::{Error, Result};
use crate::metrics::{GROUP_FALLBACKS, GROUP_SIZE};
use actors::mailbox::Mailbox;
use actors::runtime::{Command, Kind, Registry};

const QUEUE_FULL: &str = "This branch is handling too many requests; please retry shortly.";

/// What can be grouped: a kind of branch request that many of can share a
/// transaction, with the way to make a group and the way to make one alone.
pub trait Group: Send + Sync + 'static {
    type Request: Clone + Send + Sync + 'static;
    type Output: Send + 'static;
    /// The drain command's name (metrics and logs), and the label of the
    /// group-size histogram.
    const NAME: &'static str;
    const LABEL: &'static str;
    /// Whether the one-by-one fallback stops at the first error: for a
    /// kind whose `alone` errs only on a fault (a pushed change answers its
    /// refusals as values), the requests after it are left unmade and the
    /// answer is shorter than the group. A kind whose `alone` errs on a
    /// refusal goes on, so every request gets its own answer.
    const STOP_AT_FIRST_ERROR: bool = false;

    /// Makes the group in one transaction: each request's answer, or a
    /// fault (the outer error) after which nothing of the group stands.
    fn together(
        pool: &Pool,
        requests: &[Self::Request],
    ) -> impl Future<Output = Result<Vec<Result<Self::Output>>>> + Send;

    /// Makes one request in a transaction of its own: the plain path, and
    /// the fallback after a fault.
    fn alone(
        pool: &Pool,
        request: Self::Request,
    ) -> impl Future<Output = Result<Self::Output>> + Send;
}

struct Pending<G: Group> {
    ticket: u64,
    enqueued: Instant,
    request: G::Request,
    reply: oneshot::Sender<Result<G::Output>>,
}

struct Waiting<G: Group> {
    requests: VecDeque<Pending<G>>,
    /// A drain is in the actor's mailbox or running.
    drain_scheduled: bool,
}

/// The requests waiting for one branch's actor.
struct Queue<G: Group> {
    waiting: Mutex<Waiting<G>>,
    /// Woken when a drain ends, so a seller still queued schedules the next.
    drain_ended: Notify,
    /// The branch actor's mailbox: depth, refusals and waits are counted there.
    mailbox: Arc<Mailbox>,
}

impl<G: Group> Queue<G> {
    fn new(mailbox: Arc<Mailbox>) -> Self {
        Queue {
            waiting: Mutex::new(Waiting {
                requests: VecDeque::new(),
                drain_scheduled: false,
            }),
            drain_ended: Notify::new(),
            mailbox,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiting<G>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, max: usize) -> Vec<Pending<G>> {
        let taken: Vec<Pending<G>> = {
            let mut w = self.lock();
            let n = w.requests.len().min(max);
            w.requests.drain(..n).collect()
        };
        let now = Instant::now();
        self.mailbox.queued(-(taken.len() as i64));
        for p in &taken {
            self.mailbox
                .waited(now.saturating_duration_since(p.enqueued));
        }
        taken
    }

    /// True when this seller should send the drain: its sale is still
    /// queued and no drain is on its way.
    fn claim_drain(&self, ticket: u64) -> bool {
        let mut w = self.lock();
        let queued = w.requests.iter().any(|p| p.ticket == ticket);
        if queued && !w.drain_scheduled {
            w.drain_scheduled = true;
            return true;
        }
        false
    }

    fn drain_done(&self) {
        self.lock().drain_scheduled = false;
        self.drain_ended.notify_waiters();
    }

    /// Takes back a sale nobody drained yet; false when a drain has it.
    fn withdraw(&self, ticket: u64) -> bool {
        let removed = {
            let mut w = self.lock();
            match w.requests.iter().position(|p| p.ticket == ticket) {
                Some(i) => w.requests.remove(i).is_some(),
                None => false,
            }
        };
        if removed {
            self.mailbox.queued(-1);
        }
        removed
    }
}

/// Where a branch's requests of one kind meet: one queue per branch.
pub struct Desk<G: Group> {
    queues: Mutex<HashMap<Uuid, Arc<Queue<G>>>>,
    tickets: AtomicU64,
    max_batch: usize,
}

impl<G: Group> Desk<G> {
    /// `max_batch` requests at most share a commit unless the branch's
    /// override says otherwise; as many sales may wait per branch as its
    /// mailbox admits (`Registry::capacity`).
    pub fn new(max_batch: usize) -> Self {
        Desk {
            queues: Mutex::new(HashMap::new()),
            tickets: AtomicU64::new(0),
            max_batch: max_batch.max(1),
        }
    }

    /// The group-commit size when a branch has no override.
    pub fn default_batch_max(&self) -> usize {
        self.max_batch
    }

    /// The most sales of `branch_id` one commit makes now.
    pub fn batch_max(&self, registry: &Registry, branch_id: Uuid) -> usize {
        registry
            .branch_override(branch_id)
            .batch_max
            .unwrap_or(self.max_batch)
            .max(1)
    }

    fn queue(&self, registry: &Registry, branch_id: Uuid) -> Arc<Queue<G>> {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(branch_id)
            .or_insert_with(|| Arc::new(Queue::new(registry.mailbox(Kind::Branch, branch_id))))
            .clone()
    }

    /// Makes the request on its branch's actor, possibly in one commit
    /// with others of the branch. A full queue or mailbox refuses it (503).
    pub async fn submit(
        &self,
        registry: &Registry,
        branch_id: Uuid,
        request: G::Request,
    ) -> Result<G::Output> {
        self.enqueue(registry, branch_id, request, Admission::Refuse)
            .await
    }

    /// Like `submit`, but never refused for a full queue or mailbox: it
    /// waits for its turn. For work admitted elsewhere that must not stop
    /// halfway: a device's push batch, whose runs of sales are applied in
    /// order. Such work is bounded by its own admission (one batch at a
    /// time per device, each device's mailbox bounded).
    pub async fn submit_queued(
        &self,
        registry: &Registry,
        branch_id: Uuid,
        request: G::Request,
    ) -> Result<G::Output> {
        self.enqueue(registry, branch_id, request, Admission::Wait)
            .await
    }

    async fn enqueue(
        &self,
        registry: &Registry,
        branch_id: Uuid,
        request: G::Request,
        admission: Admission,
    ) -> Result<G::Output> {
        let max_batch = self.batch_max(registry, branch_id);
        if max_batch == 1 {
            let alone = Alone::<G>(request);
            return match admission {
                Admission::Refuse => registry.branch(branch_id, alone).await,
                Admission::Wait => registry.branch_queued(branch_id, alone).await,
            };
        }
        let max_waiting = match admission {
            Admission::Refuse => registry.capacity(Kind::Branch, branch_id),
            Admission::Wait => usize::MAX,
        };
        let queue = self.queue(registry, branch_id);
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        {
            let mut w = queue.lock();
            if w.requests.len() >= max_waiting {
                drop(w);
                queue.mailbox.refused();
                return Err(Error::mailbox_full(QUEUE_FULL));
            }
            w.requests.push_back(Pending {
                ticket,
                enqueued: Instant::now(),
                request,
                reply,
            });
            // Counted under the lock, so a drain never takes it uncounted.
            queue.mailbox.queued(1);
        }
        tokio::pin!(answer);
        let dropped = || Err(Error::internal("a queued request was dropped unanswered"));
        loop {
            // Registered before the check, so a drain ending in between
            // still wakes this seller.
            let ended = queue.drain_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if queue.claim_drain(ticket) {
                let drain = Drain::<G> {
                    queue: queue.clone(),
                    max: max_batch,
                };
                let sent = match admission {
                    Admission::Refuse => registry.branch(branch_id, drain).await,
                    Admission::Wait => registry.branch_queued(branch_id, drain).await,
                };
                if let Err(refused) = sent {
                    queue.drain_done();
                    if queue.withdraw(ticket) {
                        return Err(refused);
                    }
                }
                continue;
            }
            tokio::select! {
                biased;
                outcome = &mut answer => return outcome.unwrap_or_else(|_| dropped()),
                _ = &mut ended => {}
            }
        }
    }
}

/// What a request finds when its branch's queue or mailbox is full.
#[derive(Clone, Copy)]
enum Admission {
    /// A refusal (503) at once.
    Refuse,
    /// Its turn, however long.
    Wait,
}

/// Takes what is waiting in the queue and makes it.
struct Drain<G: Group> {
    queue: Arc<Queue<G>>,
    max: usize,
}

/// Ends the drain even if making the group panicked, so the branch's next
/// requests are not left waiting for a drain that will never come.
struct DrainEnd<G: Group>(Arc<Queue<G>>);

impl<G: Group> Drop for DrainEnd<G> {
    fn drop(&mut self) {
        self.0.drain_done();
    }
}

impl<G: Group> Command for Drain<G> {
    type Error = crate::Error;
    type Output = ();
    const NAME: &'static str = G::NAME;
    // The requests it makes record their own waits, from when they queued.
    const RECORDS_WAIT: bool = false;

    async fn run(self, pool: Pool) -> Result<()> {
        let _end = DrainEnd(self.queue.clone());
        let batch = self.queue.take(self.max);
        if !batch.is_empty() {
            GROUP_SIZE
                .with_label_values(&[G::LABEL])
                .observe(batch.len() as f64);
            together::<G>(&pool, batch).await;
        }
        Ok(())
    }
}

/// One request alone, on the branch actor (a group size of 1).
struct Alone<G: Group>(G::Request);

impl<G: Group> Command for Alone<G> {
    type Error = crate::Error;
    type Output = G::Output;
    const NAME: &'static str = G::NAME;

    async fn run(self, pool: Pool) -> Result<G::Output> {
        G::alone(&pool, self.0).await
    }
}

/// The group in one transaction; on a fault, each request again alone.
async fn together<G: Group>(pool: &Pool, batch: Vec<Pending<G>>) {
    let (requests, replies): (Vec<G::Request>, Vec<_>) =
        batch.into_iter().map(|p| (p.request, p.reply)).unzip();
    let outcomes = with_fallback::<G>(pool, &requests).await;
    for (reply, outcome) in replies.into_iter().zip(outcomes) {
        // The caller may have gone; the work stands either way.
        let _ = reply.send(outcome);
    }
}

/// The one group-commit-with-fallback routine, for a branch's queued REST
/// requests and for a till's pushed run of sales alike: `G::together`, and
/// on a fault (a deadlock with another server process, a lost connection,
/// a race another process won) every request again in a transaction of its
/// own, which answers as if the group had never been tried.
pub async fn with_fallback<G: Group>(
    pool: &Pool,
    requests: &[G::Request],
) -> Vec<Result<G::Output>> {
    if requests.len() == 1 {
        if let Some(only) = requests.first() {
            return vec![G::alone(pool, only.clone()).await];
        }
    }
    match G::together(pool, requests).await {
        Ok(outcomes) => outcomes,
        // The group's COMMIT went unconfirmed and may yet stand: made again
        // one by one, each request would wait on its locks. Each is
        // answered 503 and comes back with its mutation id.
        Err(fault) if fault.is_commit_unknown() => requests
            .iter()
            .map(|_| Err(Error::commit_unknown()))
            .collect(),
        Err(fault) => {
            tracing::warn!(error = ?fault, group = G::NAME, requests = requests.len(), "group failed; making its requests one by one");
            GROUP_FALLBACKS.with_label_values(&[G::LABEL]).inc();
            let mut one_by_one = Vec::with_capacity(requests.len());
            for r in requests {
                let made = G::alone(pool, r.clone()).await;
                let stop = G::STOP_AT_FIRST_ERROR && made.is_err();
                one_by_one.push(made);
                if stop {
                    break;
                }
            }
            one_by_one
        }
    }
}
