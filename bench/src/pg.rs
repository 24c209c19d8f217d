//! The benchmark's own PostgreSQL cluster (started with the service's
//! `devdb` code, so as root it runs as the `postgres` user), its databases,
//! the operator settings a run asks for, and the pgbench baseline.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use pharmacy::devdb::{self, Cluster, ClusterSpec};
use serde::Serialize;
use tokio_postgres::NoTls;

pub struct Pg {
    pub cluster: Cluster,
    pub bin: PathBuf,
    spec: ClusterSpec,
}

/// Starts (creating on first use) the durable cluster under `dir`.
pub async fn start(dir: PathBuf, port: u16) -> Result<Pg> {
    let spec = ClusterSpec {
        dir,
        port: Some(port),
        // fsync and synchronous commit stay on: figures for a durable server.
        ephemeral: false,
    };
    let started = spec.clone();
    let cluster = tokio::task::spawn_blocking(move || devdb::ensure_started(&started))
        .await?
        .context("start the benchmark's PostgreSQL cluster")?;
    let bin = devdb::find_binaries().context("PostgreSQL binaries (pgbench) not found")?;
    Ok(Pg { cluster, bin, spec })
}

impl Pg {
    /// Stops the cluster (`pg_ctl stop -m fast`).
    pub async fn stop(&self) -> Result<()> {
        let spec = self.spec.clone();
        tokio::task::spawn_blocking(move || devdb::stop(&spec)).await??;
        Ok(())
    }

    pub fn url(&self, db: &str) -> String {
        self.cluster.conninfo(db)
    }

    pub async fn client(&self, db: &str) -> Result<tokio_postgres::Client> {
        let (client, conn) = tokio_postgres::connect(&self.url(db), NoTls)
            .await
            .with_context(|| format!("connect to database {db}"))?;
        tokio::spawn(conn);
        Ok(client)
    }

    /// Drops every earlier benchmark database and creates `name` empty.
    pub async fn fresh_database(&self, name: &str) -> Result<()> {
        let c = self.client("postgres").await?;
        let old = c
            .query(
                "SELECT datname FROM pg_database WHERE datname LIKE 'bench\\_run\\_%'",
                &[],
            )
            .await?;
        for row in old {
            let db: String = row.get(0);
            c.batch_execute(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"))
                .await?;
        }
        c.batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await?;
        Ok(())
    }

    /// Resets every `ALTER SYSTEM` setting, then applies `settings` (the
    /// operator choices a run measures, e.g. `commit_delay=10`) and reloads.
    pub async fn apply_settings(
        &mut self,
        settings: &[(String, String)],
        stat_statements: bool,
    ) -> Result<Vec<String>> {
        let c = self.client("postgres").await?;
        let preload: String = c
            .query_one("SHOW shared_preload_libraries", &[])
            .await?
            .get(0);
        c.batch_execute("ALTER SYSTEM RESET ALL").await?;
        if stat_statements {
            c.batch_execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
                .await?;
        }
        // Preloading takes a restart; only when it changes.
        if preload.contains("pg_stat_statements") != stat_statements {
            drop(c);
            let spec = self.spec.clone();
            tokio::task::spawn_blocking(move || {
                devdb::stop(&spec)?;
                devdb::ensure_started(&spec)
            })
            .await?
            .context("restart PostgreSQL for shared_preload_libraries")?;
        }
        let c = self.client("postgres").await?;
        for (key, value) in settings {
            if !key
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '.')
            {
                bail!("not a PostgreSQL setting name: {key}");
            }
            let value = value.replace('\'', "''");
            c.batch_execute(&format!("ALTER SYSTEM SET {key} = '{value}'"))
                .await
                .with_context(|| format!("ALTER SYSTEM SET {key}"))?;
        }
        c.batch_execute("SELECT pg_reload_conf()").await?;
        // The reload is asynchronous; a new connection sees it shortly.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let c = self.client("postgres").await?;
        let mut shown = Vec::new();
        for name in [
            "shared_buffers",
            "synchronous_commit",
            "commit_delay",
            "fsync",
            "max_connections",
            "shared_preload_libraries",
        ] {
            let row = c.query_one(&format!("SHOW {name}"), &[]).await?;
            shown.push(format!("{name}={}", row.get::<_, String>(0)));
        }
        for (key, _) in settings {
            let row = c.query_one(&format!("SHOW {key}"), &[]).await?;
            let line = format!("{key}={}", row.get::<_, String>(0));
            if !shown.contains(&line) {
                shown.push(line);
            }
        }
        Ok(shown)
    }

    fn pgbench(&self, db: &str) -> Command {
        let mut cmd = Command::new(self.bin.join("pgbench"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.cluster.port.to_string()])
            .args(["-U", "postgres", db]);
        cmd
    }

    /// `pgbench -i` at `scale` into a fresh `bench_pgbench` database.
    pub async fn pgbench_init(&self, scale: u32) -> Result<String> {
        let db = "bench_pgbench";
        let c = self.client("postgres").await?;
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
            .await?;
        c.batch_execute(&format!("CREATE DATABASE {db}")).await?;
        let mut cmd = self.pgbench(db);
        cmd.args(["-i", "-q", "-s", &scale.to_string()]);
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        if !out.status.success() {
            bail!(
                "pgbench -i failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(db.to_owned())
    }

    /// One pgbench run: `mode` is `-N` (simple-update, no branch/teller
    /// rows) or `-S` (select-only).
    pub async fn pgbench_run(
        &self,
        db: &str,
        mode: &str,
        clients: usize,
        secs: u64,
    ) -> Result<Baseline> {
        let mut cmd = self.pgbench(db);
        cmd.args([mode, "-c", &clients.to_string()])
            .args(["-j", &clients.clamp(1, 2).to_string()])
            .args(["-T", &secs.to_string()]);
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            bail!(
                "pgbench {mode} failed: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let find = |prefix: &str| -> Option<f64> {
            text.lines()
                .find(|l| l.trim_start().starts_with(prefix))
                .and_then(|l| l.split('=').nth(1))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        };
        let tps = find("tps").context("pgbench printed no tps")?;
        Ok(Baseline {
            mode: mode.to_owned(),
            clients,
            secs,
            tps,
            latency_avg_ms: find("latency average").unwrap_or(0.0),
        })
    }
}

/// The statements that took the most database time since the last reset.
pub async fn top_statements(db: &tokio_postgres::Client, n: i64) -> Result<Vec<Statement>> {
    let rows = db
        .query(
            "SELECT calls, total_exec_time, mean_exec_time, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 160)
             FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
             ORDER BY total_exec_time DESC LIMIT $1",
            &[&n],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Statement {
            calls: r.get(0),
            total_ms: r.get(1),
            mean_ms: r.get(2),
            rows: r.get(3),
            query: r.get(4),
        })
        .collect())
}

pub async fn reset_statements(db: &tokio_postgres::Client) -> Result<()> {
    db.batch_execute("SELECT pg_stat_statements_reset()")
        .await?;
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Statement {
    pub calls: i64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub rows: i64,
    pub query: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub mode: String,
    pub clients: usize,
    pub secs: u64,
    pub tps: f64,
    pub latency_avg_ms: f64,
}
