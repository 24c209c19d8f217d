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
//! - A branch's capacity can be overridden and changed while it runs
//!   ([`Registry::set_branch_overrides`]): the semaphore grows or shrinks in
//!   place (`crate::mailbox`); the actix mailbox itself is unbounded, the
//!   permits being the bound.
//! - A panic inside a command is caught, answered as a 500 problem, and the
//!   actor goes on. An actor whose mailbox closed is replaced on next use.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use actix::dev::SendError;
use actix::{
    Actor, Addr, Arbiter, ArbiterHandle, AtomicResponse, Context, Handler, Message, WrapFuture,
};
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use tokio::sync::oneshot;
use uuid::Uuid;

use deadpool_postgres::Pool;

use crate::mailbox::{Mailbox, Permit};
use crate::metrics;

/// A unit of serialised work: one transaction run by an actor.
pub trait Command: Send + 'static {
    type Output: Send + 'static;
    /// The command's error; the runtime's own refusals convert into it.
    type Error: From<Refused> + Send + 'static;
    /// Label for metrics and logs.
    const NAME: &'static str;
    /// Whether the time this message waited in the mailbox is recorded as
    /// the actor's wait. A command that stands for requests which waited
    /// elsewhere (a group commit for queued requests) records theirs instead.
    const RECORDS_WAIT: bool = true;
    fn run(self, pool: Pool) -> impl Future<Output = Result<Self::Output, Self::Error>> + Send;
}

/// What kind of actor a key selects; the default capacity is per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

/// Why the runtime answered a command without its own outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The actor's mailbox is full: the client should retry shortly.
    MailboxFull,
    /// The command panicked; the actor goes on with the next one.
    Panicked { command: &'static str, why: String },
    /// The actor stopped (or its mailbox closed) before answering.
    Stopped,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::MailboxFull => f.write_str(
                "This branch or device is handling too many requests; please retry shortly.",
            ),
            Refused::Panicked { command, why } => write!(f, "command {command} panicked: {why}"),
            Refused::Stopped => f.write_str("actor stopped before answering"),
        }
    }
}

impl std::error::Error for Refused {}

type Job = Box<dyn FnOnce(Pool) -> BoxFuture<'static, ()> + Send>;

/// The message every actor receives: a boxed command with its reply channel.
struct Envelope {
    job: Job,
    _permit: Permit,
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

/// A branch's tuning where it differs from the defaults: its mailbox
/// capacity and the most queued requests one batch (a group commit) takes.
/// `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BranchOverride {
    pub mailbox: Option<usize>,
    pub batch_max: Option<usize>,
}

/// One live actor as `GET /ops/actors` shows it.
#[derive(Debug, Clone)]
pub struct ActorStats {
    pub kind: Kind,
    pub key: Uuid,
    pub capacity: usize,
    /// Requests waiting for it (in the mailbox, or queued for a branch's
    /// group commit).
    pub depth: i64,
    /// Messages holding a place in the mailbox (waiting or being handled).
    pub admitted: usize,
    pub refusals_last_minute: u64,
    /// Over the waits of the last minute (at most `mailbox::MAX_SAMPLES`).
    pub p99_wait: Option<Duration>,
    pub wait_samples: usize,
}

#[derive(Clone)]
struct Handle {
    addr: Addr<Worker>,
    mailbox: Arc<Mailbox>,
}

/// Starts actors on first use and routes commands to them.
pub struct Registry {
    pool: Pool,
    config: RuntimeConfig,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: AtomicUsize,
    branches: Mutex<HashMap<Uuid, Handle>>,
    devices: Mutex<HashMap<Uuid, Handle>>,
    /// Per-branch tuning. Lock order: an actor map, then this.
    overrides: RwLock<HashMap<Uuid, BranchOverride>>,
    /// Bumped by every change of `overrides`, so a reload that read the
    /// database before a local change does not undo it.
    overrides_version: AtomicU64,
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
            overrides: RwLock::new(HashMap::new()),
            overrides_version: AtomicU64::new(0),
        }
    }

    /// Runs `cmd` on the branch's actor, after every command queued before it.
    pub async fn branch<C: Command>(&self, branch_id: Uuid, cmd: C) -> Result<C::Output, C::Error> {
        self.dispatch(Kind::Branch, branch_id, cmd, Admission::Refuse)
            .await
    }

    /// Like `branch`, but waits for room in a full mailbox instead of
    /// refusing: for work already admitted elsewhere (a device's push batch,
    /// whose changes must be applied in order, not dropped halfway).
    pub async fn branch_queued<C: Command>(
        &self,
        branch_id: Uuid,
        cmd: C,
    ) -> Result<C::Output, C::Error> {
        self.dispatch(Kind::Branch, branch_id, cmd, Admission::Wait)
            .await
    }

    /// Runs `cmd` on the device's actor, after every command queued before it.
    pub async fn device<C: Command>(&self, device_id: Uuid, cmd: C) -> Result<C::Output, C::Error> {
        self.dispatch(Kind::Device, device_id, cmd, Admission::Refuse)
            .await
    }

    /// The default mailbox capacity of a kind.
    pub fn default_capacity(&self, kind: Kind) -> usize {
        match kind {
            Kind::Branch => self.config.branch_mailbox,
            Kind::Device => self.config.device_mailbox,
        }
        .max(1)
    }

    fn overrides(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Uuid, BranchOverride>> {
        self.overrides.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The capacity an actor of `kind` for `key` has (or would have).
    pub fn capacity(&self, kind: Kind, key: Uuid) -> usize {
        let overridden = match kind {
            Kind::Branch => self.overrides().get(&key).and_then(|o| o.mailbox),
            Kind::Device => None,
        };
        overridden
            .unwrap_or_else(|| self.default_capacity(kind))
            .max(1)
    }

    /// The branch's override (all `None` when it has none).
    pub fn branch_override(&self, branch_id: Uuid) -> BranchOverride {
        self.overrides()
            .get(&branch_id)
            .copied()
            .unwrap_or_default()
    }

    /// Replaces every branch override at once and resizes the live branch
    /// actors whose capacity changed. A branch left out goes back to the
    /// defaults.
    pub fn set_branch_overrides(&self, overrides: HashMap<Uuid, BranchOverride>) {
        self.replace_overrides(None, overrides);
    }

    /// The version of the overrides, to pass to
    /// [`Registry::set_branch_overrides_since`].
    pub fn overrides_version(&self) -> u64 {
        self.overrides_version.load(Ordering::Acquire)
    }

    /// Like `set_branch_overrides`, unless the overrides changed since
    /// `version` was read (then nothing happens and `false` is returned):
    /// for a reload whose data may be older than a change made meanwhile.
    pub fn set_branch_overrides_since(
        &self,
        version: u64,
        overrides: HashMap<Uuid, BranchOverride>,
    ) -> bool {
        self.replace_overrides(Some(version), overrides)
    }

    fn replace_overrides(
        &self,
        since: Option<u64>,
        overrides: HashMap<Uuid, BranchOverride>,
    ) -> bool {
        {
            let mut current = self.overrides.write().unwrap_or_else(|p| p.into_inner());
            if since.is_some_and(|v| v != self.overrides_version()) {
                return false;
            }
            if *current == overrides {
                return true;
            }
            *current = overrides;
            self.overrides_version.fetch_add(1, Ordering::AcqRel);
        }
        self.resize_branches(None);
        true
    }

    /// Sets (or with `None` removes) one branch's override, leaving the
    /// others as they are.
    pub fn set_branch_override(&self, branch_id: Uuid, o: Option<BranchOverride>) {
        {
            let mut current = self.overrides.write().unwrap_or_else(|p| p.into_inner());
            match o {
                Some(o) if o != BranchOverride::default() => current.insert(branch_id, o),
                _ => current.remove(&branch_id),
            };
            self.overrides_version.fetch_add(1, Ordering::AcqRel);
        }
        self.resize_branches(Some(branch_id));
    }

    /// Brings live branch mailboxes (one, or all) to their capacity now.
    fn resize_branches(&self, only: Option<Uuid>) {
        let map = self.branches.lock().unwrap_or_else(|p| p.into_inner());
        for (key, h) in map.iter() {
            if only.is_some_and(|o| o != *key) {
                continue;
            }
            let capacity = self.capacity(Kind::Branch, *key);
            if h.mailbox.capacity() != capacity {
                tracing::info!(branch = %key, from = h.mailbox.capacity(), to = capacity, "branch mailbox resized");
                h.mailbox.resize(capacity);
            }
        }
    }

    fn handle(&self, kind: Kind, key: Uuid) -> Handle {
        let mut map = self
            .map(kind)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mailbox = match map.get(&key) {
            Some(h) if h.addr.connected() => return h.clone(),
            Some(h) => {
                tracing::warn!(kind = kind.as_str(), %key, "actor mailbox closed; starting a new one");
                h.mailbox.clone()
            }
            None => Arc::new(Mailbox::new(kind.as_str(), key, self.capacity(kind, key))),
        };
        let h = Handle {
            addr: self.start(kind),
            mailbox,
        };
        map.insert(key, h.clone());
        h
    }

    fn start(&self, kind: Kind) -> Addr<Worker> {
        let i = self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.arbiters.len();
        let pool = self.pool.clone();
        // The semaphore is the real bound (and its size changes at run
        // time), so actix's own mailbox is unbounded: it never refuses or
        // parks a permitted message.
        let addr = Worker::start_in_arbiter(&self.arbiters[i], move |ctx| {
            ctx.set_mailbox_capacity(0);
            Worker { pool }
        });
        metrics::ACTORS_STARTED
            .with_label_values(&[kind.as_str()])
            .inc();
        addr
    }

    /// The live actor's mailbox, starting the actor if needed: for work
    /// that waits for an actor outside its mailbox (a queue drained in batches).
    pub fn mailbox(&self, kind: Kind, key: Uuid) -> Arc<Mailbox> {
        self.handle(kind, key).mailbox
    }

    fn map(&self, kind: Kind) -> &Mutex<HashMap<Uuid, Handle>> {
        match kind {
            Kind::Branch => &self.branches,
            Kind::Device => &self.devices,
        }
    }

    /// Every live actor of this process, branches first.
    pub fn snapshot(&self) -> Vec<ActorStats> {
        let mut out = Vec::new();
        for kind in [Kind::Branch, Kind::Device] {
            let handles: Vec<(Uuid, Arc<Mailbox>)> = self
                .map(kind)
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|(k, h)| (*k, h.mailbox.clone()))
                .collect();
            out.extend(handles.into_iter().map(|(key, m)| stats(kind, key, &m)));
        }
        out
    }

    /// One live actor of this process; `None` when it has not started here.
    pub fn stats(&self, kind: Kind, key: Uuid) -> Option<ActorStats> {
        let m = self
            .map(kind)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .map(|h| h.mailbox.clone())?;
        Some(stats(kind, key, &m))
    }

    async fn dispatch<C: Command>(
        &self,
        kind: Kind,
        key: Uuid,
        cmd: C,
        admission: Admission,
    ) -> Result<C::Output, C::Error> {
        let handle = self.handle(kind, key);
        let permit = match admission {
            Admission::Refuse => handle.mailbox.try_admit(),
            Admission::Wait => handle.mailbox.admit().await,
        };
        let Some(permit) = permit else {
            return Err(Refused::MailboxFull.into());
        };
        let mailbox = handle.mailbox.clone();
        mailbox.queued(1);
        let (tx, rx) = oneshot::channel::<Result<C::Output, C::Error>>();
        let enqueued = Instant::now();
        let job: Job = Box::new(move |pool: Pool| {
            Box::pin(async move {
                mailbox.queued(-1);
                let started = Instant::now();
                if C::RECORDS_WAIT {
                    mailbox.waited(started.duration_since(enqueued));
                }
                let outcome = AssertUnwindSafe(cmd.run(pool)).catch_unwind().await;
                let outcome = outcome.unwrap_or_else(|panic| {
                    let why = panic_message(&panic);
                    tracing::error!(command = C::NAME, cause = ?why, "command panicked; actor continues");
                    Err(Refused::Panicked {
                        command: C::NAME,
                        why,
                    }
                    .into())
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
            handle.mailbox.queued(-1);
            return Err(match e {
                SendError::Full(_) => {
                    handle.mailbox.refused();
                    Refused::MailboxFull.into()
                }
                SendError::Closed(_) => Refused::Stopped.into(),
            });
        }
        rx.await.unwrap_or_else(|_| Err(Refused::Stopped.into()))
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

fn stats(kind: Kind, key: Uuid, m: &Mailbox) -> ActorStats {
    let (refusals_last_minute, p99_wait, wait_samples) = m.recent();
    ActorStats {
        kind,
        key,
        capacity: m.capacity(),
        depth: m.depth().max(0),
        admitted: m.admitted(),
        refusals_last_minute,
        p99_wait,
        wait_samples,
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
