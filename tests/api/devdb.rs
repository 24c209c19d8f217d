//! The local cluster gets out of the way: a held port is detected and
//! another one remembered, and a test process leaves no server behind.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

use pharmacy::devdb::{self, ClusterSpec};

use crate::common;

fn scratch_spec(port: u16) -> ClusterSpec {
    ClusterSpec {
        dir: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-pg")
            .join(format!("devdb-{}", uuid::Uuid::now_v7().simple())),
        port: Some(port),
        ephemeral: true,
    }
}

#[tokio::test]
async fn a_port_held_by_another_server_is_named_and_a_free_one_remembered() {
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let spec = scratch_spec(port);
    let started = {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || devdb::ensure_started(&spec))
            .await
            .unwrap()
            .unwrap()
    };
    assert!(started.started_here);
    assert_ne!(started.port, port);
    let note = started.port_note.clone().unwrap();
    assert!(note.contains(&format!("port {port} is held")), "{note}");
    assert!(note.contains(&started.port.to_string()), "{note}");
    let dir = devdb::resolved_dir(&spec).unwrap();
    let remembered = std::fs::read_to_string(dir.join("port")).unwrap();
    assert_eq!(remembered.trim(), started.port.to_string());

    // The cluster answers on the port it chose, and status reports it.
    let (client, conn) =
        tokio_postgres::connect(&started.conninfo("postgres"), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(conn);
    let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
    assert_eq!(one, 1);
    let status = devdb::status(&spec).unwrap();
    assert_eq!(status.running.map(|(_, p)| p), Some(started.port));
    assert!(status.to_string().starts_with("running"), "{status}");

    // Started again it reuses itself; stopped, status says so.
    let again = {
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || devdb::ensure_started(&spec))
            .await
            .unwrap()
            .unwrap()
    };
    assert!(!again.started_here);
    assert_eq!(again.port, started.port);
    let stopping = spec.clone();
    tokio::task::spawn_blocking(move || devdb::stop_and_remove(&stopping))
        .await
        .unwrap()
        .unwrap();
    assert!(!dir.exists());
    drop(held);
}

const PROBE_ENV: &str = "PHARMACY_TEST_CLUSTER_PROBE";

/// Does nothing in a normal run. Run as a child process by the test below
/// (with the variable set), it starts this process's test cluster, writes
/// where it lives, and exits.
#[tokio::test]
async fn child_process_that_starts_a_test_cluster() {
    let Ok(out) = std::env::var(PROBE_ENV) else {
        return;
    };
    let _ = common::fresh_database().await;
    let dir = common::test_cluster_dir().unwrap();
    std::fs::write(out, dir.to_string_lossy().as_bytes()).unwrap();
}

#[test]
fn a_test_process_stops_and_removes_its_cluster_when_it_exits() {
    let out = std::env::temp_dir().join(format!("probe-{}", uuid::Uuid::now_v7().simple()));
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "devdb::child_process_that_starts_a_test_cluster"])
        .env(PROBE_ENV, &out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let dir = PathBuf::from(std::fs::read_to_string(&out).unwrap());
    let _ = std::fs::remove_file(&out);
    assert!(dir.ends_with(dir.file_name().unwrap()));
    assert!(!dir.exists(), "{} is still there", dir.display());
    // No postmaster of that directory is left in the process table.
    let needle = dir.to_string_lossy().into_owned();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&needle))
        .collect();
    assert!(left.is_empty(), "left running: {left:?}");
}
