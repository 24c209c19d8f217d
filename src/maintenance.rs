//! Periodic upkeep every process does on the primary: rolling up the
//! chain-wide rows of the months that are over (migration 0030). A month is
//! correct without it (the reports then read every branch's rows); the
//! roll-up only makes a chain's year cheap to read.

use std::time::Duration;

use domain::db::Pool;

/// How often a process looks for months to roll up. The first look is at
/// start-up; a new month waits at most this long after its first hour.
const ROLL_UP_EVERY: Duration = Duration::from_secs(300);

/// Starts the roll-up task on the current actix system.
pub fn spawn(pool: Pool) {
    actix_web::rt::spawn(async move {
        let mut tick = tokio::time::interval(ROLL_UP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match domain::reports::roll_up_closed_months(&pool).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(months = n, "chain-wide report months rolled up"),
                Err(e) => tracing::debug!(error = %e, "report months not rolled up"),
            }
        }
    });
}
