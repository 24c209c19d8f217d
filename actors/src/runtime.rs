//! The actor runtime: a serialising actor per key (branch or device), a
//! registry that starts them on first use, and bounded admission.
//!
//! - Each actor handles one message to completion before the next: handlers
//!   return an `AtomicResponse`, so awaiting the database does not let the
//!   next message in.
//! - Admission is bounded per actor by a semaphore sized from config: a
//!   message that finds no permit is refused at once (503 with Retry-After);
//!   nothing ever queues without bound. The permit travels with the message
//!   and is released when its handling ends.
//! - A panic inside a command is caught, answered as a 500 problem, and the
//!   actor goes on. An actor whose mailbox closed is replaced on next use.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use crate::db::Pool;
use crate::error::{Error, Result};
use crate::metrics;

/// A unit of serialised work: one transaction run by an actor.
pub trait Command: Send + 'static {
    type Output: Send + 'static;
    /// Label for metrics and logs.
    const NAME: &'static str;
    fn run(self, pool: Pool) -> impl Future<Output = Result<Self::Output>> + Send;
}

/// What kind of actor a key selects; capacity and metrics are per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Branch,
    Device,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Branch => "branch",
            Kind::Device => "device",
        }
    }
}

const MAILBOX_FULL: &str =
    "This branch or device is handling too many requests; please retry shortly.";

type Job = Box<dyn FnOnce(Pool) -> BoxFuture<'static, ()> + Send>;

/// The message every actor receives: a boxed command with its reply channel.
struct Envelope {
    job: Job,
    _permit: OwnedSemaphorePermit,
}

impl Message for Envelope {
    type Result = ();
}

/// Drain marker: answered once every message queued before it is handled.
struct Flush;

impl Message for Flush {
    type Result = ();
}

/// One serialising worker. Which key it serves only matters to the registry.
pub struct Worker {
    pool: Pool,
}

impl Actor for Worker {
    type Context = Context<Self>;
}

impl Handler<Envelope> for Worker {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, msg: Envelope, _ctx: &mut Self::Context) -> Self::Result {
        let pool = self.pool.clone();
        let Envelope { job, _permit } = msg;
        AtomicResponse::new(Box::pin(
            async move {
                job(pool).await;
                drop(_permit);
            }
            .into_actor(self),
        ))
    }
}

impl Handler<Flush> for Worker {
    type Result = ();

    fn handle(&mut self, _msg: Flush, _ctx: &mut Self::Context) {}
}

/// What a full mailbox does to a new message.
#[derive(Debug, Clone, Copy)]
enum Admission {
    /// Refuse at once (503): the client retries.
    Refuse,
    /// Wait for a free slot: the sender is itself bounded.
    Wait,
}

/// Mailbox capacities and the number of arbiter threads actors run on.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub branch_mailbox: usize,
    pub device_mailbox: usize,
    pub arbiters: usize,
}

#[derive(Clone)]
struct Handle {
    addr: Addr<Worker>,
    permits: Arc<Semaphore>,
}

/// Starts actors on first use and routes commands to them.
pub struct Registry {
    pool: Pool,
    config: RuntimeConfig,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: AtomicUsize,
    branches: Mutex<HashMap<Uuid, Handle>>,
    devices: Mutex<HashMap<Uuid, Handle>>,
}

impl Registry {
    /// Must be called inside a running actix `System`.
    pub fn new(pool: Pool, config: RuntimeConfig) -> Self {
        let arbiters = (0..config.arbiters.max(1))
            .map(|_| Arbiter::new().handle())
            .collect();
        Registry {
            pool,
            config,
            arbiters,
            next_arbiter: AtomicUsize::new(0),
            branches: Mutex::new(HashMap::new()),
            devices: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `cmd` on the branch's actor, after every command queued before it.
    pub async fn branch<C: Command>(&self, branch_id: Uuid, cmd: C) -> Result<C::Output> {
        self.dispatch(Kind::Branch, branch_id, cmd, Admission::Refuse)
            .await
    }

    /// Like `branch`, but waits for room in a full mailbox instead of
    /// refusing: for work already admitted elsewhere (a device's push batch,
    /// whose changes must be applied in order, not dropped halfway).
    pub async fn branch_queued<C: Command>(&self, branch_id: Uuid, cmd: C) -> Result<C::Output> {
        self.dispatch(Kind::Branch, branch_id, cmd, Admission::Wait)
            .await
    }

    /// Runs `cmd` on the device's actor, after every command queued before it.
    pub async fn device<C: Command>(&self, device_id: Uuid, cmd: C) -> Result<C::Output> {
        self.dispatch(Kind::Device, device_id, cmd, Admission::Refuse)
            .await
    }

    fn capacity(&self, kind: Kind) -> usize {
        match kind {
            Kind::Branch => self.config.branch_mailbox,
            Kind::Device => self.config.device_mailbox,
        }
        .max(1)
    }

    fn handle(&self, kind: Kind, key: Uuid) -> Handle {
        let map = match kind {
            Kind::Branch => &self.branches,
            Kind::Device => &self.devices,
        };
        let mut map = map.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(h) = map.get(&key) {
            if h.addr.connected() {
                return h.clone();
            }
            tracing::warn!(kind = kind.as_str(), %key, "actor mailbox closed; starting a new one");
        }
        let h = self.start(kind);
        map.insert(key, h.clone());
        h
    }

    fn start(&self, kind: Kind) -> Handle {
        let capacity = self.capacity(kind);
        let i = self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.arbiters.len();
        let pool = self.pool.clone();
        // The semaphore is the real bound; the mailbox gets headroom so that
        // actix's own per-sender parking never refuses a permitted message.
        let addr = Worker::start_in_arbiter(&self.arbiters[i], move |ctx| {
            ctx.set_mailbox_capacity(capacity + 16);
            Worker { pool }
        });
        metrics::ACTORS_STARTED
            .with_label_values(&[kind.as_str()])
            .inc();
        Handle {
            addr,
            permits: Arc::new(Semaphore::new(capacity)),
        }
    }

    async fn dispatch<C: Command>(
        &self,
        kind: Kind,
        key: Uuid,
        cmd: C,
        admission: Admission,
    ) -> Result<C::Output> {
        let handle = self.handle(kind, key);
        let permit = match admission {
            Admission::Refuse => handle.permits.clone().try_acquire_owned().ok(),
            Admission::Wait => handle.permits.clone().acquire_owned().await.ok(),
        };
        let Some(permit) = permit else {
            metrics::MAILBOX_REJECTED
                .with_label_values(&[kind.as_str()])
                .inc();
            return Err(Error::mailbox_full(MAILBOX_FULL));
        };
        let depth = metrics::MAILBOX_DEPTH.with_label_values(&[kind.as_str()]);
        depth.inc();
        let (tx, rx) = oneshot::channel::<Result<C::Output>>();
        let enqueued = Instant::now();
        let job: Job = Box::new(move |pool: Pool| {
            Box::pin(async move {
                metrics::MAILBOX_DEPTH
                    .with_label_values(&[kind.as_str()])
                    .dec();
                let started = Instant::now();
                metrics::MAILBOX_WAIT
                    .with_label_values(&[kind.as_str()])
                    .observe(started.duration_since(enqueued).as_secs_f64());
                let outcome = AssertUnwindSafe(cmd.run(pool)).catch_unwind().await;
                let outcome = outcome.unwrap_or_else(|panic| {
                    let why = panic_message(&panic);
                    tracing::error!(command = C::NAME, cause = ?why, "command panicked; actor continues");
                    Err(Error::internal(format!("command {} panicked: {why}", C::NAME)))
                });
                metrics::HANDLE_SECONDS
                    .with_label_values(&[kind.as_str(), C::NAME])
                    .observe(started.elapsed().as_secs_f64());
                // The caller may have gone away; the work is done either way.
                let _ = tx.send(outcome);
            })
        });
        let envelope = Envelope {
            job,
            _permit: permit,
        };
        if let Err(e) = handle.addr.try_send(envelope) {
            depth.dec();
            return Err(match e {
                SendError::Full(_) => Error::mailbox_full(MAILBOX_FULL),
                SendError::Closed(_) => Error::internal("actor mailbox closed"),
            });
        }
        rx.await
            .unwrap_or_else(|_| Err(Error::internal("actor stopped before answering")))
    }

    /// Waits until every actor has handled what was queued before this call
    /// (at most `timeout`), for graceful shutdown.
    pub async fn drain(&self, timeout: Duration) {
        let handles: Vec<Handle> = [&self.branches, &self.devices]
            .iter()
            .flat_map(|m| {
                m.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        let flushes = handles.iter().map(|h| h.addr.send(Flush));
        if tokio::time::timeout(timeout, futures_util::future::join_all(flushes))
            .await
            .is_err()
        {
            tracing::warn!("actor mailboxes not drained within the shutdown timeout");
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        for a in &self.arbiters {
            a.stop();
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}
