//! The PostgreSQL pool and the embedded migrations.

pub mod migrate;
pub mod replica;

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

use crate::config::DatabaseConfig;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid database URL: {0}")]
    Url(String),
    #[error("could not build the database pool: {0}")]
    Pool(String),
}

/// Builds the pool. Every connection gets the configured statement timeout
/// so a stuck statement turns into a 503 instead of a hung request; a
/// `COMMIT`, which the server does not time out (it may wait for a
/// synchronous standby), is bounded by the same timeout on this side
/// (`domain::db::Tx::commit`), and a connection whose commit went
/// unconfirmed is dropped instead of handed out again.
pub fn pool(url: &str, cfg: &DatabaseConfig) -> Result<Pool, DbError> {
    domain::db::bound_commits_by(Duration::from_millis(cfg.statement_timeout_ms));
    let mut pg = tokio_postgres::Config::from_str(url).map_err(|e| DbError::Url(e.to_string()))?;
    pg.options(format!(
        "-c statement_timeout={} -c idle_in_transaction_session_timeout=60000",
        cfg.statement_timeout_ms
    ));
    pg.connect_timeout(Duration::from_millis(cfg.connect_timeout_ms));
    pg.application_name("pharmacy");
    let manager = Manager::from_config(
        pg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(cfg.pool_size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_millis(cfg.pool_wait_timeout_ms)))
        .create_timeout(Some(Duration::from_millis(cfg.connect_timeout_ms)))
        .recycle_timeout(Some(Duration::from_millis(cfg.connect_timeout_ms)))
        .pre_recycle(Hook::sync_fn(|client, _| {
            if domain::db::abandoned(client) {
                return Err(HookError::message(
                    "its COMMIT went unconfirmed; the session still waits",
                ));
            }
            Ok(())
        }))
        .build()
        .map_err(|e| DbError::Pool(e.to_string()))
}
