//! Live per-branch actor tuning: every server process reloads the branch
//! overrides (stored ones and the configuration's, by branch code) every
//! `actors.overrides_reload_ms` and applies them to its actor registry, so
//! a change made through one process reaches all of them within a few
//! seconds, without a restart.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use domain::db::Pool;
use domain::{BranchOverride, Registry, Result};

use crate::config::Config;
use domain::actor_overrides;

/// Loads the overrides once and applies them.
pub async fn reload(
    pool: &Pool,
    registry: &Registry,
    configured: &BTreeMap<String, BranchOverride>,
) -> Result<()> {
    let version = registry.overrides_version();
    let client = pool.get().await?;
    let overrides = actor_overrides::effective(&client, configured).await?;
    // A change this process made while the query ran is newer than what it
    // read; the next reload reads it back.
    registry.set_branch_overrides_since(version, overrides);
    Ok(())
}

/// Starts the reloading task on the current actix system. It loads at once,
/// then every period, and ends when the registry is gone. A failed load is
/// logged and the overrides in force stay.
pub fn spawn(registry: &Arc<Registry>, pool: Pool, config: &Config) {
    let registry: Weak<Registry> = Arc::downgrade(registry);
    let configured = config.branch_overrides();
    let period = Duration::from_millis(config.actors.overrides_reload_ms.max(100));
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tick.tick().await;
            let Some(registry) = registry.upgrade() else {
                return;
            };
            match reload(&pool, &registry, &configured).await {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!("branch actor overrides reloaded again");
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot reload branch actor overrides; keeping the ones in force");
                }
                Err(_) => {}
            }
        }
    });
}
