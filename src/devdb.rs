//! A local PostgreSQL cluster run from the machine's server binaries, for
//! development (`serve` without `DATABASE_URL`) and for the test harness.
//!
//! `initdb` refuses to run as root, so as root the cluster runs as the
//! unprivileged `postgres` system user. When that user cannot reach the
//! requested directory (a checkout under `/root`, say), the cluster goes to a
//! per-checkout directory under the system temp dir instead.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum DevDbError {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl) were not found. Install them \
         (Debian/Ubuntu: `apt-get install postgresql`), set PG_BIN to their directory, \
         or set DATABASE_URL to an existing database"
    )]
    NoBinaries,
    #[error(
        "running as root needs the unprivileged `postgres` system user to own the local \
         cluster; install PostgreSQL's server package (it creates the user) or set DATABASE_URL"
    )]
    NoPostgresUser,
    #[error("{step} failed: {detail}")]
    Step { step: &'static str, detail: String },
}

/// Where and how to run a cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// Directory holding `data/`, `run/` (the socket) and `postgres.log`.
    pub dir: PathBuf,
    /// TCP port on 127.0.0.1; `None` listens on the unix socket only.
    pub port: Option<u16>,
    /// Trade durability for speed (tests): no fsync, no synchronous commit.
    pub ephemeral: bool,
}

/// A started cluster: connection settings for its `postgres` superuser.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub socket_dir: PathBuf,
    pub port: u16,
    pub tcp: bool,
}

impl Cluster {
    /// A libpq-style connection string for `dbname`.
    pub fn conninfo(&self, dbname: &str) -> String {
        if self.tcp {
            format!("postgres://postgres@127.0.0.1:{}/{dbname}", self.port)
        } else {
            format!(
                "host={} port={} user=postgres dbname={dbname}",
                self.socket_dir.display(),
                self.port
            )
        }
    }
}

/// Starts the cluster if it is not running, creating it on first use.
pub fn ensure_started(spec: &ClusterSpec) -> Result<Cluster, DevDbError> {
    let bin = find_binaries().ok_or(DevDbError::NoBinaries)?;
    let owner = cluster_owner()?;
    let dir = usable_dir(&spec.dir, owner.as_ref());
    let data = dir.join("data");
    let run = dir.join("run");
    let port = spec.port.unwrap_or(5432);
    fs::create_dir_all(&run).map_err(|e| step("create the cluster directory", e))?;
    if let Some(user) = &owner {
        chown_tree(&dir, user)?;
    }
    if !data.join("PG_VERSION").exists() {
        let out = pg_command(&bin.join("initdb"), owner.as_ref())
            .args(["-D", &data.to_string_lossy(), "-U", "postgres"])
            .args(["--auth=trust", "-E", "UTF8", "--no-locale"])
            .output()
            .map_err(|e| step("initdb", e))?;
        if !out.status.success() {
            return Err(step("initdb", String::from_utf8_lossy(&out.stderr)));
        }
    }
    let running = pg_command(&bin.join("pg_ctl"), owner.as_ref())
        .args(["status", "-D", &data.to_string_lossy()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !running {
        let listen = if spec.port.is_some() { "127.0.0.1" } else { "" };
        let mut opts = format!(
            "-p {port} -k {} -c listen_addresses='{listen}' -c max_connections=400",
            run.display()
        );
        if spec.ephemeral {
            opts.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let out = pg_command(&bin.join("pg_ctl"), owner.as_ref())
            .args(["start", "-w", "-t", "60", "-D", &data.to_string_lossy()])
            .args([
                "-l",
                &dir.join("postgres.log").to_string_lossy(),
                "-o",
                &opts,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .output()
            .map_err(|e| step("pg_ctl start", e))?;
        if !out.status.success() {
            let log = fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            return Err(step(
                "pg_ctl start",
                format!(
                    "{}\n{}",
                    String::from_utf8_lossy(&out.stderr),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ),
            ));
        }
    }
    Ok(Cluster {
        socket_dir: run,
        port,
        tcp: spec.port.is_some(),
    })
}

/// Stops the cluster (used by tools; tests leave it running for the next run).
pub fn stop(spec: &ClusterSpec) -> Result<(), DevDbError> {
    let bin = find_binaries().ok_or(DevDbError::NoBinaries)?;
    let owner = cluster_owner()?;
    let dir = usable_dir(&spec.dir, owner.as_ref());
    let out = pg_command(&bin.join("pg_ctl"), owner.as_ref())
        .args([
            "stop",
            "-m",
            "fast",
            "-D",
            &dir.join("data").to_string_lossy(),
        ])
        .output()
        .map_err(|e| step("pg_ctl stop", e))?;
    if !out.status.success() {
        return Err(step("pg_ctl stop", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

fn step(step: &'static str, detail: impl std::fmt::Display) -> DevDbError {
    DevDbError::Step {
        step,
        detail: detail.to_string(),
    }
}

/// `PG_BIN`, then Debian's versioned directories (newest first), then `PATH`.
pub fn find_binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PG_BIN").map(PathBuf::from) {
        if dir.join("initdb").exists() {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
    })
}

/// As root, the `postgres` user runs the cluster; otherwise the current user.
fn cluster_owner() -> Result<Option<nix::unistd::User>, DevDbError> {
    if !nix::unistd::Uid::effective().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("postgres") {
        Ok(Some(user)) => Ok(Some(user)),
        _ => Err(DevDbError::NoPostgresUser),
    }
}

fn pg_command(program: &Path, owner: Option<&nix::unistd::User>) -> Command {
    let mut cmd = Command::new(program);
    if let Some(user) = owner {
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        cmd.env("HOME", &user.dir);
        // The child must not start in a directory it cannot enter.
        cmd.current_dir("/");
    }
    cmd
}

/// The requested directory when its owner can reach it, else a per-checkout
/// directory under the temp dir.
fn usable_dir(requested: &Path, owner: Option<&nix::unistd::User>) -> PathBuf {
    let absolute = std::path::absolute(requested).unwrap_or_else(|_| requested.to_path_buf());
    let Some(user) = owner else {
        return absolute;
    };
    let parent = absolute.parent().unwrap_or(Path::new("/"));
    let _ = fs::create_dir_all(parent);
    let reachable = Command::new("test")
        .arg("-x")
        .arg(parent)
        .uid(user.uid.as_raw())
        .gid(user.gid.as_raw())
        .current_dir("/")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if reachable {
        absolute
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        absolute.hash(&mut h);
        std::env::temp_dir().join(format!("pharmacy-pg-{:016x}", h.finish()))
    }
}

fn chown_tree(dir: &Path, user: &nix::unistd::User) -> Result<(), DevDbError> {
    for path in [dir.to_path_buf(), dir.join("run")] {
        nix::unistd::chown(&path, Some(user.uid), Some(user.gid))
            .map_err(|e| step("hand the cluster directory to the postgres user", e))?;
        let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o755));
    }
    if dir.join("data").exists() {
        nix::unistd::chown(&dir.join("data"), Some(user.uid), Some(user.gid))
            .map_err(|e| step("hand the data directory to the postgres user", e))?;
    }
    Ok(())
}

/// Creates `dbname` on the cluster if it does not exist yet.
pub async fn ensure_database(cluster: &Cluster, dbname: &str) -> Result<(), DevDbError> {
    let (client, conn) =
        tokio_postgres::connect(&cluster.conninfo("postgres"), tokio_postgres::NoTls)
            .await
            .map_err(|e| step("connect to the local cluster", e))?;
    tokio::spawn(conn);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&dbname])
        .await
        .map_err(|e| step("look up the database", e))?
        .is_some();
    if !exists {
        // CREATE DATABASE takes no parameters; the name is quoted as an identifier.
        let ident = format!("\"{}\"", dbname.replace('"', "\"\""));
        client
            .batch_execute(&format!("CREATE DATABASE {ident}"))
            .await
            .map_err(|e| step("create the database", e))?;
    }
    Ok(())
}

/// Writes a line to stdout right away (the banner shown at dev start-up).
pub fn announce(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
