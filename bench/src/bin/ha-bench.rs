//! `ha-bench`: fault drills of the high-availability topology under load.
//!
//! ```sh
//! cargo run --release -p bench --bin ha-bench                       # the failover drill
//! cargo run --release -p bench --bin ha-bench -- failover,replica,etcd
//! cargo run --release -p bench --bin ha-bench -- sync-cost    # what synchronous replication costs
//! ```
//!
//! It brings up `deploy/ha-cluster.sh` (three etcd members, three
//! Patroni-managed PostgreSQL nodes with synchronous replication, HAProxy
//! routing by Patroni's REST API, two service processes behind the
//! branch-affine HAProxy) in `target/ha-bench`, prepares branches, cashiers,
//! stock and credit customers through HAProxy, and runs each drill on it:
//! 32 clients sell (REST sales) and take customer payments over 8 branches,
//! every request with its own mutation id, each client recording every
//! acknowledged answer; after a few seconds the fault (`failover`: kill -9
//! of the leader's postmaster; `replica`: kill -9 of the synchronous
//! standby's; `etcd`: kill -9 of one etcd member, started again after;
//! `freeze`: SIGSTOP of the leader's Patroni, so HAProxy loses its view of
//! the node while its PostgreSQL runs on, SIGCONT once another node leads;
//! `node`: the whole leader node lost, kill -9 of its Patroni and its
//! postmaster, the node started again once another node leads; `stop`: the
//! leader's node stopped in order, started again once another node leads;
//! `replicas`: both replicas' nodes lost, started again 10 s later);
//! a request not answered with success is sent again with the same mutation
//! id and body until it is, for up to 60 s. Then, through the API and in the
//! database the write port leads to (the new leader): every acknowledged
//! sale and payment is there once with its content, nothing is there twice,
//! every branch's icv is gapless and its hash chain verifies, stock = Σ
//! movements ≥ 0 and balances = Σ ledger ≥ 0; a till's feed cursor taken
//! before the fault gets 409 `resnapshot` after a promotion (a new epoch)
//! and still reads otherwise. Printed: time without writes
//! (first refused write to the first write accepted after it), requests
//! answered 503, acknowledged-but-lost (must be 0), duplicates (must be 0),
//! and how long the cluster took to be whole again (the old leader back as
//! a replica). `sync-cost` runs the same clients without a fault under
//! three replication settings (synchronous standby with synchronous_commit
//! on, with remote_write, and asynchronous standbys as in the scale-out
//! round) and prints the throughput ratios. Figures go to
//! `target/ha-bench/latest.json`.

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
#[path = "../ha_cursor.rs"]
mod ha_cursor;
#[allow(dead_code)]
#[path = "../ha_drill.rs"]
mod ha_drill;
#[allow(dead_code)]
#[path = "../prep.rs"]
mod prep;
#[allow(dead_code)]
#[path = "../server.rs"]
mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::api::Api;
use crate::ha_drill::{Drill, DrillReport, Load, Throughput};
use crate::prep::Sizes;

#[derive(Parser, Debug)]
#[command(
    name = "ha-bench",
    about = "Fault drills of the HA topology under load: lost and doubled acknowledged writes, time without writes"
)]
struct Cli {
    /// Drills, comma-separated: failover, replica, etcd, freeze, node, stop,
    /// replicas; `sync-cost`
    /// measures throughput with synchronous_commit on, remote_write, and
    /// asynchronous standbys instead.
    #[arg(value_delimiter = ',', default_value = "failover")]
    drills: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Branches the clients work at (client `i` at branch `i % branches`).
    #[arg(long, default_value_t = 8)]
    branches: usize,
    /// Seconds of load before the fault.
    #[arg(long, default_value_t = 5)]
    before: u64,
    /// Seconds of new requests after the fault (retries go on after).
    #[arg(long, default_value_t = 20)]
    after: u64,
    /// How long a client keeps sending one unanswered request again.
    #[arg(long, default_value_t = 60)]
    retry_secs: u64,
    /// Writes must be accepted again within this many seconds of the fault.
    #[arg(long, default_value_t = 30)]
    writes_back_within: u64,
    /// HAProxy's port; the cluster takes the ports around it (see
    /// deploy/ha-cluster.sh).
    #[arg(long, default_value_t = 18680)]
    port: u16,
    /// The service binary (default: built with this tool's profile).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Seconds of load per replication setting (`sync-cost`).
    #[arg(long, default_value_t = 20)]
    sync_secs: u64,
    /// Leave the cluster running afterwards (its directory is printed).
    #[arg(long)]
    keep: bool,
}

fn main() -> ExitCode {
    cli::exit_with(run(Cli::parse()), "a drill's check failed (see above)")
}

async fn run(cli: Cli) -> Result<bool> {
    let drills: Vec<Drill> = cli
        .drills
        .iter()
        .filter(|d| d.as_str() != "sync-cost")
        .map(|d| Drill::parse(d))
        .collect::<Result<_>>()?;
    let sync_cost = cli.drills.iter().any(|d| d == "sync-cost");
    let root = cli::root();
    let out = root.join("target/ha-bench");
    std::fs::create_dir_all(&out)?;
    let dir = out.join("cluster");
    let bin = match &cli.server_bin {
        Some(b) => b.clone(),
        None => {
            println!("building the service");
            server::build_binary()?
        }
    };
    let cluster = Cluster {
        root: root.clone(),
        dir: dir.clone(),
    };
    let _ = cluster.down();
    let started = Instant::now();
    let env = cluster.up(&bin, cli.port)?;
    println!(
        "the cluster is up in {:.0} s (leader {})",
        started.elapsed().as_secs_f64(),
        cluster.leader().unwrap_or_default()
    );
    let result = drive(&cli, &cluster, &env, &drills, sync_cost).await;
    // The logs outlive the cluster's directory, for a look after a failure.
    let logs = out.join("last-logs");
    let _ = std::fs::remove_dir_all(&logs);
    let _ = Command::new("cp")
        .arg("-r")
        .arg(dir.join("log"))
        .arg(&logs)
        .status();
    if cli.keep {
        println!(
            "the cluster keeps running in {} (deploy/ha-cluster.sh down --dir {})",
            dir.display(),
            dir.display()
        );
    } else {
        cluster.down()?;
    }
    let (reports, sync) = result?;
    if !reports.is_empty() {
        ha_drill::print_table(&reports);
    }
    ha_drill::print_throughput(&sync);
    std::fs::write(
        out.join("latest.json"),
        serde_json::to_vec_pretty(&serde_json::json!({"drills": reports, "replication": sync}))?,
    )?;
    println!("figures written to {}", out.join("latest.json").display());
    Ok(reports.iter().all(|r| r.ok))
}

async fn drive(
    cli: &Cli,
    cluster: &Cluster,
    env: &BTreeMap<String, String>,
    drills: &[Drill],
    sync_cost: bool,
) -> Result<(Vec<DrillReport>, Vec<Throughput>)> {
    let base = get(env, "BASE_URL")?.to_owned();
    let api = Api::new(base.clone())?;
    let admin = api
        .login(get(env, "ADMIN_EMAIL")?, get(env, "ADMIN_PASSWORD")?)
        .await?;
    let sizes = Sizes {
        branches: cli.branches.max(1),
        customers: 16,
        stocked: 7,
        // One till per branch, pushing batches beside the REST clients.
        devices: cli.branches.max(1),
        device_branches: cli.branches.max(1),
        units: 1_000_000,
        catalogue: 0,
        quiet: 0,
    };
    let world = prep::prepare(&api, admin, &sizes)
        .await
        .context("prepare")?;
    let pool = pharmacy::db::pool(
        get(env, "DATABASE_URL")?,
        &pharmacy::config::Config::defaults().database,
    )?;
    let mut reports = Vec::new();
    for drill in drills {
        println!(
            "\n== {}: {} clients over {} branches, {} s of load, the fault, {} s more; retries up to {} s",
            drill.name(),
            cli.clients,
            cli.branches,
            cli.before,
            cli.after,
            cli.retry_secs
        );
        let load = Load {
            clients: cli.clients.max(1),
            before: Duration::from_secs(cli.before),
            after: Duration::from_secs(cli.after),
            retry_for: Duration::from_secs(cli.retry_secs),
            writes_back_within: Duration::from_secs(cli.writes_back_within),
        };
        let report = ha_drill::run(*drill, &load, &api, &world, &pool, &|cmd| {
            cluster.command(cmd)
        })
        .await?;
        ha_drill::print_report(&report);
        reports.push(report);
        // The next drill starts on a whole cluster.
        cluster
            .command(&["wait-healthy", "120"])
            .context("the cluster did not become whole again")?;
    }
    let mut sync = Vec::new();
    if sync_cost {
        let patroni = get(env, "PATRONI_URLS")?
            .split_whitespace()
            .next()
            .context("no Patroni URL")?
            .to_owned();
        // (name, synchronous_mode, synchronous_commit); the last one is the
        // cluster's own setting again.
        let settings = [
            ("synchronous standby, synchronous_commit on", true, "on"),
            (
                "synchronous standby, synchronous_commit remote_write",
                true,
                "remote_write",
            ),
            ("asynchronous standbys (the scale-out round)", false, "on"),
        ];
        for (name, mode, commit) in settings {
            replication(&api.http, &patroni, &pool, mode, commit).await?;
            println!(
                "\n== throughput: {name}, {} clients, {} s",
                cli.clients, cli.sync_secs
            );
            let t = ha_drill::throughput(
                name,
                cli.clients.max(1),
                Duration::from_secs(cli.sync_secs),
                &api,
                &world,
            )
            .await?;
            println!(
                "  {:.1} sales/s, {:.1} payments/s, {} refused",
                t.sales_per_sec, t.payments_per_sec, t.refused
            );
            sync.push(t);
        }
        replication(&api.http, &patroni, &pool, true, "on").await?;
    }
    pool.close();
    Ok((reports, sync))
}

/// Sets Patroni's synchronous mode and PostgreSQL's synchronous_commit for
/// the whole cluster (Patroni's dynamic configuration) and waits until the
/// leader runs with them.
async fn replication(
    http: &reqwest::Client,
    patroni: &str,
    pool: &domain::db::Pool,
    mode: bool,
    commit: &str,
) -> Result<()> {
    let res = http
        .patch(format!("{patroni}/config"))
        .json(&serde_json::json!({
            "synchronous_mode": mode,
            "postgresql": {"parameters": {"synchronous_commit": commit}}
        }))
        .send()
        .await?;
    if !res.status().is_success() {
        bail!("PATCH {patroni}/config answered {}", res.status());
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = async {
            let c = pool.get().await?;
            let row = c
                .query_one(
                    "SELECT current_setting('synchronous_commit'), \
                            current_setting('synchronous_standby_names')",
                    &[],
                )
                .await?;
            anyhow::Ok((row.get::<_, String>(0), row.get::<_, String>(1)))
        }
        .await;
        if let Ok((c, names)) = now {
            if c == commit && names.is_empty() != mode {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("the cluster did not take synchronous_mode {mode}, synchronous_commit {commit} within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn get<'a>(env: &'a BTreeMap<String, String>, key: &str) -> Result<&'a str> {
    env.get(key)
        .map(String::as_str)
        .with_context(|| format!("ha-cluster.sh printed no {key}"))
}

/// `deploy/ha-cluster.sh` on one directory.
struct Cluster {
    root: PathBuf,
    dir: PathBuf,
}

impl Cluster {
    fn script(&self) -> Command {
        let mut cmd = Command::new(self.root.join("deploy/ha-cluster.sh"));
        cmd.current_dir(&self.root);
        cmd
    }

    /// `up`, answering its `KEY=VALUE` lines.
    fn up(&self, bin: &Path, port: u16) -> Result<BTreeMap<String, String>> {
        let output = self
            .script()
            .arg("up")
            .arg("--dir")
            .arg(&self.dir)
            .args(["--port", &port.to_string()])
            .env("PHARMACY_BIN", bin)
            .env("PHARMACY__LOG__LEVEL", "warn")
            .output()
            .context("run deploy/ha-cluster.sh up")?;
        if !output.status.success() {
            bail!(
                "deploy/ha-cluster.sh up failed:\n{}{}",
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

    /// Another command (`kill-primary`, `leader`, ...); answers its output.
    fn command(&self, args: &[&str]) -> Result<String> {
        let output = self
            .script()
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .with_context(|| format!("run deploy/ha-cluster.sh {}", args.join(" ")))?;
        if !output.status.success() {
            bail!(
                "deploy/ha-cluster.sh {} failed:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    fn leader(&self) -> Result<String> {
        self.command(&["leader"])
    }

    fn down(&self) -> Result<()> {
        if !self.dir.exists() {
            return Ok(());
        }
        let output = self
            .script()
            .arg("down")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--purge")
            .output()
            .context("run deploy/ha-cluster.sh down")?;
        if !output.status.success() {
            bail!(
                "deploy/ha-cluster.sh down failed:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}
