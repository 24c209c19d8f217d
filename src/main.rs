//! The one binary: `serve` (default), `migrate`, `create-admin`, `seed-demo`,
//! `fiscal-sim`.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the command line answers its operator on the terminal; the service logs through tracing"
)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use pharmacy::config::Config;
use pharmacy::devdb::{self, ClusterSpec};
use pharmacy::{app, db, seed, telemetry};

#[derive(Parser)]
#[command(name = "pharmacy", version, about = "Pharmacy operations service")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service (the default). Without DATABASE_URL it runs its
    /// own PostgreSQL under var/, migrates, and seeds the demo on first start.
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Create an admin user (and the head-office branch if there is none).
    CreateAdmin {
        #[arg(long)]
        email: String,
        #[arg(long)]
        password: String,
        #[arg(long, default_value = "Administrator")]
        name: String,
    },
    /// Load the demo chain: branches and one user of every role per branch.
    SeedDemo,
    /// Load the demo chain plus a year of trading for the reports benchmark:
    /// 17 more branches (20 in all) and about 1,000,000 sale lines.
    SeedLarge {
        /// Sale lines to generate.
        #[arg(long, default_value_t = 1_000_000)]
        sale_lines: u64,
    },
    /// Time the dashboard and every report (p50/p95/max) against the
    /// database, through the HTTP app; run `seed-large` first.
    BenchReports {
        /// Timed calls per route (after two warm-up calls).
        #[arg(long, default_value_t = 20)]
        calls: usize,
    },
    /// The local development cluster (used when DATABASE_URL is unset):
    /// `start` keeps it running between commands, `status` says where it
    /// runs, `stop` stops it.
    Devdb {
        #[arg(value_enum)]
        action: DevdbAction,
    },
    /// A simulator of the tax authority's EFRIS interfaces (T101, T104,
    /// T106, T109, T110, T130, T131) with fault injection; `GET /sim/stats`
    /// counts what it received. Needs no database.
    FiscalSim {
        #[arg(long, default_value_t = 9880)]
        port: u16,
        /// Delay of every answer.
        #[arg(long, default_value_t = 0)]
        latency_ms: u64,
        /// Share of calls answered 503.
        #[arg(long, default_value_t = 0.0)]
        fail_rate: f64,
        /// Share of documents rejected.
        #[arg(long, default_value_t = 0.0)]
        reject_rate: f64,
        /// Share of documents recorded but answered too late.
        #[arg(long, default_value_t = 0.0)]
        timeout_rate: f64,
        /// How long a "timed out" answer is held.
        #[arg(long, default_value_t = 30_000)]
        hold_ms: u64,
        /// The taxpayer's key (PEM, public or private) whose signatures it
        /// accepts; the development key when omitted.
        #[arg(long)]
        key: Option<std::path::PathBuf>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DevdbAction {
    Start,
    Status,
    Stop,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let config = match Config::load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Held to the end of `main`: dropping it flushes the queued log lines.
    let _log_writer = telemetry::init_logging(&config.log);
    let outcome =
        actix_web::rt::System::new().block_on(run(cli.command.unwrap_or(Command::Serve), config));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type AnyError = Box<dyn std::error::Error>;

async fn run(command: Command, config: Config) -> Result<(), AnyError> {
    if let Command::Devdb { action } = command {
        return devdb_command(action, &config).await;
    }
    if let Command::FiscalSim {
        port,
        latency_ms,
        fail_rate,
        reject_rate,
        timeout_rate,
        hold_ms,
        key,
    } = command
    {
        let faults = pharmacy::fiscal_sim::Faults {
            latency_ms,
            fail_rate,
            reject_rate,
            timeout_rate,
            hold_ms,
            ..Default::default()
        };
        let key = pharmacy::fiscal_sim::taxpayer_key(key.as_deref())?;
        let listener = std::net::TcpListener::bind((config.http.host.as_str(), port))?;
        println!(
            "fiscal simulator on http://{}/efrisws/ws/taapp/getInformation (stats at /sim/stats)",
            listener.local_addr()?
        );
        let sim = std::sync::Arc::new(pharmacy::fiscal_sim::Sim::new(key, faults));
        pharmacy::fiscal_sim::start(sim, listener)?.await?;
        return Ok(());
    }
    let (url, local) = database_url(&config).await?;
    let outcome = run_with_database(command, config.clone(), &url, local.is_some()).await;
    // A command that had to start the local cluster stops it again, so no
    // server outlives the service; `devdb start` keeps one running.
    if local.is_some_and(|c| c.started_here) {
        let spec = devdb_spec(&config);
        tokio::task::spawn_blocking(move || devdb::stop(&spec)).await??;
    }
    outcome
}

async fn run_with_database(
    command: Command,
    config: Config,
    url: &str,
    local: bool,
) -> Result<(), AnyError> {
    let pool = db::pool(url, &config.database)?;
    let applied = db::migrate::run(&pool).await?;
    if applied > 0 {
        tracing::info!(applied, "migrations applied");
    }
    match command {
        Command::Migrate => println!("database is up to date ({applied} migration(s) applied)"),
        Command::CreateAdmin {
            email,
            password,
            name,
        } => match seed::create_admin(&pool, &email, &password, &name).await? {
            seed::AdminOutcome::Created(id) => println!("admin {email} created (id {id})"),
            seed::AdminOutcome::AlreadyExists(id) => {
                println!("a user with email {email} already exists (id {id}); nothing changed")
            }
        },
        Command::SeedDemo => {
            if seed::seed_demo(&pool).await? {
                println!("demo data loaded");
            } else {
                println!("demo data was already loaded");
            }
            print_demo_logins();
        }
        Command::SeedLarge { sale_lines } => {
            let spec = pharmacy::seed_large::LargeSpec {
                sale_lines,
                ..Default::default()
            };
            match pharmacy::seed_large::seed_large(&pool, &spec).await? {
                Some(o) => {
                    println!(
                        "generated {} sales with {} lines, {} batches and {} stock movements in {:.1} s",
                        o.sales, o.sale_lines, o.batches, o.movements, o.seconds
                    );
                    println!("invariant violations: {}", o.violations.len());
                    for v in o.violations.iter().take(10) {
                        println!("  {v}");
                    }
                }
                None => println!("the large data set was already loaded"),
            }
            print_demo_logins();
        }
        Command::BenchReports { calls } => {
            let (size, figures) = pharmacy::bench::bench_reports(config, pool, calls).await?;
            print!("{}", pharmacy::bench::table(&size, &figures, calls));
        }
        Command::Serve => {
            if local {
                if !seed::has_users(&pool).await? {
                    seed::seed_demo(&pool).await?;
                }
                devdb::announce(&format!("local database: {url}"));
                print_demo_logins();
            }
            devdb::announce(&format!(
                "serving on http://{}:{}/api/v1 (docs at /docs)",
                config.http.host, config.http.port
            ));
            // The change feed's listener connects with the same URL.
            let mut config = config;
            config.database.url = Some(url.to_owned());
            if let Some(sim) = pharmacy::fiscal::dev_simulator(&mut config)? {
                devdb::announce(&format!(
                    "fiscal documents go to the in-process EFRIS simulator at {sim} \
                     (receipts say SIMULATED; set fiscal.mode to change it)"
                ));
            }
            app::serve(config, pool).await?;
        }
        Command::Devdb { .. } | Command::FiscalSim { .. } => {}
    }
    Ok(())
}

async fn devdb_command(action: DevdbAction, config: &Config) -> Result<(), AnyError> {
    let spec = devdb_spec(config);
    let message = tokio::task::spawn_blocking(move || -> Result<String, devdb::DevDbError> {
        match action {
            DevdbAction::Start => {
                let cluster = devdb::ensure_started(&spec)?;
                let mut lines: Vec<String> = cluster.port_note.into_iter().collect();
                lines.push(format!("{}", devdb::status(&spec)?));
                Ok(lines.join("\n"))
            }
            DevdbAction::Status => Ok(devdb::status(&spec)?.to_string()),
            DevdbAction::Stop => {
                devdb::stop(&spec)?;
                Ok(devdb::status(&spec)?.to_string())
            }
        }
    })
    .await??;
    println!("{message}");
    Ok(())
}

fn devdb_spec(config: &Config) -> ClusterSpec {
    ClusterSpec {
        dir: config.devdb.dir.clone(),
        port: Some(config.devdb.port),
        ephemeral: false,
    }
}

/// `DATABASE_URL` when set; otherwise the local cluster under `var/`.
async fn database_url(config: &Config) -> Result<(String, Option<devdb::Cluster>), AnyError> {
    if let Some(url) = config.database.url.clone().filter(|u| !u.trim().is_empty()) {
        return Ok((url, None));
    }
    let spec = devdb_spec(config);
    let cluster = tokio::task::spawn_blocking(move || devdb::ensure_started(&spec)).await??;
    if let Some(note) = &cluster.port_note {
        devdb::announce(note);
    }
    devdb::ensure_database(&cluster, &config.devdb.database).await?;
    Ok((cluster.conninfo(&config.devdb.database), Some(cluster)))
}

fn print_demo_logins() {
    devdb::announce(&format!(
        "demo logins (password for all: {}):",
        seed::DEMO_PASSWORD
    ));
    for (email, role, branch) in seed::demo_logins() {
        devdb::announce(&format!("  {email:<40} {role:<18} branch {branch}"));
    }
}
