//! The service under test: the real `pharmacy serve` binary in its own
//! process (so its memory is its own), started per scenario with the
//! scenario's settings, and its resident memory sampled from /proc.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tokio::process::{Child, Command};

/// Builds `pharmacy` with this tool's own profile and returns its path.
pub fn build_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the bench binary has no directory")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    // With the bench package selected too, the dependencies' features are
    // unified as for `cargo run -p bench`, so this build reuses that one's
    // artifacts instead of compiling the service's crates again.
    cmd.current_dir(root).args([
        "build", "-q", "-p", "bench", "-p", "pharmacy", "--bin", "pharmacy",
    ]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    let status = cmd.status().context("run cargo build for the service")?;
    if !status.success() {
        bail!("building the service failed");
    }
    let bin = dir.join("pharmacy");
    if !bin.exists() {
        bail!("{} does not exist after the build", bin.display());
    }
    Ok(bin)
}

pub struct Server {
    child: Child,
    pub pid: u32,
    pub root: String,
    pub log: PathBuf,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Server {
    /// Starts `pharmacy serve` on a free port and waits for `/readyz`.
    pub async fn start(
        bin: &Path,
        database_url: &str,
        env: &[(String, String)],
        log: PathBuf,
    ) -> Result<Server> {
        let port = free_port()?;
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .env("DATABASE_URL", database_url)
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .env("APP_ENV", "development")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("start the service")?;
        let pid = child.id().context("the service exited at once")?;
        let root = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the service exited ({status}) before it was ready:\n{}",
                    tail(&log)
                );
            }
            if let Ok(r) = http.get(format!("{root}/readyz")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            if started.elapsed() > Duration::from_secs(120) {
                bail!("the service was not ready within 120 s:\n{}", tail(&log));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Server {
            child,
            pid,
            root,
            log,
        })
    }

    pub fn base(&self) -> String {
        format!("{}/api/v1", self.root)
    }

    /// SIGTERM, then up to 30 s for a graceful exit, then SIGKILL.
    pub async fn stop(mut self) -> Result<()> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.pid)?);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(_) => Ok(()),
            Err(_) => {
                self.child.kill().await?;
                bail!("the service did not stop within 30 s of SIGTERM")
            }
        }
    }

    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(20).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Samples the server's RSS every 100 ms until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(f64, u64)>>>,
    task: tokio::task::JoinHandle<()>,
    pid: u32,
    before_kib: u64,
}

impl Sampler {
    pub fn start(pid: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let before_kib = memory_kib(pid).map(|m| m.0).unwrap_or(0);
        let (s, v) = (stop.clone(), samples.clone());
        let task = tokio::spawn(async move {
            let t0 = Instant::now();
            while !s.load(Ordering::Relaxed) {
                if let Some((rss, _)) = memory_kib(pid) {
                    if let Ok(mut v) = v.lock() {
                        v.push((t0.elapsed().as_secs_f64(), rss));
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Sampler {
            stop,
            samples,
            task,
            pid,
            before_kib,
        }
    }

    /// Stops sampling; `measure_from` is when the timed window began (s
    /// after the sampler started), so the window's flatness can be judged.
    pub async fn finish(self, measure_from: f64) -> Rss {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let peak = memory_kib(self.pid).map(|m| m.1).unwrap_or(0);
        let samples = self.samples.lock().map(|v| v.clone()).unwrap_or_default();
        let window: Vec<u64> = samples
            .iter()
            .filter(|(t, _)| *t >= measure_from)
            .map(|(_, r)| *r)
            .collect();
        let first = window.first().copied().unwrap_or(0);
        let last = window.last().copied().unwrap_or(0);
        let min = window.iter().copied().min().unwrap_or(0);
        let max = window.iter().copied().max().unwrap_or(0);
        Rss {
            before_kib: self.before_kib,
            peak_kib: peak,
            window_first_kib: first,
            window_last_kib: last,
            window_min_kib: min,
            window_max_kib: max,
            drift_pct: if first > 0 {
                (last as f64 - first as f64) * 100.0 / first as f64
            } else {
                0.0
            },
            spread_pct: if min > 0 {
                (max as f64 - min as f64) * 100.0 / min as f64
            } else {
                0.0
            },
            samples: window.len(),
        }
    }
}

/// The server's memory over one scenario.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Rss {
    /// Before the warm-up.
    pub before_kib: u64,
    /// `VmHWM` at the end: the peak resident set of the process.
    pub peak_kib: u64,
    pub window_first_kib: u64,
    pub window_last_kib: u64,
    pub window_min_kib: u64,
    pub window_max_kib: u64,
    /// Last sample against the first of the timed window, in %.
    pub drift_pct: f64,
    /// (max − min) / min over the timed window, in %.
    pub spread_pct: f64,
    pub samples: usize,
}
