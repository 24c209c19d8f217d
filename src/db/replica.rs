//! Starting the read replica (`DATABASE_READ_URL`, a streaming standby)
//! from the configuration and running its lag checks. Which reads go to it
//! is the domain's decision (`domain::replica`): a lag-tolerant read takes
//! `domain::replica::Reads` and asks it for its connection.

use std::sync::{Arc, Weak};
use std::time::Duration;

use domain::replica::Replica;
use domain::{Error, Result};

use crate::config::DatabaseConfig;

/// The replica of `cfg.read_url`, if one is configured. The pool connects
/// lazily, so a replica that is down does not stop the start.
pub fn from_config(cfg: &DatabaseConfig) -> Result<Option<Arc<Replica>>> {
    let Some(url) = cfg.read_url() else {
        return Ok(None);
    };
    let pool = super::pool(url, cfg).map_err(|e| Error::internal(e.to_string()))?;
    Ok(Some(Arc::new(Replica::new(
        pool,
        cfg.replica_max_lag_secs,
        Duration::from_millis(cfg.replica_check_ms),
        Duration::from_millis(cfg.replica_snapshot_wait_ms),
    ))))
}

/// Starts the lag checks on the current actix system: at once, then every
/// `replica_check_ms`, until the replica is dropped.
pub fn spawn_checks(replica: &Arc<Replica>) {
    let weak: Weak<Replica> = Arc::downgrade(replica);
    let period = replica.check_every();
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(replica) = weak.upgrade() else {
                return;
            };
            replica.check().await;
        }
    });
}
