//! Group commit for a branch's REST sales.
//!
//! A branch's sales are serialised on its actor, and each used to pay for a
//! commit (a WAL flush) and an actor hop while the next waited. Here a sale
//! joins its branch's queue; at most one drain command per branch is in the
//! actor's mailbox at a time, and when it runs it takes every sale waiting
//! (up to `max`) and makes them in one transaction, so one flush and one
//! hop carry many sales. A refused sale leaves nothing behind and the others
//! go on (`sales::create_shared`: refused before it writes, or rolled back
//! to its savepoint); a fault (deadlock with another server process, lost
//! connection) stops the group and its sales are retried one transaction
//! each, the plain path.
//!
//! The invariants are untouched: the counter row, batch rows, coupon and
//! balance are still locked and checked per sale, in the same order.
//!
//! Admission stays bounded: a branch's queue holds at most the branch
//! mailbox capacity, and a sale that finds it full is refused (503) at once.
//!
//! Both bounds are per branch and read on every sale, so a branch's
//! override (`Registry::set_branch_overrides`) applies to the next sale.
//! Queued sales count in the branch actor's depth, a full queue in its
//! refusals, and a sale's wait (until a drain takes it) is the actor's wait.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{oneshot, Notify};
use uuid::Uuid;

use crate::db::Pool;
use crate::error::{Error, Result};
use crate::sales::{self, CreateSale, NewSale, Outcome};
use actors::mailbox::Mailbox;
use actors::metrics::{SALE_BATCH_FALLBACKS, SALE_BATCH_SIZE};
use actors::runtime::{Command, Kind, Registry};

const QUEUE_FULL: &str = "This branch is handling too many sales; please retry shortly.";

struct Pending {
    ticket: u64,
    enqueued: Instant,
    sale: NewSale,
    reply: oneshot::Sender<Result<Outcome>>,
}

#[derive(Default)]
struct Waiting {
    sales: VecDeque<Pending>,
    /// A drain is in the actor's mailbox or running.
    drain_scheduled: bool,
}

/// The sales waiting for one branch's actor.
struct Queue {
    waiting: Mutex<Waiting>,
    /// Woken when a drain ends, so a seller still queued schedules the next.
    drain_ended: Notify,
    /// The branch actor's mailbox: depth, refusals and waits are counted there.
    mailbox: Arc<Mailbox>,
}

impl Queue {
    fn new(mailbox: Arc<Mailbox>) -> Self {
        Queue {
            waiting: Mutex::new(Waiting::default()),
            drain_ended: Notify::new(),
            mailbox,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, max: usize) -> Vec<Pending> {
        let taken: Vec<Pending> = {
            let mut w = self.lock();
            let n = w.sales.len().min(max);
            w.sales.drain(..n).collect()
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
        let queued = w.sales.iter().any(|p| p.ticket == ticket);
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
            match w.sales.iter().position(|p| p.ticket == ticket) {
                Some(i) => w.sales.remove(i).is_some(),
                None => false,
            }
        };
        if removed {
            self.mailbox.queued(-1);
        }
        removed
    }
}

/// Where `POST /sales` hands its sales: one queue per branch.
pub struct SaleDesk {
    queues: Mutex<HashMap<Uuid, Arc<Queue>>>,
    tickets: AtomicU64,
    max_batch: usize,
}

impl SaleDesk {
    /// `max_batch` sales at most share a commit unless the branch's
    /// override says otherwise; as many sales may wait per branch as its
    /// mailbox admits (`Registry::capacity`).
    pub fn new(max_batch: usize) -> Self {
        SaleDesk {
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
            .sale_batch_max
            .unwrap_or(self.max_batch)
            .max(1)
    }

    fn queue(&self, registry: &Registry, branch_id: Uuid) -> Arc<Queue> {
        let mut map = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(branch_id)
            .or_insert_with(|| Arc::new(Queue::new(registry.mailbox(Kind::Branch, branch_id))))
            .clone()
    }

    /// Makes the sale on its branch's actor, possibly in one commit with
    /// other sales of the branch. A full queue or mailbox refuses it (503).
    pub async fn sell(&self, registry: &Registry, sale: NewSale) -> Result<Outcome> {
        let branch_id = sale.branch_id;
        let max_batch = self.batch_max(registry, branch_id);
        if max_batch == 1 {
            return registry.branch(branch_id, CreateSale(sale)).await;
        }
        let max_waiting = registry.capacity(Kind::Branch, branch_id);
        let queue = self.queue(registry, branch_id);
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        {
            let mut w = queue.lock();
            if w.sales.len() >= max_waiting {
                drop(w);
                queue.mailbox.refused();
                return Err(Error::mailbox_full(QUEUE_FULL));
            }
            w.sales.push_back(Pending {
                ticket,
                enqueued: Instant::now(),
                sale,
                reply,
            });
            // Counted under the lock, so a drain never takes it uncounted.
            queue.mailbox.queued(1);
        }
        tokio::pin!(answer);
        let dropped = || Err(Error::internal("a queued sale was dropped unanswered"));
        loop {
            // Registered before the check, so a drain ending in between
            // still wakes this seller.
            let ended = queue.drain_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if queue.claim_drain(ticket) {
                let drain = Drain {
                    queue: queue.clone(),
                    max: max_batch,
                };
                if let Err(refused) = registry.branch(branch_id, drain).await {
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

/// Takes what is waiting in the queue and makes it.
struct Drain {
    queue: Arc<Queue>,
    max: usize,
}

/// Ends the drain even if making the sales panicked, so the branch's next
/// sales are not left waiting for a drain that will never come.
struct DrainEnd(Arc<Queue>);

impl Drop for DrainEnd {
    fn drop(&mut self) {
        self.0.drain_done();
    }
}

impl Command for Drain {
    type Error = crate::Error;
    type Output = ();
    const NAME: &'static str = "create_sales";
    // The sales it makes record their own waits, from when they queued.
    const RECORDS_WAIT: bool = false;

    async fn run(self, pool: Pool) -> Result<()> {
        let _end = DrainEnd(self.queue.clone());
        let batch = self.queue.take(self.max);
        if !batch.is_empty() {
            SALE_BATCH_SIZE
                .with_label_values(&["branch"])
                .observe(batch.len() as f64);
        }
        match batch.len() {
            0 => {}
            1 => {
                for p in batch {
                    let _ = p.reply.send(CreateSale(p.sale).run(pool.clone()).await);
                }
            }
            _ => together(&pool, batch).await,
        }
        Ok(())
    }
}

/// One transaction for the group. On a fault, every sale of the group is
/// made again one by one.
async fn together(pool: &Pool, batch: Vec<Pending>) {
    let (sales, replies): (Vec<NewSale>, Vec<_>) =
        batch.into_iter().map(|p| (p.sale, p.reply)).unzip();
    let outcomes = match in_one_transaction(pool, &sales).await {
        Ok(outcomes) => outcomes,
        Err(fault) => {
            tracing::warn!(error = ?fault, sales = sales.len(), "sale batch failed; making its sales one by one");
            SALE_BATCH_FALLBACKS.with_label_values(&["branch"]).inc();
            let mut one_by_one = Vec::with_capacity(sales.len());
            for sale in &sales {
                one_by_one.push(CreateSale(sale.clone()).run(pool.clone()).await);
            }
            one_by_one
        }
    };
    for (reply, outcome) in replies.into_iter().zip(outcomes) {
        // The caller may have gone; the sale stands either way.
        let _ = reply.send(outcome);
    }
}

async fn in_one_transaction(pool: &Pool, sales: &[NewSale]) -> Result<Vec<Result<Outcome>>> {
    let mut client = pool.get().await?;
    let mut tx = client.transaction().await?;
    let mut outcomes = Vec::with_capacity(sales.len());
    for sale in sales {
        if let Some(done) = sales::replay(&tx, sale).await? {
            outcomes.push(Ok(done));
            continue;
        }
        // A mutation-id clash is a fault here: the one-by-one path replays it.
        let made = sales::create_shared(&mut tx, sale).await?;
        outcomes.push(made.map(|sale| Outcome {
            sale,
            replayed: false,
        }));
    }
    tx.commit().await?;
    Ok(outcomes)
}
