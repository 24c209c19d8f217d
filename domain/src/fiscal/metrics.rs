//! The outbox's gauges, refreshed by every server process from the
//! database (all processes report the same shared figures): documents by
//! status, the age of the oldest unfinished one, and the configured age
//! past which the alert fires (`deploy/prometheus-alerts.yml`).

use std::sync::LazyLock;

use actors::metrics::registered;
use deadpool_postgres::Pool;
use prometheus::{register_int_gauge, register_int_gauge_vec, IntGauge, IntGaugeVec};

use crate::error::Result;

pub static DOCUMENTS: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    registered(register_int_gauge_vec!(
        "fiscal_documents",
        "Fiscal documents of the whole chain by status (waiting, pending, submitting, accepted, retrying, rejected)",
        &["status"]
    ))
});

pub static OLDEST_UNFINISHED: LazyLock<IntGauge> = LazyLock::new(|| {
    registered(register_int_gauge!(
        "fiscal_oldest_unfinished_seconds",
        "Seconds since the oldest fiscal document neither accepted nor rejected was queued (0 when none)"
    ))
});

pub static ALERT_AFTER: LazyLock<IntGauge> = LazyLock::new(|| {
    registered(register_int_gauge!(
        "fiscal_alert_after_seconds",
        "fiscal.alert_after_secs: how long a document may stay unfinished before the alert fires"
    ))
});

/// Creates the series (so a scrape shows them before the first refresh).
pub fn init(alert_after_secs: u64) {
    for s in super::STATUSES {
        DOCUMENTS.with_label_values(&[s]).set(0);
    }
    OLDEST_UNFINISHED.set(0);
    ALERT_AFTER.set(i64::try_from(alert_after_secs).unwrap_or(i64::MAX));
}

/// Reads the figures once and sets the gauges.
pub async fn refresh(pool: &Pool) -> Result<()> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT status, count(*) FROM fiscal_documents GROUP BY status",
            &[],
        )
        .await?;
    for s in super::STATUSES {
        let n = rows
            .iter()
            .find(|r| r.get::<_, &str>(0) == s)
            .map_or(0, |r| r.get::<_, i64>(1));
        DOCUMENTS.with_label_values(&[s]).set(n);
    }
    let oldest: Option<i64> = client
        .query_one(
            "SELECT extract(epoch FROM now() - min(created_at))::int8 FROM fiscal_documents
             WHERE status NOT IN ('accepted', 'rejected')",
            &[],
        )
        .await?
        .get(0);
    OLDEST_UNFINISHED.set(oldest.unwrap_or(0));
    Ok(())
}
