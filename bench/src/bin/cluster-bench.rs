//! `cluster-bench`: sales throughput of the scale-out topology on this
//! machine, one process against several, with branch affinity and without.
//!
//! ```sh
//! cargo run --release -p bench --bin cluster-bench                 # 1 affine, 2 affine, 2 round robin
//! cargo run --release -p bench --bin cluster-bench -- --runs 2:roundrobin --secs 30
//! ```
//!
//! Each run brings up `deploy/local-cluster.sh` (a primary, a streaming
//! standby, N service processes, HAProxy) in its own directory, prepares
//! branches, cashiers and stock through HAProxy (the `bench` crate's
//! preparation), runs the `sales` scenario (client `i` sells at branch
//! `i % branches` with that branch's cashier) through HAProxy for a warm-up
//! and a timed window, then checks that the database holds every
//! acknowledged sale once and that `domain::stock::invariant_violations`
//! finds nothing, reads each process's metrics (group-commit sizes, the
//! group commits that fell back to one sale at a time, where each branch's
//! actor ran) and brings the cluster down. Figures go to
//! `target/cluster-bench/latest.json`.
//!
//! With `--fleet`, each run then runs the bench's `fleet` scenario through
//! HAProxy too (the till fleet on the change feed while the same sales
//! run; see `fleet.rs`) and reports its sales against the sales alone, the
//! followers' lag, and any change a follower missed or saw twice.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: its figures and failures go to the terminal"
)]

#[allow(dead_code)]
#[path = "../api.rs"]
mod api;

#[path = "../cli.rs"]
mod cli;
#[allow(dead_code)]
#[path = "../fleet.rs"]
mod fleet;
#[allow(dead_code)]
#[path = "../load.rs"]
mod load;
#[allow(dead_code)]
#[path = "../prep.rs"]
mod prep;
#[allow(dead_code)]
#[path = "../scenarios.rs"]
mod scenarios;
#[allow(dead_code)]
#[path = "../server.rs"]
mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;

use crate::api::Api;
use crate::load::{drive, Summary, Window};
use crate::prep::Sizes;
use crate::scenarios::Ctx;

#[derive(Parser, Debug)]
#[command(
    name = "cluster-bench",
    about = "Sales through HAProxy: 1 process against several, with branch affinity and round robin"
)]
struct Cli {
    /// Runs as PROCESSES:BALANCE (balance `affinity` or `roundrobin`),
    /// comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1:affinity,2:affinity,2:roundrobin"
    )]
    runs: Vec<String>,
    /// Timed seconds per run (after the warm-up).
    #[arg(long, default_value_t = 20)]
    secs: u64,
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Concurrent selling clients.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// Branches the clients sell at (client `i` at branch `i % branches`).
    #[arg(long, default_value_t = 8)]
    branches: usize,
    /// HAProxy's port; the cluster takes the ports around it (see
    /// deploy/local-cluster.sh).
    #[arg(long, default_value_t = 18280)]
    port: u16,
    /// The service binary (default: built with this tool's profile).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// An environment variable for every service process, e.g.
    /// `--env PHARMACY__DATABASE__POOL_SIZE=16`; repeatable.
    #[arg(long = "env")]
    server_env: Vec<String>,
    /// After the sales alone, the `fleet` scenario in the same cluster.
    #[arg(long)]
    fleet: bool,
    /// `--fleet`: tills on the change feed in all.
    #[arg(long, default_value_t = 1_000)]
    tills: usize,
    /// `--fleet`: tills following each selling branch's head.
    #[arg(long, default_value_t = 3)]
    followers: usize,
    /// `--fleet`: quiet branches where the other tills park.
    #[arg(long, default_value_t = 20)]
    quiet_branches: usize,
}

/// `--fleet`'s figures for one run.
#[derive(Debug, Serialize)]
struct FleetReport {
    sales: Summary,
    /// Sales/s with the fleet over sales/s alone.
    against_alone: f64,
    lag: Option<Summary>,
    followers: u64,
    parked: u64,
    missed: u64,
    repeated: u64,
    failures: Vec<String>,
}

#[derive(Debug, Serialize)]
struct RunReport {
    processes: usize,
    balance: String,
    clients: usize,
    branches: usize,
    secs: u64,
    sales: Summary,
    /// Sales the clients saw acknowledged (warm-up included) and sales the
    /// database holds beyond the preparation's.
    acknowledged: u64,
    unanswered: u64,
    in_database: i64,
    invariant_violations: Vec<String>,
    fleet: Option<FleetReport>,
    /// Per process: group commits, mean sales per group commit, group
    /// commits that fell back to one sale per transaction, branch actors.
    processes_metrics: Vec<ProcessMetrics>,
    ok: bool,
}

#[derive(Debug, Serialize, Default)]
struct ProcessMetrics {
    url: String,
    /// `POST /sales` answered 201 by this process (preparation included).
    sales_made: f64,
    group_commits: f64,
    mean_batch: f64,
    batch_fallbacks: f64,
    branch_actors: usize,
    mean_mailbox_wait_ms: f64,
}

fn main() -> ExitCode {
    cli::exit_with(run(Cli::parse()), "a correctness check failed (see above)")
}

async fn run(cli: Cli) -> Result<bool> {
    let root = cli::root();
    let out = root.join("target/cluster-bench");
    std::fs::create_dir_all(&out)?;
    let bin = match &cli.server_bin {
        Some(b) => b.clone(),
        None => {
            println!("building the service");
            server::build_binary()?
        }
    };
    let mut reports = Vec::new();
    for spec in &cli.runs {
        let (processes, balance) = spec
            .split_once(':')
            .with_context(|| format!("a run is PROCESSES:BALANCE, not {spec}"))?;
        let processes: usize = processes.parse().context("PROCESSES")?;
        if !matches!(balance, "affinity" | "roundrobin") {
            bail!("balance is affinity or roundrobin, not {balance}");
        }
        let dir = out.join(format!("{processes}-{balance}"));
        println!("\n== {processes} process(es), {balance}: {} clients over {} branches, {} s warm-up, {} s timed",
            cli.clients, cli.branches, cli.warmup, cli.secs);
        let env = cluster_up(&root, &bin, &dir, &cli, processes, balance)?;
        let report = measure(&cli, &env, processes, balance).await;
        let down = cluster_down(&root, &dir);
        let report = report?;
        down?;
        print_run(&report);
        reports.push(report);
    }
    print_table(&reports);
    std::fs::write(
        out.join("latest.json"),
        serde_json::to_vec_pretty(&reports)?,
    )?;
    println!("figures written to {}", out.join("latest.json").display());
    Ok(reports.iter().all(|r| r.ok))
}

/// `deploy/local-cluster.sh up`, answering its `KEY=VALUE` lines.
fn cluster_up(
    root: &Path,
    bin: &Path,
    dir: &Path,
    cli: &Cli,
    processes: usize,
    balance: &str,
) -> Result<BTreeMap<String, String>> {
    // A leftover of an interrupted run.
    let _ = cluster_down(root, dir);
    let mut cmd = Command::new(root.join("deploy/local-cluster.sh"));
    cmd.arg("up")
        .arg("--dir")
        .arg(dir)
        .args(["--processes", &processes.to_string()])
        .args(["--balance", balance])
        .args(["--port", &cli.port.to_string()])
        .env("PHARMACY_BIN", bin)
        .env("PHARMACY__LOG__LEVEL", "warn");
    for kv in &cli.server_env {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--env takes KEY=VALUE, not {kv}"))?;
        cmd.env(k, v);
    }
    let output = cmd.output().context("run deploy/local-cluster.sh up")?;
    if !output.status.success() {
        bail!(
            "deploy/local-cluster.sh up failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
        .collect())
}

fn cluster_down(root: &Path, dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let output = Command::new(root.join("deploy/local-cluster.sh"))
        .arg("down")
        .arg("--dir")
        .arg(dir)
        .arg("--purge")
        .output()
        .context("run deploy/local-cluster.sh down")?;
    if !output.status.success() {
        bail!(
            "deploy/local-cluster.sh down failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

fn get<'a>(env: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str> {
    env.get(key)
        .map(String::as_str)
        .with_context(|| format!("local-cluster.sh printed no {key}"))
}

async fn measure(
    cli: &Cli,
    env: &BTreeMap<String, String>,
    processes: usize,
    balance: &str,
) -> Result<RunReport> {
    let base = get(env, "BASE_URL")?.to_owned();
    let api = Api::new(base.clone())?;
    let admin = api
        .login(get(env, "ADMIN_EMAIL")?, get(env, "ADMIN_PASSWORD")?)
        .await?;
    let sizes = Sizes {
        branches: cli.branches.max(1),
        customers: 8,
        stocked: 13,
        devices: 0,
        device_branches: 1,
        units: 1_000_000,
        catalogue: 0,
        quiet: if cli.fleet { cli.quiet_branches } else { 0 },
    };
    let world = prep::prepare(&api, admin, &sizes)
        .await
        .context("prepare")?;
    let pool = pharmacy::db::pool(
        get(env, "DATABASE_URL")?,
        &pharmacy::config::Config::defaults().database,
    )?;
    let sales_before: i64 = pool
        .get()
        .await?
        .query_one("SELECT count(*) FROM sales", &[])
        .await?
        .get(0);

    let ctx = Arc::new(Ctx {
        http: api.http.clone(),
        base,
        world,
    });
    let window = Window::new(
        Duration::from_secs(cli.warmup),
        Duration::from_secs(cli.secs.max(1)),
    );
    let outcome = drive(cli.clients.max(1), window, |i, w| {
        scenarios::sales(i, ctx.clone(), w, false)
    })
    .await?;
    let secs = window.measured_secs();
    let sales = outcome
        .tallies
        .get("main")
        .map(|t| t.summary(secs))
        .context("no sale was timed")?;

    let fleet = if cli.fleet {
        Some(run_fleet(cli, &ctx, &pool, &sales).await?)
    } else {
        None
    };

    let client = pool.get().await?;
    let sales_after: i64 = client
        .query_one("SELECT count(*) FROM sales", &[])
        .await?
        .get(0);
    let violations = domain::stock::invariant_violations(&client).await?;
    drop(client);
    pool.close();
    let in_database = sales_after - sales_before;

    let mut processes_metrics = Vec::new();
    for url in get(env, "PROCESS_URLS")?.split_whitespace() {
        processes_metrics.push(process_metrics(&api.http, url).await);
    }
    // Every acknowledged sale is there; an unanswered one may or may not be.
    let fleet_ok = fleet
        .as_ref()
        .is_none_or(|(f, _)| f.missed == 0 && f.repeated == 0 && f.failures.is_empty());
    let (fleet_acknowledged, fleet_unanswered) = fleet.as_ref().map_or((0, 0), |(_, n)| *n);
    let acknowledged = outcome.total_ok + fleet_acknowledged;
    let unanswered = outcome.total_unanswered + fleet_unanswered;
    let counted =
        in_database >= acknowledged as i64 && in_database <= (acknowledged + unanswered) as i64;
    let ok = counted && violations.is_empty() && outcome.failures.is_empty() && fleet_ok;
    if !counted {
        eprintln!(
            "{acknowledged} sales acknowledged ({unanswered} unanswered), the database holds {in_database} new ones"
        );
    }
    for f in &outcome.failures {
        eprintln!("failure: {f}");
    }
    Ok(RunReport {
        processes,
        balance: balance.to_owned(),
        clients: cli.clients,
        branches: cli.branches,
        secs: cli.secs,
        sales,
        acknowledged,
        unanswered,
        in_database,
        invariant_violations: violations.iter().map(|v| format!("{v:?}")).collect(),
        fleet: fleet.map(|(f, _)| f),
        processes_metrics,
        ok,
    })
}

/// The `fleet` scenario after the sales alone (`alone`), in the same
/// cluster; with the sales it acknowledged and left unanswered.
async fn run_fleet(
    cli: &Cli,
    ctx: &Arc<Ctx>,
    pool: &domain::db::Pool,
    alone: &Summary,
) -> Result<(FleetReport, (u64, u64))> {
    let feed_from: i64 = pool
        .get()
        .await?
        .query_one("SELECT coalesce(max(rev), 0)::bigint FROM change_log", &[])
        .await?
        .get(0);
    let window = Window::new(
        Duration::from_secs(cli.warmup),
        Duration::from_secs(cli.secs.max(1)),
    );
    let sizes = fleet::Fleet {
        tills: cli.tills,
        followers: cli.followers,
        sellers: cli.clients.max(1),
    };
    println!(
        "  fleet: {} tills ({} following each of {} branches), {} sellers",
        cli.tills, cli.followers, cli.branches, sizes.sellers
    );
    let out = fleet::run(ctx.clone(), window, sizes, feed_from, None).await?;
    let secs = window.measured_secs();
    let sales = out
        .tallies
        .get("main")
        .map(|t| t.summary(secs))
        .context("no sale was timed with the fleet")?;
    let n = |k: &str| out.counters.get(k).copied().unwrap_or(0);
    let report = FleetReport {
        against_alone: sales.per_sec / alone.per_sec.max(f64::MIN_POSITIVE),
        sales,
        lag: out.tallies.get("lag").map(|t| t.summary(secs)),
        followers: n("followers"),
        parked: n("parked"),
        missed: n("missed"),
        repeated: n("repeated"),
        failures: out.failures.clone(),
    };
    Ok((report, (out.total_ok, out.total_unanswered)))
}

/// The group-commit figures and branch actors of one process, from its
/// `/metrics`.
async fn process_metrics(http: &reqwest::Client, url: &str) -> ProcessMetrics {
    let text = match http.get(format!("{url}/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let mut m = ProcessMetrics {
        url: url.to_owned(),
        ..Default::default()
    };
    let (mut batch_sum, mut wait_sum, mut wait_count) = (0.0, 0.0, 0.0);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let name = key.split('{').next().unwrap_or(key);
        match name {
            "http_requests_total"
                if key.contains("route=\"/api/v1/sales\"")
                    && key.contains("method=\"POST\"")
                    && key.contains("status=\"201\"") =>
            {
                m.sales_made += value
            }
            "sale_batch_size_sum" => batch_sum += value,
            "sale_batch_size_count" => m.group_commits += value,
            "sale_batch_fallbacks_total" => m.batch_fallbacks += value,
            "actor_mailbox_capacity" if key.contains("kind=\"branch\"") => m.branch_actors += 1,
            "actor_mailbox_wait_seconds_sum" if key.contains("kind=\"branch\"") => {
                wait_sum += value
            }
            "actor_mailbox_wait_seconds_count" if key.contains("kind=\"branch\"") => {
                wait_count += value
            }
            _ => {}
        }
    }
    if m.group_commits > 0.0 {
        m.mean_batch = batch_sum / m.group_commits;
    }
    if wait_count > 0.0 {
        m.mean_mailbox_wait_ms = wait_sum * 1000.0 / wait_count;
    }
    m
}

fn print_run(r: &RunReport) {
    let s = &r.sales;
    println!(
        "  sales: {:.0}/s, p50 {:.1} ms, p99 {:.1} ms, errors {}; acknowledged {} (unanswered {}), in the database {}; invariant violations {}",
        s.per_sec,
        s.p50_ms,
        s.p99_ms,
        s.errors(),
        r.acknowledged,
        r.unanswered,
        r.in_database,
        r.invariant_violations.len()
    );
    for e in &s.error_samples {
        println!("    error: {e}");
    }
    if let Some(f) = &r.fleet {
        let lag = f.lag.as_ref().map_or("no sale followed".to_owned(), |l| {
            format!("lag p50 {:.1} ms, p99 {:.1} ms", l.p50_ms, l.p99_ms)
        });
        println!(
            "  with the fleet: {:.0} sales/s = {:.1} % of the sales alone; {lag}; {} followers, {} parked; {} missed, {} repeated",
            f.sales.per_sec,
            f.against_alone * 100.0,
            f.followers,
            f.parked,
            f.missed,
            f.repeated
        );
        for e in &f.failures {
            println!("    fleet failure: {e}");
        }
    }
    for p in &r.processes_metrics {
        println!(
            "  {}: {:.0} sales made, {} branch actors, {:.0} group commits of {:.1} sales on average, {} fell back to one sale at a time, mailbox wait {:.1} ms",
            p.url, p.sales_made, p.branch_actors, p.group_commits, p.mean_batch, p.batch_fallbacks, p.mean_mailbox_wait_ms
        );
    }
}

fn print_table(reports: &[RunReport]) {
    println!("\n| processes | balance | sales/s | p50 ms | p99 ms | errors | sales per process | sales per group commit | fallbacks | branch actors | invariants |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in reports {
        let commits: f64 = r.processes_metrics.iter().map(|p| p.group_commits).sum();
        let batched: f64 = r
            .processes_metrics
            .iter()
            .map(|p| p.group_commits * p.mean_batch)
            .sum();
        let fallbacks: f64 = r.processes_metrics.iter().map(|p| p.batch_fallbacks).sum();
        let actors: Vec<String> = r
            .processes_metrics
            .iter()
            .map(|p| p.branch_actors.to_string())
            .collect();
        let made: Vec<String> = r
            .processes_metrics
            .iter()
            .map(|p| format!("{:.0}", p.sales_made))
            .collect();
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {} | {} | {:.1} | {} | {} | {} |",
            r.processes,
            r.balance,
            r.sales.per_sec,
            r.sales.p50_ms,
            r.sales.p99_ms,
            r.sales.errors(),
            made.join(" + "),
            if commits > 0.0 {
                batched / commits
            } else {
                0.0
            },
            fallbacks,
            actors.join(" + "),
            if r.ok { "held" } else { "BROKEN" }
        );
    }
}
