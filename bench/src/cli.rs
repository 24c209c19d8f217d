//! What the cluster tools (`cluster-bench`, `ha-bench`) share around their
//! own work: a runtime, the exit code from a run's verdict, and the
//! repository root their files live under.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Runs `run` on a multi-threaded runtime: success when it answers true,
/// failure (after saying `failed`) when false, failure with the error
/// when it fails.
pub fn exit_with(run: impl Future<Output = anyhow::Result<bool>>, failed: &str) -> ExitCode {
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
    match rt.block_on(run) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("FAILED: {failed}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The repository's root (the bench crate's parent).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
