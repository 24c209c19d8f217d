//! `bench`: the service's load generator.
//!
//! This file is the run driver and the report (the scenarios themselves
//! live in `scenarios.rs`). It is over 600 lines because a scenario's run,
//! its correctness checks (invariants, rows = acknowledged requests, the
//! invoice chains) and its targets read best as one sequence; the report's
//! types and printing (from `struct Check` down, and `print_*`) are the
//! part to move into a module of their own when it grows again.
//!
//! ```sh
//! cargo run --release -p bench -- all            # every scenario, with the pgbench baseline
//! cargo run --release -p bench -- payments --secs 30 --clients 64
//! cargo run -p bench -- smoke                    # a few seconds, correctness only (CI)
//! ```
//!
//! It starts its own durable PostgreSQL cluster under `target/bench/pg`
//! (TCP 127.0.0.1:54371), a fresh database per run, and the real
//! `pharmacy serve` binary per scenario (so the server's memory is its own
//! and each scenario may have its own settings). It prepares its data
//! through the API, runs each scenario for a warm-up and a timed window,
//! checks the invariants after every write scenario, and writes the figures
//! as JSON under `target/bench/`. See docs/performance.md.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: its figures and failures go to the terminal"
)]

mod api;
mod fiscal;
mod fleet;
mod load;
mod pg;
mod prep;
mod scenarios;
mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;

use domain::db::Pool;

use crate::api::Api;
use crate::load::{drive, ClientOut, Summary, Window};
use crate::pg::{Baseline, Pg};
use crate::prep::{Sizes, World};
use crate::scenarios::Ctx;
use crate::server::{Rss, Sampler, Server};

const SCENARIOS: &[&str] = &[
    "payments",
    "payments-own",
    "sales",
    "sales+pull",
    "fleet",
    "sales-hot",
    "push",
    "reads",
    "medicine",
    "snapshot",
    "overload",
    "fiscal-up",
    "fiscal-down",
    "fiscal-slow",
];

#[derive(Parser, Debug)]
#[command(
    name = "bench",
    about = "Load generator for the pharmacy service: throughput, latency, overload, invariants"
)]
struct Cli {
    /// Scenarios to run: payments, payments-own, sales, sales+pull, fleet,
    /// sales-hot, push, reads, medicine, snapshot, overload, fiscal-up,
    /// fiscal-down, fiscal-slow
    /// (`fiscal` for those three: sales with the tax authority's simulator
    /// up, down and slow); `all` for every one; `smoke` for a short
    /// correctness run of every one (small data, no baseline, no targets).
    #[arg(required = true)]
    scenarios: Vec<String>,
    /// Timed seconds per scenario (after the warm-up).
    #[arg(long, default_value_t = 20)]
    secs: u64,
    /// Warm-up seconds per scenario (not counted).
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Concurrent clients (payments, sales, sales-hot, reads; overload has 4×).
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// `sales+pull`: tills polling the change feed in a tight loop while
    /// the sales run.
    #[arg(long, default_value_t = 8)]
    pollers: usize,
    /// `sales+pull`: tills holding long polls (`wait` up to 30 s).
    #[arg(long, default_value_t = 200)]
    long_polls: usize,
    /// `fleet`: tills on the change feed in all (followers and parked).
    #[arg(long, default_value_t = 1_000)]
    tills: usize,
    /// `fleet`: tills following each selling branch's head.
    #[arg(long, default_value_t = 3)]
    followers: usize,
    /// `fleet`: quiet branches (nothing sold) where the other tills park.
    #[arg(long, default_value_t = 20)]
    quiet_branches: usize,
    /// Devices pushing (`push`), spread over `--device-branches` branches.
    #[arg(long, default_value_t = 32)]
    devices: usize,
    #[arg(long, default_value_t = 8)]
    device_branches: usize,
    /// Changes per pushed batch.
    #[arg(long, default_value_t = 50)]
    batch: usize,
    /// Concurrent `GET /sync/snapshot` clients.
    #[arg(long, default_value_t = 1)]
    snapshot_clients: usize,
    /// Medicines in the catalogue for `snapshot`.
    #[arg(long, default_value_t = 20_000)]
    catalogue: usize,
    /// Branches (payments and sales spread over them).
    #[arg(long, default_value_t = 20)]
    branches: usize,
    /// Credit customers (payments and reads spread over them).
    #[arg(long, default_value_t = 1_000)]
    customers: usize,
    /// Branch mailbox capacities for `overload`: one run at each.
    #[arg(long, value_delimiter = ',', default_value = "8")]
    mailboxes: Vec<usize>,
    /// `overload` clients honour Retry-After (wait a random part of it)
    /// instead of retrying at once.
    #[arg(long)]
    backoff: bool,
    /// Skip the pgbench baseline (no ratios).
    #[arg(long)]
    no_baseline: bool,
    /// pgbench scale factor of the baseline database.
    #[arg(long, default_value_t = 10)]
    pgbench_scale: u32,
    /// A PostgreSQL setting for this run (`ALTER SYSTEM`, reloaded), e.g.
    /// `--pg commit_delay=10`; repeatable. Settings not given are reset.
    #[arg(long = "pg", value_parser = key_value)]
    pg_settings: Vec<(String, String)>,
    /// An environment variable for the server, e.g.
    /// `--env PHARMACY__DATABASE__POOL_SIZE=16`; repeatable.
    #[arg(long = "env", value_parser = key_value)]
    server_env: Vec<(String, String)>,
    /// Where figures, server logs and the cluster go.
    #[arg(long)]
    out: Option<PathBuf>,
    /// TCP port of the benchmark's PostgreSQL cluster.
    #[arg(long, default_value_t = 54371)]
    pg_port: u16,
    /// Use this service binary instead of building `pharmacy` (A/B runs).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Load pg_stat_statements (restarts the cluster once) and store each
    /// scenario's top statements by database time with its figures.
    #[arg(long)]
    stat_statements: bool,
    /// A label stored with the figures (e.g. "before prepare_cached").
    #[arg(long, default_value = "")]
    label: String,
}

fn key_value(s: &str) -> std::result::Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s}"))
}

/// A pass/fail line: correctness checks fail the run, targets are reported.
#[derive(Debug, Clone, Serialize)]
struct Check {
    name: String,
    ok: bool,
    detail: String,
}

fn check(name: &str, ok: bool, detail: String) -> Check {
    Check {
        name: name.to_owned(),
        ok,
        detail,
    }
}

#[derive(Debug, Clone, Serialize)]
struct Ratio {
    baseline: String,
    baseline_tps: f64,
    ratio: f64,
}

#[derive(Debug, Clone, Serialize)]
struct Report {
    scenario: String,
    label: String,
    mailbox: Option<usize>,
    /// `overload` only: refused clients honoured Retry-After.
    backoff: bool,
    clients: usize,
    warmup_secs: u64,
    secs: u64,
    /// The scenario's main request kind (a push batch for `push`, accepted
    /// and refused together for `overload`).
    main: Summary,
    /// Every request kind separately (`replay`, `accepted`, `refused`).
    kinds: BTreeMap<String, Summary>,
    changes_per_sec: Option<f64>,
    ratio: Option<Ratio>,
    rss: Rss,
    /// `None` for read-only scenarios.
    invariant_violations: Option<Vec<String>>,
    checks: Vec<Check>,
    targets: Vec<Check>,
    counters: BTreeMap<String, u64>,
    server_env: Vec<(String, String)>,
    /// The service's own histograms from `/metrics` at the end of the run
    /// (warm-up included): count and mean (ms for timings) per actor
    /// command, mailbox wait, push batch, sales per group commit.
    service_metrics: BTreeMap<String, MetricMean>,
    /// With `--stat-statements`: the timed window's top statements.
    statements: Option<Vec<pg::Statement>>,
}

#[derive(Debug, Clone, Serialize, Default)]
struct MetricMean {
    count: f64,
    /// Milliseconds for `*_seconds` histograms.
    mean: f64,
}

/// `*_seconds_sum` / `*_seconds_count` pairs of the service's histograms.
async fn scrape_metrics(http: &reqwest::Client, root: &str) -> BTreeMap<String, MetricMean> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    let Ok(res) = http.get(format!("{root}/metrics")).send().await else {
        return BTreeMap::new();
    };
    let text = res.text().await.unwrap_or_default();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = key.split_once('{').unwrap_or((key, ""));
        let labels = labels.trim_end_matches('}');
        let (base, is_sum) = if let Some(b) = name.strip_suffix("_sum") {
            (b, true)
        } else if let Some(b) = name.strip_suffix("_count") {
            (b, false)
        } else {
            continue;
        };
        if !(base.starts_with("actor_")
            || base.starts_with("sync_push")
            || base == "sale_batch_size")
        {
            continue;
        }
        // Mailbox series are per actor (`branch`, `device`); the report
        // sums them per kind.
        let labels: Vec<&str> = labels
            .split(',')
            .filter(|l| !l.starts_with("branch=") && !l.starts_with("device="))
            .collect();
        let labels = labels.join(",");
        let entry = out.entry(format!("{base}{{{labels}}}")).or_default();
        if is_sum {
            entry.0 += value;
        } else {
            entry.1 += value;
        }
    }
    out.into_iter()
        .filter(|(_, (_, n))| *n > 0.0)
        .map(|(k, (sum, n))| {
            let timing = k.contains("_seconds");
            (
                k,
                MetricMean {
                    count: n,
                    // Seconds histograms as ms; others (batch sizes) as they are.
                    mean: if timing { sum * 1000.0 / n } else { sum / n },
                },
            )
        })
        .collect()
}

impl Report {
    fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

#[derive(Debug, Serialize)]
struct RunFile<'a> {
    label: &'a str,
    started_unix: u64,
    git_revision: String,
    cpus: usize,
    load_average: String,
    postgres_settings: Vec<String>,
    sizes: &'a Sizes,
    baseline: &'a [Baseline],
    scenarios: &'a [Report],
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("FAILED: a correctness check failed (see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Runs the chosen scenarios; `Ok(false)` when a correctness check failed.
async fn run(mut cli: Cli) -> Result<bool> {
    let smoke = cli.scenarios.iter().any(|s| s == "smoke");
    let mut chosen: Vec<String> = Vec::new();
    for s in &cli.scenarios {
        match s.as_str() {
            "all" | "smoke" => chosen.extend(SCENARIOS.iter().map(|s| s.to_string())),
            "fiscal" => chosen.extend(fiscal::SCENARIOS.iter().map(|s| s.to_string())),
            s if SCENARIOS.contains(&s) => chosen.push(s.to_owned()),
            other => bail!("unknown scenario {other}; one of {SCENARIOS:?}, fiscal, all, smoke"),
        }
    }
    chosen.dedup();
    if smoke {
        cli.secs = cli.secs.min(2);
        cli.warmup = cli.warmup.min(1);
        cli.clients = cli.clients.min(8);
        cli.devices = cli.devices.min(4);
        cli.device_branches = cli.device_branches.min(2);
        cli.batch = cli.batch.min(10);
        cli.catalogue = cli.catalogue.min(300);
        cli.branches = cli.branches.min(4);
        cli.customers = cli.customers.min(40);
        cli.mailboxes = vec![2];
        cli.pollers = cli.pollers.min(2);
        cli.long_polls = cli.long_polls.min(8);
        cli.tills = cli.tills.min(24);
        cli.followers = cli.followers.min(2);
        cli.quiet_branches = cli.quiet_branches.min(2);
        cli.no_baseline = true;
    }
    let sizes = Sizes {
        branches: cli.branches.max(1),
        customers: cli.customers.max(1),
        stocked: 13,
        devices: cli.devices.max(1),
        device_branches: cli.device_branches.max(1),
        units: 1_000_000,
        catalogue: if chosen.iter().any(|s| s == "snapshot") {
            cli.catalogue
        } else {
            0
        },
        quiet: if chosen.iter().any(|s| s == "fleet") {
            cli.quiet_branches
        } else {
            0
        },
    };
    let root = workspace_root();
    let out = cli.out.clone().unwrap_or_else(|| {
        // A smoke run keeps its figures apart from the real ones.
        root.join(if smoke {
            "target/bench/smoke"
        } else {
            "target/bench"
        })
    });
    std::fs::create_dir_all(&out)?;
    let started_unix = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();

    let bin = match &cli.server_bin {
        Some(b) => b.clone(),
        None => {
            say("building the service");
            server::build_binary()?
        }
    };
    // One cluster whatever `--out` says (its port is fixed).
    let pg_dir = root.join("target/bench/pg");
    say(&format!(
        "starting PostgreSQL (cluster under {}, port {})",
        pg_dir.display(),
        cli.pg_port
    ));
    let mut pg = pg::start(pg_dir, cli.pg_port).await?;
    let outcome = measure(
        &cli,
        &mut pg,
        &bin,
        &root,
        &out,
        &chosen,
        &sizes,
        smoke,
        started_unix,
    )
    .await;
    // Stopped after every run, so the port is free for the next run (or
    // another checkout's).
    if let Err(e) = pg.stop().await {
        eprintln!("warning: could not stop the benchmark's PostgreSQL: {e:#}");
    }
    outcome
}

/// Everything that needs the cluster: baseline, data, scenarios, figures.
#[allow(clippy::too_many_arguments)]
async fn measure(
    cli: &Cli,
    pg: &mut Pg,
    bin: &Path,
    root: &Path,
    out: &Path,
    chosen: &[String],
    sizes: &Sizes,
    smoke: bool,
    started_unix: u64,
) -> Result<bool> {
    let settings = pg
        .apply_settings(&cli.pg_settings, cli.stat_statements)
        .await?;
    say(&format!("postgres: {}", settings.join(", ")));

    let mut baseline = Vec::new();
    if !cli.no_baseline {
        say(&format!(
            "baseline: pgbench -i -s {}, then -N and -S with {} clients for {} s",
            cli.pgbench_scale, cli.clients, cli.secs
        ));
        let db = pg.pgbench_init(cli.pgbench_scale).await?;
        for mode in ["-N", "-S"] {
            let b = pg.pgbench_run(&db, mode, cli.clients, cli.secs).await?;
            say(&format!(
                "  pgbench {mode}: {:.0} tps, latency average {:.2} ms",
                b.tps, b.latency_avg_ms
            ));
            baseline.push(b);
        }
    }

    let db = format!("bench_run_{started_unix}");
    pg.fresh_database(&db).await?;
    let url = pg.url(&db);
    // The bench's own checks scan the whole ledger a run wrote (tens of
    // thousands of sales on a loaded host): the service's statement limit
    // is for requests, not for them.
    let mut own = pharmacy::config::Config::defaults().database;
    own.statement_timeout_ms = 300_000;
    let pool = pharmacy::db::pool(&url, &own)?;
    pharmacy::db::migrate::run(&pool).await?;
    pharmacy::seed::create_admin(&pool, prep::ADMIN_EMAIL, prep::PASSWORD, "Bench Admin").await?;
    let stats_db = if cli.stat_statements {
        let c = pg.client(&db).await?;
        c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .await?;
        Some(c)
    } else {
        None
    };

    let prep_started = Instant::now();
    say(&format!(
        "preparing data through the API: {} branches, {} customers, {} devices, catalogue {}",
        sizes.branches, sizes.customers, sizes.devices, sizes.catalogue
    ));
    let server = Server::start(bin, &url, &cli.server_env, out.join("server-prepare.log")).await?;
    let mut api = Api::new(server.base())?;
    let admin = api.login(prep::ADMIN_EMAIL, prep::PASSWORD).await?;
    let world = prep::prepare(&api, admin, sizes).await;
    server.stop().await?;
    let world = world?;
    say(&format!(
        "  prepared in {:.1} s",
        prep_started.elapsed().as_secs_f64()
    ));

    let mut reports = Vec::new();
    for name in chosen {
        let mailboxes: Vec<Option<usize>> = if name == "overload" {
            cli.mailboxes.iter().map(|m| Some(*m)).collect()
        } else {
            vec![None]
        };
        for mailbox in mailboxes {
            let r = scenario(
                cli,
                name,
                mailbox,
                bin,
                &url,
                &pool,
                stats_db.as_ref(),
                &mut api,
                &world,
                &baseline,
                out,
                smoke,
            )
            .await
            .with_context(|| format!("scenario {name}"))?;
            let mut r = r;
            if matches!(r.scenario.as_str(), "sales+pull" | "fleet") && !smoke {
                against_sales_alone(&mut r, &reports);
            }
            if fiscal::is_fiscal(&r.scenario) && r.scenario != "fiscal-up" && !smoke {
                fiscal::against_up(&mut r, &reports);
            }
            print_report(&r);
            let file = match mailbox {
                Some(m) => format!("{name}-mailbox-{m}.json"),
                None => format!("{name}.json"),
            };
            std::fs::write(out.join(file), serde_json::to_vec_pretty(&r)?)?;
            reports.push(r);
        }
    }

    let run = RunFile {
        label: &cli.label,
        started_unix,
        git_revision: git_revision(root),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average: std::fs::read_to_string("/proc/loadavg").unwrap_or_default(),
        postgres_settings: settings,
        sizes,
        baseline: &baseline,
        scenarios: &reports,
    };
    let json = serde_json::to_vec_pretty(&run)?;
    std::fs::write(out.join("latest.json"), &json)?;
    std::fs::write(out.join(format!("run-{started_unix}.json")), &json)?;
    print_table(&baseline, &reports);
    say(&format!(
        "figures written to {}",
        out.join("latest.json").display()
    ));
    pool.close();
    Ok(reports.iter().all(Report::passed))
}

fn say(line: &str) {
    println!("{line}");
}

fn git_revision(root: &Path) -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Counts that tell whether each answered request had exactly one effect.
/// Every branch's invoice hash chain verifies (`GET /sales/verify-chain`).
async fn chains_hold(pool: &Pool) -> Result<Check> {
    let client = pool.get().await?;
    let branches = client
        .query("SELECT DISTINCT branch_id FROM sales", &[])
        .await?;
    let mut broken = Vec::new();
    let mut checked = 0;
    for row in &branches {
        let report = domain::sales::verify_chain(&client, row.get(0))
            .await
            .map_err(|e| anyhow::anyhow!("chain check: {e}"))?;
        checked += report.checked;
        if report.status != "ok" {
            broken.push(format!("{:?}", report.first_broken));
        }
    }
    Ok(check(
        "every branch's invoice hash chain verifies",
        broken.is_empty(),
        if broken.is_empty() {
            format!("{checked} invoices over {} branches", branches.len())
        } else {
            format!("broken: {broken:?}")
        },
    ))
}

async fn effect_count(pool: &Pool, scenario: &str) -> Result<i64> {
    let sql = match scenario {
        "payments" | "payments-own" | "overload" => {
            "SELECT count(*) FROM customer_ledger WHERE transaction_type = 'PAYMENT'"
        }
        "push" => "SELECT count(*) FROM sales WHERE device_id IS NOT NULL",
        _ => "SELECT count(*) FROM sales",
    };
    let client = pool.get().await?;
    Ok(client.query_one(sql, &[]).await?.get(0))
}

#[allow(clippy::too_many_arguments)]
async fn scenario(
    cli: &Cli,
    name: &str,
    mailbox: Option<usize>,
    bin: &Path,
    url: &str,
    pool: &Pool,
    stats_db: Option<&tokio_postgres::Client>,
    api: &mut Api,
    world: &World,
    baseline: &[Baseline],
    out: &Path,
    smoke: bool,
) -> Result<Report> {
    let writes = matches!(
        name,
        "payments"
            | "payments-own"
            | "sales"
            | "sales+pull"
            | "fleet"
            | "sales-hot"
            | "push"
            | "overload"
    ) || fiscal::is_fiscal(name);
    let clients = match name {
        "push" => world.devices.len(),
        "snapshot" => cli.snapshot_clients.max(1),
        "overload" => cli.clients * 4,
        _ => cli.clients,
    };
    let mut env = cli.server_env.clone();
    if let Some(m) = mailbox {
        env.push(("PHARMACY__ACTORS__BRANCH_MAILBOX".to_owned(), m.to_string()));
    }
    let log = match mailbox {
        Some(m) => out.join(format!("server-{name}-mailbox-{m}.log")),
        None => out.join(format!("server-{name}.log")),
    };
    // The fiscal scenarios' tax authority: a simulator up, slow, or none.
    let authority = if fiscal::is_fiscal(name) {
        let a = fiscal::start(bin, name, out.join(format!("sim-{name}.log"))).await?;
        env.extend(a.env());
        Some(a)
    } else {
        // Documents are still written with what they fiscalise, but stay
        // queued: an in-process simulator would take the CPU the scenario
        // measures (the `fiscal` scenarios measure the worker's cost).
        if !env.iter().any(|(k, _)| k == "PHARMACY__FISCAL__MODE") {
            env.push(("PHARMACY__FISCAL__MODE".to_owned(), "off".to_owned()));
        }
        None
    };
    say(&format!(
        "\n== {name}{}: {clients} clients, {} s warm-up, {} s timed",
        mailbox.map_or(String::new(), |m| format!(" (branch mailbox {m})")),
        cli.warmup,
        cli.secs
    ));
    let server = Server::start(bin, url, &env, log).await?;
    api.rebase(server.base());
    let ctx = Arc::new(Ctx {
        http: api.http.clone(),
        base: server.base(),
        world: world.clone(),
    });
    let before = if writes {
        Some(effect_count(pool, name).await?)
    } else {
        None
    };
    let sampler = Sampler::start(server.pid);
    let window = Window::new(
        Duration::from_secs(cli.warmup),
        Duration::from_secs(cli.secs.max(1)),
    );
    // Statement figures cover the timed window only.
    let reset = async {
        if let Some(db) = stats_db {
            tokio::time::sleep_until(window.measure_from.into()).await;
            pg::reset_statements(db).await?;
        }
        anyhow::Ok(())
    };
    let batch = cli.batch.max(1);
    // The feed's tills start from the log's end (not its whole history).
    let feed_from = if matches!(name, "sales+pull" | "fleet") {
        let c = pool.get().await?;
        c.query_one("SELECT coalesce(max(rev), 0)::bigint FROM change_log", &[])
            .await?
            .get::<_, i64>(0)
    } else {
        0
    };
    let load = async {
        match name {
            "payments" => {
                drive(clients, window, |i, w| {
                    scenarios::payments(i, ctx.clone(), w, false, false, false)
                })
                .await
            }
            "payments-own" => {
                drive(clients, window, |i, w| {
                    scenarios::payments(i, ctx.clone(), w, false, false, true)
                })
                .await
            }
            "overload" => {
                drive(clients, window, |i, w| {
                    scenarios::payments(i, ctx.clone(), w, true, cli.backoff, false)
                })
                .await
            }
            "sales" => {
                drive(clients, window, |i, w| {
                    scenarios::sales(i, ctx.clone(), w, false)
                })
                .await
            }
            "sales-hot" => {
                drive(clients, window, |i, w| {
                    scenarios::sales(i, ctx.clone(), w, true)
                })
                .await
            }
            // The `sales` load; only the authority behind the server differs.
            "fiscal-up" | "fiscal-down" | "fiscal-slow" => {
                drive(clients, window, |i, w| {
                    scenarios::sales(i, ctx.clone(), w, false)
                })
                .await
            }
            "sales+pull" => {
                let sell = drive(clients, window, |i, w| {
                    scenarios::sales(i, ctx.clone(), w, false)
                });
                let poll = drive(cli.pollers, window, |i, w| {
                    scenarios::pull(i, ctx.clone(), w, feed_from, false)
                });
                let park = drive(cli.long_polls, window, |i, w| {
                    scenarios::pull(i, ctx.clone(), w, feed_from, true)
                });
                let (sold, polled, parked) = tokio::join!(sell, poll, park);
                let mut all = sold?;
                all.merge(polled?);
                all.merge(parked?);
                Ok(all)
            }
            "push" => {
                drive(clients, window, |i, w| {
                    scenarios::push(i, ctx.clone(), w, batch)
                })
                .await
            }
            "reads" => {
                drive(clients, window, |i, w| {
                    scenarios::reads(i, ctx.clone(), w, false)
                })
                .await
            }
            "medicine" => {
                drive(clients, window, |i, w| {
                    scenarios::reads(i, ctx.clone(), w, true)
                })
                .await
            }
            "fleet" => {
                let sizes = fleet::Fleet {
                    tills: cli.tills,
                    followers: cli.followers,
                    sellers: clients,
                };
                fleet::run(ctx.clone(), window, sizes, feed_from, Some(server.pid)).await
            }
            "snapshot" => {
                drive(clients, window, |i, w| {
                    scenarios::snapshot(i, ctx.clone(), w)
                })
                .await
            }
            other => bail!("unknown scenario {other}"),
        }
    };
    let (outcome, reset): (Result<ClientOut>, Result<()>) = tokio::join!(load, reset);
    reset?;
    let rss = sampler.finish(window.warmup_secs()).await;
    let actor_metrics = scrape_metrics(&api.http, &server.root).await;
    let statements = match stats_db {
        Some(db) => Some(pg::top_statements(db, 15).await?),
        None => None,
    };
    let log_tail = server.log_tail();
    server.stop().await?;
    let mut counters: BTreeMap<String, u64> = outcome
        .as_ref()
        .map(|o| {
            o.counters
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect()
        })
        .unwrap_or_default();
    if let Some(a) = authority {
        a.stop().await;
        counters.extend(fiscal::invoices(pool).await?);
    }
    let outcome = outcome?;
    let secs = window.measured_secs();

    let kinds: BTreeMap<String, Summary> = outcome
        .tallies
        .iter()
        .map(|(k, t)| (k.to_string(), t.summary(secs)))
        .collect();
    let main_kind = if name == "push" { "batch" } else { "main" };
    let main = kinds
        .get(main_kind)
        .cloned()
        .with_context(|| format!("no request was timed in {name}; server log:\n{log_tail}"))?;

    let mut checks = Vec::new();
    let mut targets = Vec::new();
    // Answers other than success (and, under overload, 503) are errors.
    let unexpected: u64 = main
        .statuses
        .iter()
        .filter(|(s, _)| {
            let s: u16 = s.parse().unwrap_or(0);
            let refused = name == "overload" && s == 503;
            !((200..300).contains(&s) || refused)
        })
        .map(|(_, n)| n)
        .sum();
    checks.push(check(
        "no unexpected errors",
        unexpected == 0 && outcome.failures.is_empty(),
        if outcome.failures.is_empty() {
            format!("{unexpected} unexpected answers {:?}", main.error_samples)
        } else {
            format!(
                "{unexpected} unexpected answers; failures: {:?}",
                outcome.failures
            )
        },
    ));
    if main.ok == 0 {
        checks.push(check(
            "some requests succeeded",
            false,
            "no request succeeded in the timed window".into(),
        ));
    }

    let mut invariant_violations = None;
    if writes {
        let client = pool.get().await?;
        let broken = domain::stock::invariant_violations(&client)
            .await
            .map_err(|e| anyhow::anyhow!("invariant query: {e}"))?;
        drop(client);
        checks.push(check(
            "invariants (stock = movements >= 0, gapless icv, counter = last icv, balance = ledger >= 0, one sale per pushed mutation)",
            broken.is_empty(),
            if broken.is_empty() {
                "none violated".into()
            } else {
                format!("{} violated: {:?}", broken.len(), &broken[..broken.len().min(10)])
            },
        ));
        invariant_violations = Some(broken);
        if matches!(name, "sales" | "sales-hot" | "push" | "fleet") || fiscal::is_fiscal(name) {
            checks.push(chains_hold(pool).await?);
        }
        let after = effect_count(pool, name).await?;
        let delta = (after - before.unwrap_or(0)) as u64;
        let expected = if name == "push" {
            outcome.total_units
        } else {
            outcome.total_ok
        };
        let what = match name {
            "push" => "sales of devices = accepted changes (replays added none)",
            "payments" | "payments-own" | "overload" => "payment ledger rows = accepted payments",
            _ => "sales = accepted sales",
        };
        // A request without an answer may or may not have taken effect.
        let fine = delta >= expected && delta <= expected + outcome.total_unanswered;
        checks.push(check(
            what,
            fine,
            format!(
                "{delta} written, {expected} acknowledged, {} unanswered",
                outcome.total_unanswered
            ),
        ));
    }
    if name == "push" {
        let mismatched = outcome
            .counters
            .get("replay_mismatch")
            .copied()
            .unwrap_or(0);
        let replays = outcome.counters.get("replays").copied().unwrap_or(0);
        checks.push(check(
            "replays answer identically",
            mismatched == 0 && replays > 0,
            format!("{replays} replays, {mismatched} answered differently"),
        ));
    }
    if name == "overload" {
        let missing = outcome
            .counters
            .get("refused_without_retry_after")
            .copied()
            .unwrap_or(0);
        checks.push(check(
            "every 503 carries Retry-After",
            missing == 0,
            format!("{missing} without it"),
        ));
    }

    let ratio_to = |mode: &str, per_sec: f64| {
        baseline.iter().find(|b| b.mode == mode).map(|b| Ratio {
            baseline: format!("pgbench {} ({} clients)", b.mode, b.clients),
            baseline_tps: b.tps,
            ratio: per_sec / b.tps,
        })
    };
    let ratio = match name {
        "reads" | "medicine" => ratio_to("-S", main.per_sec),
        "snapshot" => None,
        "push" => ratio_to("-N", main.units_per_sec),
        "overload" => ratio_to(
            "-N",
            kinds.get("accepted").map_or(0.0, |a| a.ok as f64 / secs),
        ),
        _ => ratio_to("-N", main.per_sec),
    };
    let r = ratio.as_ref().map_or(f64::NAN, |r| r.ratio);
    let pct = |x: f64| format!("{:.1} %", x * 100.0);
    match name {
        "payments" | "payments-own" => {
            // Issue 33's target.
            targets.push(check(">= 0.9 x pgbench -N", r >= 0.9, pct(r)));
            targets.push(check(
                "p99 < 50 ms",
                main.p99_ms < 50.0,
                format!("{:.1} ms", main.p99_ms),
            ));
            targets.push(check(
                "0 errors",
                main.errors() == 0,
                format!("{}", main.errors()),
            ));
        }
        "sales" => targets.push(check(">= 50 % of pgbench -N", r >= 0.5, pct(r))),
        "sales+pull" => {
            let empty = kinds.get("poll_empty");
            targets.push(check(
                "a poll with nothing new answers in < 5 ms (p99)",
                empty.is_some_and(|s| s.p99_ms < 5.0),
                empty.map_or("no empty poll".into(), |s| {
                    format!(
                        "p50 {:.1} ms, p99 {:.1} ms over {} polls",
                        s.p50_ms, s.p99_ms, s.requests
                    )
                }),
            ));
            targets.push(check(
                "RSS flat (±10 %) with the long polls parked",
                rss.spread_pct <= 10.0,
                format!(
                    "spread {:.1} %, drift {:.1} %",
                    rss.spread_pct, rss.drift_pct
                ),
            ));
        }
        "sales-hot" => targets.push(check(
            ">= 40 % of pgbench -N (gapless icv and the hash chain checked above)",
            r >= 0.4,
            format!("{} ({:.0} sales/s)", pct(r), main.per_sec),
        )),
        "push" => {
            // Issue 33: a branch's tills share commits, so a commit
            // carries more changes than a pgbench transaction.
            targets.push(check(
                ">= 1.5 x pgbench -N TPS in changes/s",
                r >= 1.5,
                format!("{:.2} x ({:.0} changes/s)", r, main.units_per_sec),
            ));
            targets.push(check(
                "batch p99 < 500 ms",
                main.p99_ms < 500.0,
                format!("{:.1} ms", main.p99_ms),
            ));
        }
        "medicine" => {
            // Issue 33: `GET /medicines/{id}` as a cashier.
            targets.push(check(">= 0.4 x pgbench -S", r >= 0.4, pct(r)));
            targets.push(check(
                "p99 < 20 ms",
                main.p99_ms < 20.0,
                format!("{:.1} ms", main.p99_ms),
            ));
        }
        "fleet" => fleet_targets(&mut targets, &mut checks, &kinds, &outcome.counters),
        "reads" => {
            targets.push(check(">= 50 % of pgbench -S", r >= 0.5, pct(r)));
            targets.push(check(
                "p99 < 20 ms",
                main.p99_ms < 20.0,
                format!("{:.1} ms", main.p99_ms),
            ));
        }
        "snapshot" => {
            let bytes = if main.ok > 0 {
                main.units_per_sec * secs / main.ok as f64
            } else {
                0.0
            };
            let grew = rss.peak_kib.saturating_sub(rss.before_kib) as f64 * 1024.0;
            targets.push(check(
                "p95 < 300 ms",
                main.p95_ms < 300.0,
                format!("{:.1} ms", main.p95_ms),
            ));
            targets.push(check(
                "server memory <= 4x the response",
                bytes > 0.0 && grew <= 4.0 * bytes * clients as f64,
                format!(
                    "response {:.1} MB, peak RSS grew {:.1} MB ({:.2}x) with {clients} client(s)",
                    bytes / 1e6,
                    grew / 1e6,
                    grew / (bytes * clients as f64).max(1.0)
                ),
            ));
        }
        "overload" => {
            let refused = kinds.get("refused");
            let accepted = kinds.get("accepted");
            targets.push(check(
                "503 answered within 50 ms (p99)",
                refused.is_none_or(|s| s.p99_ms < 50.0),
                refused.map_or("no request was refused".into(), |s| {
                    format!("p99 {:.1} ms, {} refused", s.p99_ms, s.requests)
                }),
            ));
            targets.push(check(
                "accepted p99 < 100 ms",
                accepted.is_some_and(|s| s.p99_ms < 100.0),
                accepted.map_or("none accepted".into(), |s| format!("{:.1} ms", s.p99_ms)),
            ));
            targets.push(check(
                "RSS flat (±10 %) over the run",
                rss.spread_pct <= 10.0,
                format!(
                    "spread {:.1} %, drift {:.1} %",
                    rss.spread_pct, rss.drift_pct
                ),
            ));
        }
        _ => {}
    }
    if smoke {
        targets.clear();
    }
    Ok(Report {
        scenario: name.to_owned(),
        label: cli.label.clone(),
        mailbox,
        backoff: name == "overload" && cli.backoff,
        clients,
        warmup_secs: cli.warmup,
        secs: cli.secs,
        changes_per_sec: (name == "push").then_some(main.units_per_sec),
        main,
        kinds,
        ratio,
        rss,
        invariant_violations,
        checks,
        targets,
        counters,
        server_env: env,
        service_metrics: actor_metrics,
        statements,
    })
}

/// `fleet`: the followers' lag and the cost of a parked poll (the ratio to
/// sales alone is added by [`against_sales_alone`]).
fn fleet_targets(
    targets: &mut Vec<Check>,
    checks: &mut Vec<Check>,
    kinds: &BTreeMap<String, Summary>,
    counters: &BTreeMap<&'static str, u64>,
) {
    let n = |k: &str| counters.get(k).copied().unwrap_or(0);
    let lag = kinds.get("lag");
    targets.push(check(
        "feed lag p99 < 250 ms",
        lag.is_some_and(|l| l.p99_ms < 250.0),
        lag.map_or("no sale was followed".into(), |l| {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms over {} (sale, follower) pairs",
                l.p50_ms, l.p99_ms, l.requests
            )
        }),
    ));
    checks.push(check(
        "every follower saw every acknowledged sale of its branch once",
        n("missed") == 0 && n("repeated") == 0 && lag.is_some(),
        format!(
            "{} followers, {} missed, {} repeated",
            n("followers"),
            n("missed"),
            n("repeated")
        ),
    ));
    checks.push(check(
        "server memory per parked poll (reported)",
        true,
        format!(
            "{} parked: {:.1} KiB each",
            n("parked"),
            n("rss_per_parked_poll_bytes") as f64 / 1024.0
        ),
    ));
}

/// `sales+pull` against the same run's `sales` (when it ran first).
fn against_sales_alone(r: &mut Report, earlier: &[Report]) {
    let Some(alone) = earlier.iter().find(|e| e.scenario == "sales") else {
        return;
    };
    let ratio = r.main.per_sec / alone.main.per_sec.max(f64::MIN_POSITIVE);
    r.targets.push(check(
        ">= 90 % of sales alone (same run)",
        ratio >= 0.9,
        format!(
            "{:.1} % ({:.0} against {:.0} sales/s)",
            ratio * 100.0,
            r.main.per_sec,
            alone.main.per_sec
        ),
    ));
}

fn print_report(r: &Report) {
    let m = &r.main;
    let mut line = format!(
        "{:.0} req/s  p50 {:.1} ms  p95 {:.1} ms  p99 {:.1} ms  max {:.1} ms  statuses {:?}",
        m.per_sec, m.p50_ms, m.p95_ms, m.p99_ms, m.max_ms, m.statuses
    );
    if let Some(c) = r.changes_per_sec {
        line.push_str(&format!("  {c:.0} changes/s"));
    }
    if let Some(ratio) = &r.ratio {
        line.push_str(&format!(
            "  = {:.1} % of {} {:.0} tps",
            ratio.ratio * 100.0,
            ratio.baseline,
            ratio.baseline_tps
        ));
    }
    say(&line);
    for (k, s) in &r.kinds {
        if k != "main" && k != "batch" {
            say(&format!(
                "  {k}: {} requests ({:.0}/s)  p50 {:.1} ms  p95 {:.1} ms  p99 {:.1} ms  max {:.1} ms  statuses {:?}",
                s.requests, s.per_sec, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms, s.statuses
            ));
        }
    }
    say(&format!(
        "  server RSS: {:.1} MB before, peak {:.1} MB; timed window {:.1}..{:.1} MB (spread {:.1} %)",
        r.rss.before_kib as f64 / 1024.0,
        r.rss.peak_kib as f64 / 1024.0,
        r.rss.window_min_kib as f64 / 1024.0,
        r.rss.window_max_kib as f64 / 1024.0,
        r.rss.spread_pct
    ));
    for c in &r.checks {
        say(&format!(
            "  check  {} {}: {}",
            if c.ok { "ok  " } else { "FAIL" },
            c.name,
            c.detail
        ));
    }
    for t in &r.targets {
        say(&format!(
            "  target {} {}: {}",
            if t.ok { "met " } else { "MISS" },
            t.name,
            t.detail
        ));
    }
}

fn print_table(baseline: &[Baseline], reports: &[Report]) {
    say("\n== summary");
    for b in baseline {
        say(&format!(
            "pgbench {} ({} clients): {:.0} tps, latency average {:.2} ms",
            b.mode, b.clients, b.tps, b.latency_avg_ms
        ));
    }
    say(&format!(
        "{:<22} {:>7} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8}  correct",
        "scenario",
        "clients",
        "req/s",
        "units/s",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms",
        "ratio",
        "peak MB"
    ));
    for r in reports {
        let name = match r.mailbox {
            Some(m) => format!("{} (mailbox {m})", r.scenario),
            None => r.scenario.clone(),
        };
        let m = &r.main;
        say(&format!(
            "{:<22} {:>7} {:>9.0} {:>9.0} {:>8.1} {:>8.1} {:>8.1} {:>8.1} {:>9} {:>8.1}  {}",
            name,
            r.clients,
            m.per_sec,
            m.units_per_sec,
            m.p50_ms,
            m.p95_ms,
            m.p99_ms,
            m.max_ms,
            r.ratio
                .as_ref()
                .map_or("-".into(), |x| format!("{:.1} %", x.ratio * 100.0)),
            r.rss.peak_kib as f64 / 1024.0,
            if r.passed() { "yes" } else { "NO" }
        ));
    }
    print_targets(reports);
}

/// Every target of the run, one line each (issue 33's four rows among
/// them when `push`, `medicine`, `payments` and `fleet` ran).
fn print_targets(reports: &[Report]) {
    let lines: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.targets.iter().map(move |t| {
                format!(
                    "{:<14} {:<5} {} ({})",
                    r.scenario,
                    if t.ok { "met" } else { "MISS" },
                    t.name,
                    t.detail
                )
            })
        })
        .collect();
    if !lines.is_empty() {
        say("\n== targets");
        for l in lines {
            say(&l);
        }
    }
}
