//! The fiscal scenarios: the `sales` load with the server's outbox talking
//! to a simulator of the tax authority that is up (`fiscal-up`), down
//! (`fiscal-down`: nothing listens, every call is refused) or slow
//! (`fiscal-slow`: every answer 2 s late). A sale never waits for the
//! authority, so the three should sell alike; the report gives each one's
//! throughput and latency as ratios to `fiscal-up` of the same run, and
//! how far the invoices got (the worker keeps submitting beside the load).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::process::{Child, Command};

use domain::db::Pool;

use crate::{check, Report};

/// The three scenarios, in the order `fiscal` runs them.
pub const SCENARIOS: [&str; 3] = ["fiscal-up", "fiscal-down", "fiscal-slow"];

/// How late the slow simulator answers.
const SLOW_MS: u64 = 2_000;

pub fn is_fiscal(name: &str) -> bool {
    SCENARIOS.contains(&name)
}

/// The simulator of one scenario (none when the authority is down).
pub struct Authority {
    child: Option<Child>,
    pub url: String,
}

/// Starts the scenario's simulator (`pharmacy fiscal-sim`, its own
/// process) and waits until it answers.
pub async fn start(bin: &Path, name: &str, log: PathBuf) -> Result<Authority> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let root = format!("http://127.0.0.1:{port}");
    let url = format!("{root}/efrisws/ws/taapp/getInformation");
    let latency = match name {
        "fiscal-up" => 0,
        "fiscal-slow" => SLOW_MS,
        // Down: the port was free and stays unbound; every call is refused.
        _ => return Ok(Authority { child: None, url }),
    };
    let out = std::fs::File::create(&log)?;
    let mut child = Command::new(bin)
        .args([
            "fiscal-sim",
            "--port",
            &port.to_string(),
            "--latency-ms",
            &latency.to_string(),
        ])
        .env("HOST", "127.0.0.1")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .context("start the fiscal simulator")?;
    let http = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            bail!(
                "the fiscal simulator exited ({status}); see {}",
                log.display()
            );
        }
        if let Ok(r) = http.get(format!("{root}/sim/stats")).send().await {
            if r.status().is_success() {
                break;
            }
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("the fiscal simulator was not ready within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Authority {
        child: Some(child),
        url,
    })
}

impl Authority {
    /// The server's settings: its outbox's worker sends to this simulator.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("MODE", "efris".to_owned()),
            ("EFRIS__URL", self.url.clone()),
            // Quoted: the settings loader reads a bare number as an integer.
            ("EFRIS__TIN", "\"1000000000\"".to_owned()),
            ("EFRIS__DEFAULT_DEVICE_NO", "BENCH-DEVICE".to_owned()),
            ("EFRIS__SIMULATED", "true".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (format!("PHARMACY__FISCAL__{k}"), v))
        .collect()
    }

    pub async fn stop(mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill().await;
        }
    }
}

/// The invoices by status at the end of the scenario, as report counters
/// (`invoices_accepted`, `invoices_retrying`, ...).
pub async fn invoices(pool: &Pool) -> Result<Vec<(String, u64)>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT status, count(*) FROM fiscal_documents WHERE kind = 'T109' GROUP BY status",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                format!("invoices_{}", r.get::<_, String>(0)),
                u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
            )
        })
        .collect())
}

/// `fiscal-down` and `fiscal-slow` against `fiscal-up` of the same run:
/// throughput and p50/p99 latency as ratios.
pub fn against_up(r: &mut Report, earlier: &[Report]) {
    let Some(up) = earlier.iter().find(|e| e.scenario == "fiscal-up") else {
        return;
    };
    let ratio = r.main.per_sec / up.main.per_sec.max(f64::MIN_POSITIVE);
    let p50 = r.main.p50_ms / up.main.p50_ms.max(f64::MIN_POSITIVE);
    let p99 = r.main.p99_ms / up.main.p99_ms.max(f64::MIN_POSITIVE);
    r.targets.push(check(
        "sales/s >= 90 % of fiscal-up (same run)",
        ratio >= 0.9,
        format!(
            "{:.1} % ({:.0} against {:.0} sales/s)",
            ratio * 100.0,
            r.main.per_sec,
            up.main.per_sec
        ),
    ));
    r.targets.push(check(
        "p99 <= 1.3 x fiscal-up's (same run)",
        p99 <= 1.3,
        format!(
            "p50 {:.2} x ({:.1} against {:.1} ms), p99 {:.2} x ({:.1} against {:.1} ms)",
            p50, r.main.p50_ms, up.main.p50_ms, p99, r.main.p99_ms, up.main.p99_ms
        ),
    ));
}
