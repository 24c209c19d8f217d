//! One fault drill of the HA topology under load, and its checks (the
//! `ha-bench` tool; see its header). Clients record every answer; the
//! checks compare what they were told with what the new leader holds.
//!
//! Over 600 lines because a drill's load, its fault, its wait for a whole
//! cluster and its checks read best as one sequence; the throughput runs of
//! `sync-cost` (from `Throughput` down) are the part to move into a module
//! of their own when this grows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use futures_util::{stream, StreamExt};
use rand::rngs::SmallRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use reqwest::Method;
use serde::Serialize;
use serde_json::{json, Value};

use domain::db::Pool;

use crate::api::Api;
use crate::ha_cursor;
use crate::prep::World;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drill {
    /// kill -9 of the leader's postmaster.
    Failover,
    /// kill -9 of the synchronous standby's postmaster.
    Replica,
    /// kill -9 of one etcd member, started again 5 s later.
    Etcd,
    /// SIGSTOP of the leader's Patroni (HAProxy loses its view of the node,
    /// its PostgreSQL runs on), SIGCONT once another node leads.
    Freeze,
    /// The whole leader node lost: kill -9 of its Patroni and its
    /// postmaster; started again once another node leads.
    Node,
    /// The leader node stopped in order (maintenance): its Patroni stops
    /// PostgreSQL and hands the lock over; started again once another
    /// node leads.
    Stop,
    /// Both replicas' nodes lost (kill -9 of their Patroni and
    /// postmaster): the leader goes on alone (not strict); both started
    /// again 10 s later.
    Replicas,
}

impl Drill {
    pub fn parse(s: &str) -> Result<Drill> {
        Ok(match s {
            "failover" => Drill::Failover,
            "replica" => Drill::Replica,
            "etcd" => Drill::Etcd,
            "freeze" => Drill::Freeze,
            "node" => Drill::Node,
            "stop" => Drill::Stop,
            "replicas" => Drill::Replicas,
            other => bail!(
                "unknown drill {other}: failover, replica, etcd, freeze, node, stop or replicas"
            ),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Drill::Failover => "failover",
            Drill::Replica => "replica",
            Drill::Etcd => "etcd",
            Drill::Freeze => "freeze",
            Drill::Node => "node",
            Drill::Stop => "stop",
            Drill::Replicas => "replicas",
        }
    }

    fn fault(self) -> &'static [&'static str] {
        match self {
            Drill::Failover => &["kill-primary"],
            Drill::Replica => &["kill-replica"],
            Drill::Etcd => &["kill-etcd", "e3"],
            Drill::Freeze => &["freeze-leader"],
            Drill::Node => &["kill-node"],
            Drill::Stop => &["stop-leader"],
            Drill::Replicas => &["kill-replicas"],
        }
    }

    /// Whether the fault moves the leader (a promotion: a new timeline,
    /// so a new feed epoch).
    fn promotes(self) -> bool {
        matches!(
            self,
            Drill::Failover | Drill::Freeze | Drill::Node | Drill::Stop
        )
    }

    /// Whether the fault takes a node out until another leads: it is then
    /// started again (thawed), so the cluster can be whole.
    fn brings_back(self) -> bool {
        matches!(self, Drill::Freeze | Drill::Node | Drill::Stop)
    }

    /// Whether the leader keeps its lock until the lock's ttl (20 s) runs
    /// out: nobody is left to hand it over.
    fn waits_for_ttl(self) -> bool {
        matches!(self, Drill::Freeze | Drill::Node)
    }
}

pub struct Load {
    pub clients: usize,
    pub before: Duration,
    pub after: Duration,
    pub retry_for: Duration,
    pub writes_back_within: Duration,
}

/// What one drill found.
#[derive(Debug, Serialize, Default)]
pub struct DrillReport {
    pub drill: String,
    pub leader_before: String,
    pub leader_after: String,
    /// The node the fault hit and its role once the cluster was whole again.
    pub fault_hit: String,
    pub members_after: Vec<String>,
    /// What a till's feed cursor taken before the fault got afterwards
    /// (409 `resnapshot` after a promotion, a page otherwise).
    pub old_cursor: String,
    /// Distinct requests (mutation ids) the clients made.
    pub requests: u64,
    pub acknowledged_sales: u64,
    pub acknowledged_payments: u64,
    /// Sales a till pushed that its batch's answer accepted.
    pub acknowledged_pushed: u64,
    /// Pushed changes a batch's answer refused (none should be).
    pub pushed_rejected: u64,
    /// Attempts answered 503, and how many of those lacked Retry-After.
    pub answered_503: u64,
    pub answered_503_without_retry_after: u64,
    /// Attempts with no answer (connection cut, or no answer within the
    /// client's timeout).
    pub unanswered: u64,
    /// Attempts answered with another status, by status.
    pub other_statuses: BTreeMap<u16, u64>,
    /// Requests never acknowledged within the retry window.
    pub unresolved: u64,
    /// First refused write to the first write accepted after it.
    pub ms_without_writes: u64,
    /// The fault to the first write accepted after the first refusal (0
    /// when no write was refused).
    pub writes_back_after_ms: u64,
    /// The fault to a whole cluster again (a leader, two streaming
    /// replicas, one synchronous).
    pub whole_again_after_ms: Option<u64>,
    /// Acknowledged but missing from the leader's database, or there with
    /// other content than acknowledged.
    pub lost: u64,
    pub content_mismatches: u64,
    /// Mutation ids with more than one row.
    pub duplicates: u64,
    /// Sales acknowledged whose `GET /sales/{id}` did not answer them.
    pub api_missing: u64,
    /// Requests never acknowledged that the database holds anyway (their
    /// answer was lost; allowed).
    pub unacknowledged_present: u64,
    pub invariant_violations: Vec<String>,
    pub chains_broken: Vec<String>,
    pub failures: Vec<String>,
    pub ok: bool,
}

#[derive(Clone, Copy)]
enum Kind {
    Sale,
    Payment,
    /// A sale in a till's pushed batch, acknowledged by the batch's answer.
    Pushed,
}

struct Ack {
    kind: Kind,
    id: String,
    branch: usize,
    body: Value,
}

struct Attempt {
    sent: Instant,
    answered: Instant,
    accepted: bool,
}

#[derive(Default)]
struct ClientLog {
    requests: u64,
    acks: Vec<Ack>,
    attempts: Vec<Attempt>,
    s503: u64,
    s503_bare: u64,
    unanswered: u64,
    other: BTreeMap<u16, u64>,
    samples: Vec<String>,
    unresolved: Vec<String>,
    pushed_rejected: u64,
}

struct Shared {
    http: reqwest::Client,
    base: String,
    world: World,
    prefix: String,
    load_end: Instant,
    retry_for: Duration,
}

/// Runs `drill` under `load`; `cluster` runs a `deploy/ha-cluster.sh`
/// command on the drill's cluster.
pub async fn run(
    drill: Drill,
    load: &Load,
    api: &Api,
    world: &World,
    pool: &Pool,
    cluster: &(dyn Fn(&[&str]) -> Result<String> + Sync),
) -> Result<DrillReport> {
    let mut report = DrillReport {
        drill: drill.name().to_owned(),
        leader_before: cluster(&["leader"]).unwrap_or_default(),
        ..Default::default()
    };
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let http = reqwest::Client::builder()
        // Longer than the service's statement timeout (10 s): a request
        // still unanswered then counts as a hang.
        .timeout(Duration::from_secs(15))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()?;
    let started = Instant::now();
    let shared = Arc::new(Shared {
        http,
        base: api.base.clone(),
        world: world.clone(),
        prefix: format!("ha-{}-{nonce}", drill.name()),
        load_end: started + load.before + load.after,
        retry_for: load.retry_for,
    });
    let clients: Vec<_> = (0..load.clients)
        .map(|i| tokio::spawn(client(i, shared.clone())))
        .collect();

    tokio::time::sleep(load.before).await;
    let till = &world.branches[0].token;
    let cursor = ha_cursor::take(&shared.http, &shared.base, till).await?;
    let fault_at = Instant::now();
    report.fault_hit = run_blocking(cluster, drill.fault())?;
    println!(
        "  fault: {} ({})",
        drill.fault().join(" "),
        report.fault_hit
    );
    if drill == Drill::Etcd {
        tokio::time::sleep(Duration::from_secs(5)).await;
        run_blocking(cluster, &["start-etcd", "e3"])?;
        println!("  etcd member e3 started again");
    }
    if drill == Drill::Replicas {
        // The leader alone for a while, then both nodes back.
        tokio::time::sleep(Duration::from_secs(10)).await;
        for node in report.fault_hit.split_whitespace() {
            run_blocking(cluster, &["start-node", node])?;
        }
        println!(
            "  start-node {} {:.1} s after the loss",
            report.fault_hit,
            fault_at.elapsed().as_secs_f64()
        );
    }
    if drill.brings_back() {
        // Thawed (started again) once another node leads: the frozen or
        // lost node's lock expired, or the stopped one handed it over.
        let deadline = fault_at + Duration::from_secs(60);
        loop {
            let members = run_blocking(cluster, &["members"]).unwrap_or_default();
            let moved = leader_of(&members).is_some_and(|l| l != report.leader_before);
            if moved || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let again = if drill == Drill::Freeze {
            "thaw"
        } else {
            "start-node"
        };
        run_blocking(cluster, &[again, report.fault_hit.as_str()])?;
        println!(
            "  {again} {} {:.1} s after the fault",
            report.fault_hit,
            fault_at.elapsed().as_secs_f64()
        );
    }
    // The cluster whole again, measured while the load goes on: after a
    // failover a new leader; after a replica's loss, the loss seen first
    // (Patroni notices it on its next loop).
    let whole = {
        let deadline = fault_at + Duration::from_secs(120);
        let mut seen_broken = false;
        loop {
            let members = run_blocking(cluster, &["members"]).unwrap_or_default();
            let ok = healthy(&members);
            seen_broken |= !ok;
            let done = ok
                && match drill {
                    Drill::Failover | Drill::Freeze | Drill::Node | Drill::Stop => {
                        leader_of(&members) != Some(report.leader_before.as_str())
                    }
                    Drill::Replica | Drill::Replicas => {
                        seen_broken || fault_at.elapsed() > Duration::from_secs(10)
                    }
                    Drill::Etcd => true,
                };
            if done {
                break Some(fault_at.elapsed());
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    report.whole_again_after_ms = whole.map(|d| d.as_millis() as u64);
    let mut logs = Vec::new();
    for c in clients {
        logs.push(c.await??);
    }
    report.leader_after = run_blocking(cluster, &["leader"]).unwrap_or_default();
    report.members_after = run_blocking(cluster, &["members"])
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();

    // A frozen or lost leader keeps its lock until the lock's ttl (20 s)
    // runs out: those drills' bound is the ttl's, not the failover's.
    let within = if drill.waits_for_ttl() {
        load.writes_back_within.max(Duration::from_secs(45))
    } else {
        load.writes_back_within
    };
    tally(&mut report, &logs, fault_at, within);
    check(&mut report, &shared, &logs, pool).await?;
    match ha_cursor::check(&shared.http, &shared.base, till, &cursor, drill.promotes()).await? {
        Ok(seen) => report.old_cursor = seen,
        Err(wrong) => {
            report.old_cursor = wrong.clone();
            report.failures.push(wrong);
        }
    }
    if drill.promotes() && report.leader_after == report.leader_before {
        report
            .failures
            .push(format!("the leader is still {}", report.leader_before));
    }
    // The nodes the fault hit are back, as replicas (an etcd member is
    // not a database node).
    let hits: Vec<&str> = match drill {
        Drill::Etcd => Vec::new(),
        _ => report.fault_hit.split_whitespace().collect(),
    };
    for hit in hits {
        let back = report.members_after.iter().any(|m| {
            let f: Vec<&str> = m.split_whitespace().collect();
            f.first() == Some(&hit)
                && matches!(f.get(1), Some(&"replica") | Some(&"sync_standby"))
                && matches!(f.get(2), Some(&"streaming") | Some(&"running"))
        });
        if !back {
            report.failures.push(format!(
                "{hit} is not back as a streaming replica: {:?}",
                report.members_after
            ));
        }
    }
    if report.whole_again_after_ms.is_none() {
        report
            .failures
            .push("the cluster was not whole again within 120 s".to_owned());
    }
    report.ok = report.failures.is_empty();
    Ok(report)
}

/// A cluster command from async code, without stalling the clients' tasks
/// on this worker thread.
fn run_blocking(
    cluster: &(dyn Fn(&[&str]) -> Result<String> + Sync),
    args: &[&str],
) -> Result<String> {
    tokio::task::block_in_place(|| cluster(args))
}

/// `members` lines (`name role state lag timeline`): one leader running,
/// every other node a running or streaming replica on the leader's timeline
/// (an old leader not yet rewound is not back), one of them synchronous,
/// three in all.
fn healthy(members: &str) -> bool {
    let rows: Vec<Vec<&str>> = members
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let role = |r: &Vec<&str>, want: &str| r.get(1) == Some(&want);
    let up = |r: &Vec<&str>| matches!(r.get(2), Some(&"running") | Some(&"streaming"));
    rows.len() == 3
        && rows.iter().filter(|r| role(r, "leader") && up(r)).count() == 1
        && rows.iter().any(|r| role(r, "sync_standby") && up(r))
        && rows.iter().all(up)
        && rows
            .iter()
            .all(|r| r.get(4).is_some() && r.get(4) == rows[0].get(4))
}

fn leader_of(members: &str) -> Option<&str> {
    members.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&"leader"))
            .then(|| f.first().copied())
            .flatten()
    })
}

/// One or two stocked medicines, one unit each.
fn drill_items(rng: &mut SmallRng, world: &World) -> Vec<Value> {
    let choices = world.medicines.len() - 1;
    let n = rng.gen_range(1..=2usize).min(choices);
    sample(rng, choices, n)
        .into_iter()
        .map(|m| json!({"medicine_id": world.medicines[m + 1], "quantity": 1}))
        .collect()
}

/// Every change a batch's answer accepted is acknowledged (the sale it
/// made is named by its id); a refused one is counted and shown.
fn acknowledge_push(log: &mut ClientLog, answer: &Value, branch: usize) {
    for a in answer["accepted"].as_array().into_iter().flatten() {
        log.acks.push(Ack {
            kind: Kind::Pushed,
            id: a["client_mutation_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            branch,
            body: a.clone(),
        });
    }
    for r in answer["rejected"].as_array().into_iter().flatten() {
        log.pushed_rejected += 1;
        if log.samples.len() < 3 {
            log.samples.push(format!("pushed change refused: {r}"));
        }
    }
}

async fn client(i: usize, ctx: Arc<Shared>) -> Result<ClientLog> {
    let world = &ctx.world;
    let b = i % world.branches.len();
    let token = world.branches[b].token.clone();
    let mut rng = SmallRng::seed_from_u64(7000 + i as u64);
    let mut log = ClientLog::default();
    let mut seq = 0u64;
    while Instant::now() < ctx.load_end {
        seq += 1;
        let id = format!("{}-c{i}-{seq}", ctx.prefix);
        let (kind, path, body) = match seq % 3 {
            1 => (
                Kind::Sale,
                "/sales".to_owned(),
                json!({"items": drill_items(&mut rng, world), "payment_method": "cash",
                       "client_mutation_id": id}),
            ),
            2 => {
                let customer = &world.customers[rng.gen_range(0..world.customers.len())];
                (
                    Kind::Payment,
                    format!("/customers/{customer}/payments"),
                    json!({"amount": "1.00", "notes": "ha drill", "client_mutation_id": id}),
                )
            }
            _ => {
                // A till's batch of three sales, each its own mutation id.
                let device = world
                    .devices
                    .iter()
                    .find(|(_, db)| *db == b)
                    .map(|(d, _)| d.clone())
                    .unwrap_or_default();
                let changes: Vec<Value> = (0..3)
                    .map(|k| {
                        json!({"client_mutation_id": format!("{id}-{k}"), "entity": "sale",
                               "op": "create",
                               "payload": {"items": drill_items(&mut rng, world),
                                           "payment_method": "cash"}})
                    })
                    .collect();
                (
                    Kind::Pushed,
                    "/sync/push".to_owned(),
                    json!({"device_id": device, "changes": changes}),
                )
            }
        };
        let body = serde_json::to_vec(&body)?;
        log.requests += 1;
        let first = Instant::now();
        loop {
            let sent = Instant::now();
            let answer = ctx
                .http
                .request(Method::POST, format!("{}{path}", ctx.base))
                .bearer_auth(&token)
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            let (status, retry_after, text) = match answer {
                Ok(res) => {
                    let status = res.status().as_u16();
                    let retry = res.headers().contains_key(RETRY_AFTER);
                    match res.bytes().await {
                        Ok(b) => (status, retry, b.to_vec()),
                        Err(_) => (0, false, Vec::new()),
                    }
                }
                Err(_) => (0, false, Vec::new()),
            };
            let answered = Instant::now();
            let accepted = status == 200 || status == 201;
            log.attempts.push(Attempt {
                sent,
                answered,
                accepted,
            });
            if accepted {
                let answer: Value = serde_json::from_slice(&text).unwrap_or(Value::Null);
                if matches!(kind, Kind::Pushed) {
                    acknowledge_push(&mut log, &answer, b);
                } else {
                    log.acks.push(Ack {
                        kind,
                        id: id.clone(),
                        branch: b,
                        body: answer,
                    });
                }
                break;
            }
            match status {
                503 => {
                    log.s503 += 1;
                    if !retry_after {
                        log.s503_bare += 1;
                    }
                }
                0 => log.unanswered += 1,
                other => {
                    *log.other.entry(other).or_default() += 1;
                    if log.samples.len() < 3 {
                        log.samples.push(format!(
                            "{other}: {}",
                            String::from_utf8_lossy(&text[..text.len().min(300)])
                        ));
                    }
                }
            }
            if first.elapsed() > ctx.retry_for {
                log.unresolved.push(id.clone());
                break;
            }
            // A till waits a little before it tries again.
            let pause = rng.gen_range(150..350);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }
    Ok(log)
}

fn tally(report: &mut DrillReport, logs: &[ClientLog], fault_at: Instant, within: Duration) {
    for log in logs {
        report.requests += log.requests;
        for a in &log.acks {
            match a.kind {
                Kind::Sale => report.acknowledged_sales += 1,
                Kind::Payment => report.acknowledged_payments += 1,
                Kind::Pushed => report.acknowledged_pushed += 1,
            }
        }
        report.pushed_rejected += log.pushed_rejected;
        report.answered_503 += log.s503;
        report.answered_503_without_retry_after += log.s503_bare;
        report.unanswered += log.unanswered;
        for (s, n) in &log.other {
            *report.other_statuses.entry(*s).or_default() += n;
        }
        report.unresolved += log.unresolved.len() as u64;
        for s in &log.samples {
            if report.failures.len() < 6 {
                report.failures.push(format!("answered {s}"));
            }
        }
    }
    let attempts = logs.iter().flat_map(|l| l.attempts.iter());
    let first_refused = attempts
        .clone()
        .filter(|a| !a.accepted)
        .map(|a| a.answered)
        .min();
    if let Some(refused) = first_refused {
        let back = attempts
            .filter(|a| a.accepted && a.sent >= refused)
            .map(|a| a.answered)
            .min();
        match back {
            Some(back) => {
                report.ms_without_writes = (back - refused).as_millis() as u64;
                report.writes_back_after_ms =
                    back.saturating_duration_since(fault_at).as_millis() as u64;
                if back.saturating_duration_since(fault_at) > within {
                    report.failures.push(format!(
                        "writes came back {} ms after the fault, later than {} s",
                        report.writes_back_after_ms,
                        within.as_secs()
                    ));
                }
            }
            None => report
                .failures
                .push("no write was accepted after the first refusal".to_owned()),
        }
    }
    if report.answered_503_without_retry_after > 0 {
        report.failures.push(format!(
            "{} answers 503 without Retry-After",
            report.answered_503_without_retry_after
        ));
    }
    if report.pushed_rejected > 0 {
        report.failures.push(format!(
            "{} pushed changes were refused",
            report.pushed_rejected
        ));
    }
    if report.unresolved > 0 {
        report.failures.push(format!(
            "{} requests were never acknowledged",
            report.unresolved
        ));
    }
    if report.other_statuses.keys().any(|s| *s >= 500) {
        report.failures.push(format!(
            "server errors other than 503: {:?}",
            report.other_statuses
        ));
    }
}

/// Acknowledged = present once with the acknowledged content; nothing
/// twice; the ledgers' invariants and the invoice chains hold.
async fn check(
    report: &mut DrillReport,
    ctx: &Shared,
    logs: &[ClientLog],
    pool: &Pool,
) -> Result<()> {
    let client = pool.get().await?;
    let like = format!("{}-%", ctx.prefix);
    // mutation id -> (rows, id, content)
    let mut held: HashMap<String, (i64, String, String)> = HashMap::new();
    for sql in [
        "SELECT client_mutation_id, count(*)::bigint, min(id::text), min(total::text) \
         FROM sales WHERE client_mutation_id LIKE $1 GROUP BY 1",
        "SELECT client_mutation_id, count(*)::bigint, min(id::text), min(amount::text) \
         FROM customer_ledger WHERE client_mutation_id LIKE $1 GROUP BY 1",
    ] {
        for row in client.query(sql, &[&like]).await? {
            held.insert(row.get(0), (row.get(1), row.get(2), row.get(3)));
        }
    }
    report.duplicates = held.values().filter(|(n, _, _)| *n > 1).count() as u64;
    let mut acked = 0usize;
    for ack in logs.iter().flat_map(|l| l.acks.iter()) {
        acked += 1;
        let (id_field, content_field) = match ack.kind {
            Kind::Sale => ("id", "total"),
            Kind::Payment => ("ledger_id", "amount_paid"),
            // A push answer names the sale and its invoice, not its total.
            Kind::Pushed => ("id", ""),
        };
        match held.get(&ack.id) {
            None => {
                report.lost += 1;
                if report.failures.len() < 10 {
                    report
                        .failures
                        .push(format!("acknowledged {} is not in the database", ack.id));
                }
            }
            Some((_, id, content)) => {
                if ack.body[id_field].as_str() != Some(id.as_str())
                    || (!content_field.is_empty()
                        && ack.body[content_field].as_str() != Some(content.as_str()))
                {
                    report.content_mismatches += 1;
                    if report.failures.len() < 10 {
                        report.failures.push(format!(
                            "{}: acknowledged {} {} / {}, the database holds {id} {content}",
                            ack.id, ack.body[id_field], ack.body[content_field], id_field
                        ));
                    }
                }
            }
        }
    }
    report.unacknowledged_present = (held.len() as u64).saturating_sub(acked as u64);
    if report.lost > 0 || report.duplicates > 0 || report.content_mismatches > 0 {
        report.failures.push(format!(
            "lost {}, duplicated {}, altered {}",
            report.lost, report.duplicates, report.content_mismatches
        ));
    }

    // Through the API: every acknowledged sale reads back as acknowledged.
    let sales: Vec<(&Ack, String)> = logs
        .iter()
        .flat_map(|l| l.acks.iter())
        .filter(|a| matches!(a.kind, Kind::Sale | Kind::Pushed))
        .filter_map(|a| a.body["id"].as_str().map(|id| (a, id.to_owned())))
        .collect();
    let missing: usize = stream::iter(sales)
        .map(|(ack, id)| async move {
            let token = &ctx.world.branches[ack.branch].token;
            let res = ctx
                .http
                .get(format!("{}/sales/{id}", ctx.base))
                .bearer_auth(token)
                .send()
                .await;
            let Ok(res) = res else { return 1 };
            if res.status().as_u16() != 200 {
                return 1;
            }
            let body: Value = res.json().await.unwrap_or(Value::Null);
            usize::from(matches!(ack.kind, Kind::Sale) && body["total"] != ack.body["total"])
        })
        .buffer_unordered(16)
        .fold(0, |n, m| async move { n + m })
        .await;
    report.api_missing = missing as u64;
    if missing > 0 {
        report.failures.push(format!(
            "{missing} acknowledged sales do not read back through the API"
        ));
    }

    let violations = domain::stock::invariant_violations(&client)
        .await
        .map_err(|e| anyhow::anyhow!("invariant query: {e}"))?;
    report.invariant_violations = violations.iter().map(|v| format!("{v:?}")).collect();
    if !violations.is_empty() {
        report.failures.push(format!(
            "invariants broken: {:?}",
            report.invariant_violations
        ));
    }
    for b in &ctx.world.branches {
        let Ok(branch) = b.id.parse() else { continue };
        let chain = domain::sales::verify_chain(&client, branch)
            .await
            .map_err(|e| anyhow::anyhow!("chain check: {e}"))?;
        if chain.status != "ok" {
            report
                .chains_broken
                .push(format!("{}: {:?}", b.id, chain.first_broken));
        }
        let notes = domain::returns::verify_chain(&client, branch)
            .await
            .map_err(|e| anyhow::anyhow!("credit note chain check: {e}"))?;
        if notes.status != "ok" {
            report
                .chains_broken
                .push(format!("{} credit notes: {:?}", b.id, notes.first_broken));
        }
    }
    if !report.chains_broken.is_empty() {
        report
            .failures
            .push(format!("hash chains broken: {:?}", report.chains_broken));
    }
    Ok(())
}

pub fn print_report(r: &DrillReport) {
    println!(
        "  leader {} -> {}; {} requests: {} sales, {} payments and {} pushed sales acknowledged",
        r.leader_before,
        r.leader_after,
        r.requests,
        r.acknowledged_sales,
        r.acknowledged_payments,
        r.acknowledged_pushed
    );
    println!(
        "  without writes {} ms (writes back {} ms after the fault); 503 answers {}, unanswered attempts {}, other {:?}",
        r.ms_without_writes, r.writes_back_after_ms, r.answered_503, r.unanswered, r.other_statuses
    );
    println!(
        "  lost {}, duplicates {}, altered {}, unresolved {}, unacknowledged but present {}; cluster whole again after {}",
        r.lost,
        r.duplicates,
        r.content_mismatches,
        r.unresolved,
        r.unacknowledged_present,
        r.whole_again_after_ms
            .map_or("never".to_owned(), |ms| format!("{ms} ms"))
    );
    println!("  a till's cursor from before the fault: {}", r.old_cursor);
    for m in &r.members_after {
        println!("    {m}");
    }
    for f in &r.failures {
        println!("  FAILED: {f}");
    }
}

pub fn print_table(reports: &[DrillReport]) {
    println!("\n| drill | acknowledged | time without writes | writes back after | 503 answers | unanswered | lost | duplicates | whole again after | old cursor | checks |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in reports {
        let cursor: Vec<&str> = r.old_cursor.split_whitespace().take(2).collect();
        println!(
            "| {} | {} | {:.1} s | {:.1} s | {} | {} | {} | {} | {} | {} | {} |",
            r.drill,
            r.acknowledged_sales + r.acknowledged_payments + r.acknowledged_pushed,
            r.ms_without_writes as f64 / 1000.0,
            r.writes_back_after_ms as f64 / 1000.0,
            r.answered_503,
            r.unanswered,
            r.lost,
            r.duplicates,
            r.whole_again_after_ms
                .map_or("never".to_owned(), |ms| format!(
                    "{:.1} s",
                    ms as f64 / 1000.0
                )),
            cursor.join(" "),
            if r.ok { "held" } else { "FAILED" }
        );
    }
}

/// Throughput of one replication setting: acknowledged sales and payments
/// per second (the clients alternate them), no fault.
#[derive(Debug, Serialize)]
pub struct Throughput {
    pub setting: String,
    pub secs: f64,
    pub sales_per_sec: f64,
    pub payments_per_sec: f64,
    pub refused: u64,
}

/// Runs `clients` clients for `secs` seconds and counts what was
/// acknowledged.
pub async fn throughput(
    setting: &str,
    clients: usize,
    secs: Duration,
    api: &Api,
    world: &World,
) -> Result<Throughput> {
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .pool_max_idle_per_host(256)
        .tcp_nodelay(true)
        .build()?;
    let started = Instant::now();
    let shared = Arc::new(Shared {
        http,
        base: api.base.clone(),
        world: world.clone(),
        prefix: format!("sync-{nonce}"),
        load_end: started + secs,
        retry_for: Duration::from_secs(10),
    });
    let tasks: Vec<_> = (0..clients)
        .map(|i| tokio::spawn(client(i, shared.clone())))
        .collect();
    let mut logs = Vec::new();
    for t in tasks {
        logs.push(t.await??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let count = |want: fn(&Kind) -> bool| {
        logs.iter()
            .flat_map(|l| l.acks.iter())
            .filter(|a| want(&a.kind))
            .count() as f64
    };
    Ok(Throughput {
        setting: setting.to_owned(),
        secs: elapsed,
        sales_per_sec: count(|k| matches!(k, Kind::Sale)) / elapsed,
        payments_per_sec: count(|k| matches!(k, Kind::Payment)) / elapsed,
        refused: logs.iter().map(|l| l.s503 + l.unanswered).sum(),
    })
}

pub fn print_throughput(runs: &[Throughput]) {
    let Some(base) = runs.first() else { return };
    let total = |t: &Throughput| t.sales_per_sec + t.payments_per_sec;
    println!(
        "\n| replication | sales/s | payments/s | together | ratio to `{}` |",
        base.setting
    );
    println!("|---|---|---|---|---|");
    for t in runs {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2} |",
            t.setting,
            t.sales_per_sec,
            t.payments_per_sec,
            total(t),
            if total(base) > 0.0 {
                total(t) / total(base)
            } else {
                0.0
            }
        );
    }
}
