//! Sync push metrics, registered in the process-wide Prometheus registry
//! that `GET /metrics` renders. Neither is keyed by an id: changes by
//! entity (five names and `other`) and outcome, batch time by result.

use std::sync::LazyLock;

use actors::metrics::registered;
use prometheus::{register_histogram_vec, register_int_counter_vec, HistogramVec, IntCounterVec};

pub static SYNC_CHANGES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(register_int_counter_vec!(
        "sync_push_changes_total",
        "Pushed changes by entity and outcome (accepted, or the rejection code; replays included)",
        &["entity", "outcome"]
    ))
});

pub static SYNC_PUSH_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(register_histogram_vec!(
        "sync_push_batch_seconds",
        "Time to apply one push batch, from its arrival at the device actor",
        &["result"],
        vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]
    ))
});
