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
    /// Whether this call started it (it was not running before).
    pub started_here: bool,
    /// Said once when the configured port was taken and another was chosen.
    pub port_note: Option<String>,
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

/// What `devdb status` reports.
#[derive(Debug, Clone)]
pub struct Status {
    /// The data directory (where the cluster lives or would live).
    pub data_dir: PathBuf,
    /// `(pid, port)` of the running server, if any.
    pub running: Option<(u32, u16)>,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.running {
            Some((pid, port)) => write!(
                f,
                "running: pid {pid}, port {port}, data directory {}",
                self.data_dir.display()
            ),
            None => write!(f, "stopped: data directory {}", self.data_dir.display()),
        }
    }
}

/// Starts the cluster if it is not running, creating it on first use.
///
/// A TCP cluster uses the port it was given unless another server holds it:
/// then it takes a free port, remembers it in `<dir>/port` for the next
/// start of this checkout, and says so in `port_note`.
pub fn ensure_started(spec: &ClusterSpec) -> Result<Cluster, DevDbError> {
    let bin = find_binaries().ok_or(DevDbError::NoBinaries)?;
    let owner = cluster_owner()?;
    let dir = usable_dir(&spec.dir, owner.as_ref());
    let data = dir.join("data");
    let run = dir.join("run");
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
    if let Some((_, port)) = running(&bin, owner.as_ref(), &data) {
        return Ok(Cluster {
            socket_dir: run,
            port,
            tcp: spec.port.is_some(),
            started_here: false,
            port_note: None,
        });
    }
    let (port, port_note) = match spec.port {
        Some(wanted) => choose_port(&dir, wanted)?,
        None => (5432, None),
    };
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
    Ok(Cluster {
        socket_dir: run,
        port,
        tcp: spec.port.is_some(),
        started_here: true,
        port_note,
    })
}

/// The remembered port of this checkout, else `wanted`; when that port is
/// held by another server, a free one, remembered from now on.
fn choose_port(dir: &Path, wanted: u16) -> Result<(u16, Option<String>), DevDbError> {
    let remembered = dir.join("port");
    let port = fs::read_to_string(&remembered)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(wanted);
    if port_is_free(port) {
        return Ok((port, None));
    }
    let free = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map_err(|e| step("find a free port", e))?
        .port();
    fs::write(&remembered, format!("{free}\n")).map_err(|e| step("remember the port", e))?;
    let holder = match postgres_holding(port) {
        Some(data) => format!("another PostgreSQL (data directory {})", data.display()),
        None => "another program".to_owned(),
    };
    let note = format!(
        "port {port} is held by {holder}; this checkout's cluster now uses port {free} \
         (remembered in {}; delete that file to go back)",
        remembered.display()
    );
    Ok((free, Some(note)))
}

fn port_is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The data directory of a running postmaster started with `-p port`, read
/// from the process table (Linux).
fn postgres_holding(port: u16) -> Option<PathBuf> {
    let port = port.to_string();
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let cmdline = fs::read(entry.path().join("cmdline")).ok()?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let names_port = args.windows(2).any(|w| w[0] == "-p" && w[1] == port);
        let data = args.windows(2).find(|w| w[0] == "-D").map(|w| &w[1])?;
        names_port.then(|| PathBuf::from(data))
    })
}

/// `(pid, port)` from `postmaster.pid` when `pg_ctl status` says it runs.
fn running(bin: &Path, owner: Option<&nix::unistd::User>, data: &Path) -> Option<(u32, u16)> {
    let up = pg_command(&bin.join("pg_ctl"), owner)
        .args(["status", "-D", &data.to_string_lossy()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !up {
        return None;
    }
    // Line 1 is the pid, line 4 the port.
    let pidfile = fs::read_to_string(data.join("postmaster.pid")).ok()?;
    let lines: Vec<&str> = pidfile.lines().collect();
    Some((
        lines.first()?.trim().parse().ok()?,
        lines.get(3)?.trim().parse().ok()?,
    ))
}

/// Whether the cluster of `spec` runs, and where.
pub fn status(spec: &ClusterSpec) -> Result<Status, DevDbError> {
    let bin = find_binaries().ok_or(DevDbError::NoBinaries)?;
    let owner = cluster_owner()?;
    let data = usable_dir(&spec.dir, owner.as_ref()).join("data");
    Ok(Status {
        running: running(&bin, owner.as_ref(), &data),
        data_dir: data,
    })
}

/// Stops the cluster if it runs; stopping a stopped cluster is no error.
pub fn stop(spec: &ClusterSpec) -> Result<(), DevDbError> {
    let bin = find_binaries().ok_or(DevDbError::NoBinaries)?;
    let owner = cluster_owner()?;
    let dir = usable_dir(&spec.dir, owner.as_ref());
    let data = dir.join("data");
    if running(&bin, owner.as_ref(), &data).is_none() {
        return Ok(());
    }
    let out = pg_command(&bin.join("pg_ctl"), owner.as_ref())
        .args(["stop", "-m", "fast", "-D", &data.to_string_lossy()])
        .output()
        .map_err(|e| step("pg_ctl stop", e))?;
    if !out.status.success() {
        return Err(step("pg_ctl stop", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

/// Stops the cluster and deletes its directory (test clusters).
pub fn stop_and_remove(spec: &ClusterSpec) -> Result<(), DevDbError> {
    stop(spec)?;
    let owner = cluster_owner()?;
    let dir = usable_dir(&spec.dir, owner.as_ref());
    fs::remove_dir_all(&dir).or_else(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Ok(()),
        _ => Err(step("remove the cluster directory", e)),
    })
}

/// The directory a cluster of `spec` really uses (see the module note).
pub fn resolved_dir(spec: &ClusterSpec) -> Result<PathBuf, DevDbError> {
    let owner = cluster_owner()?;
    Ok(usable_dir(&spec.dir, owner.as_ref()))
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
