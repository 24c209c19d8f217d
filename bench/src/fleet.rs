//! `fleet`: a chain's till fleet on the change feed while the `sales`
//! scenario runs (issue 33, item 3).
//!
//! `tills` tills in all: `followers` per selling branch follow its head
//! with long polls (`wait`) and their cursors, the rest park long polls on
//! the quiet branches, where nothing is sold. The parked polls are placed
//! first, and the server's RSS is read before and after, so the cost of one
//! parked poll is measured apart from the selling. Then the sellers and the
//! followers run the window. Every sale a seller was answered must reach
//! every follower of its branch exactly once: a miss or a repeat fails the
//! run. A follower's lag for a sale is the time from the sale's answer to
//! the answer of the poll that carried it (0 when the poll came first).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use reqwest::Method;
use serde::Deserialize;

use crate::load::{drive, ClientOut, Window};
use crate::prep::Branch;
use crate::scenarios::{self, describe, ok, send, Answered, Ctx};
use crate::server::memory_kib;

/// The longest wait a till asks for (the server's maximum).
const WAIT_SECS: u64 = 30;
/// After the sellers stop, how long a follower may take to see the last sales.
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
pub struct Fleet {
    /// Tills in all (followers and parked).
    pub tills: usize,
    /// Followers per selling branch.
    pub followers: usize,
    /// Sellers (client `i` sells at branch `i % branches`).
    pub sellers: usize,
}

#[derive(Deserialize)]
struct Page {
    changes: Vec<Change>,
    max_rev: i64,
}

#[derive(Deserialize)]
struct Change {
    rev: i64,
    entity: String,
    entity_id: String,
    op: String,
}

/// What one follower saw: sale id → when the poll carrying it answered.
struct Seen {
    branch: usize,
    sales: HashMap<String, Instant>,
    out: ClientOut,
}

/// Runs the fleet for `window`; `server_pid` (when the server is local)
/// gives the RSS per parked poll. Tallies: `main` (sales), `follow_poll`,
/// `park_poll`, `lag` (µs per sale and follower, sales answered in the
/// timed window); counters: `parked`, `followers`, `rss_per_parked_poll_bytes`,
/// `missed`, `repeated`.
pub async fn run(
    ctx: Arc<Ctx>,
    window: Window,
    fleet: Fleet,
    feed_from: i64,
    server_pid: Option<u32>,
) -> Result<ClientOut> {
    let branches = ctx.world.branches.len();
    let followers = fleet.followers * branches;
    let parked = fleet.tills.saturating_sub(followers);
    let quiet = ctx.world.quiet.clone();
    anyhow::ensure!(
        parked == 0 || !quiet.is_empty(),
        "fleet: {parked} tills to park but no quiet branch (--quiet-branches)"
    );

    // The parked polls first, to read what they cost the server.
    let rss_before = server_pid.and_then(memory_kib).map(|(rss, _)| rss);
    let sent = Arc::new(AtomicUsize::new(0));
    let park = {
        let (ctx, sent, quiet) = (ctx.clone(), sent.clone(), quiet.clone());
        tokio::spawn(async move {
            drive(parked, window, |i, w| {
                let branch = quiet[i % quiet.len()].clone();
                park_one(ctx.clone(), w, branch, feed_from, sent.clone())
            })
            .await
        })
    };
    let placed = Instant::now();
    while sent.load(Ordering::Relaxed) < parked && placed.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Sent is not yet parked: give the server a moment to take them all.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_parked = server_pid.and_then(memory_kib).map(|(rss, _)| rss);

    let answered: Arc<Answered> = Arc::default();
    let selling_done = Arc::new(AtomicBool::new(false));
    let follow = {
        let (ctx, done, answered) = (ctx.clone(), selling_done.clone(), answered.clone());
        tokio::spawn(async move {
            let mut set = tokio::task::JoinSet::new();
            for i in 0..followers {
                let branch = i % branches;
                let until = Catchup {
                    selling_done: done.clone(),
                    answered: answered.clone(),
                };
                set.spawn(follow_one(ctx.clone(), window, branch, feed_from, until));
            }
            let mut seen = Vec::new();
            while let Some(s) = set.join_next().await {
                seen.push(s??);
            }
            anyhow::Ok(seen)
        })
    };
    let mut all = drive(fleet.sellers, window, |i, w| {
        scenarios::sales_noted(i, ctx.clone(), w, answered.clone())
    })
    .await?;
    selling_done.store(true, Ordering::Relaxed);
    let seen = follow.await??;
    all.merge(park.await??);

    all.bump("parked", parked as u64);
    all.bump("followers", followers as u64);
    if let (Some(before), Some(after), true) = (rss_before, rss_parked, parked > 0) {
        all.bump(
            "rss_per_parked_poll_bytes",
            after.saturating_sub(before) * 1024 / parked as u64,
        );
    }
    let answered = answered.lock().map(|m| m.clone()).unwrap_or_default();
    for s in seen {
        judge(&mut all, s, &answered, window);
    }
    Ok(all)
}

/// Adds a follower's lags, misses and repeats to `all`.
fn judge(
    all: &mut ClientOut,
    s: Seen,
    answered: &HashMap<String, (usize, Instant)>,
    window: Window,
) {
    let Seen { branch, sales, out } = s;
    all.merge(out);
    let mut missed = 0u64;
    for (id, (b, at)) in answered {
        if *b != branch {
            continue;
        }
        match sales.get(id) {
            Some(seen) if window.counts(*at) => {
                let micros = seen.saturating_duration_since(*at).as_micros() as u64;
                all.tally("lag").record_micros(micros);
            }
            Some(_) => {}
            None => missed += 1,
        }
    }
    if missed > 0 {
        all.fail(format!(
            "a follower of branch {branch} never saw {missed} acknowledged sales"
        ));
    }
    all.bump("missed", missed);
}

/// When a follower may stop: once the sellers stopped and it has seen every
/// sale they were answered at its branch.
struct Catchup {
    selling_done: Arc<AtomicBool>,
    answered: Arc<Answered>,
}

impl Catchup {
    fn has_all(&self, branch: usize, seen: &HashMap<String, Instant>) -> bool {
        self.answered.lock().is_ok_and(|m| {
            m.iter()
                .all(|(id, (b, _))| *b != branch || seen.contains_key(id))
        })
    }
}

/// One till following its selling branch's head: a long poll, and the next
/// one as soon as it answers. After the sellers stop, short polls until it
/// has every sale of its branch or `DRAIN` passes.
async fn follow_one(
    ctx: Arc<Ctx>,
    w: Window,
    branch: usize,
    since: i64,
    until: Catchup,
) -> Result<Seen> {
    let token = ctx.world.branches[branch].token.clone();
    let mut seen = Seen {
        branch,
        sales: HashMap::new(),
        out: ClientOut::default(),
    };
    let mut cursor = since;
    let mut revs = HashSet::new();
    let mut drain_until: Option<Instant> = None;
    loop {
        let wait = if w.running() {
            w.deadline
                .saturating_duration_since(Instant::now())
                .as_secs()
                .min(WAIT_SECS)
        } else {
            1
        };
        if !w.running() {
            if !until.selling_done.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let end = *drain_until.get_or_insert_with(|| Instant::now() + DRAIN);
            if Instant::now() >= end || until.has_all(branch, &seen.sales) {
                break;
            }
        }
        let path = format!("/sync/changes?since={cursor}&limit=500&wait={wait}");
        let started = Instant::now();
        let a = send(&ctx, Method::GET, &path, &token, None).await;
        let at = Instant::now();
        let page: Option<Page> = serde_json::from_slice(&a.body).ok();
        if w.counts(started) {
            let n = page.as_ref().map_or(0, |p| p.changes.len()) as u64;
            seen.out.tally("follow_poll").record(started, a.status, n);
        }
        let Some(page) = page.filter(|_| ok(a.status)) else {
            seen.out.tally("follow_poll").sample(describe(&a));
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        for c in &page.changes {
            if c.rev <= cursor || !revs.insert(c.rev) {
                seen.out.bump("repeated", 1);
                seen.out
                    .fail(format!("branch {branch}: change {} came again", c.rev));
            }
            if c.entity == "sale"
                && c.op == "create"
                && seen.sales.insert(c.entity_id.clone(), at).is_some()
            {
                seen.out.bump("repeated", 1);
                seen.out.fail(format!(
                    "branch {branch}: sale {} created twice",
                    c.entity_id
                ));
            }
        }
        cursor = page.max_rev;
    }
    Ok(seen)
}

/// One idle till on a quiet branch: long polls back to back to the end.
async fn park_one(
    ctx: Arc<Ctx>,
    w: Window,
    branch: Branch,
    since: i64,
    sent: Arc<AtomicUsize>,
) -> Result<ClientOut> {
    let mut out = ClientOut::default();
    let mut cursor = since;
    let mut first = true;
    while w.running() {
        let wait = w
            .deadline
            .saturating_duration_since(Instant::now())
            .as_secs()
            .min(WAIT_SECS);
        if wait == 0 {
            break;
        }
        let path = format!("/sync/changes?since={cursor}&limit=500&wait={wait}");
        if first {
            sent.fetch_add(1, Ordering::Relaxed);
            first = false;
        }
        let started = Instant::now();
        let a = send(&ctx, Method::GET, &path, &branch.token, None).await;
        let page: Option<Page> = serde_json::from_slice(&a.body).ok();
        if w.counts(started) {
            out.tally("park_poll").record(started, a.status, 0);
        }
        match page.filter(|_| ok(a.status)) {
            Some(p) => cursor = p.max_rev,
            None => {
                out.tally("park_poll").sample(describe(&a));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    Ok(out)
}
