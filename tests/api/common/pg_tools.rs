//! PostgreSQL's own tools for the tests that build clusters of their own
//! (a restore from a base backup, a synchronous standby).

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use pharmacy::devdb;

/// A PostgreSQL tool, run as the cluster's owner (`postgres` when root).
pub fn pg_tool(name: &str) -> Command {
    let bin = devdb::find_binaries().expect("PostgreSQL binaries");
    let mut cmd = Command::new(bin.join(name));
    if nix::unistd::Uid::effective().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .unwrap()
            .expect("a postgres user");
        cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        cmd.env("HOME", &user.dir).current_dir("/");
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// Runs a tool off the test's runtime thread, so the HTTP client keeps
/// seeing its idle connections close meanwhile.
pub async fn run_tool(mut cmd: Command, what: &str) {
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A free TCP port on 127.0.0.1 (free when asked).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
