//! Group-commit metrics, registered in the process-wide Prometheus registry
//! that `GET /metrics` renders. Keyed by the group's label only (`branch`
//! for sales, as it always was, and `payment` for payments), never by an id.

use std::sync::LazyLock;

use actors::metrics::registered;
use prometheus::{register_histogram_vec, register_int_counter_vec, HistogramVec, IntCounterVec};

/// Named for its first user, the sale desk; dashboards read the name.
pub static GROUP_SIZE: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(register_histogram_vec!(
        "sale_batch_size",
        "Requests of one branch made in one transaction (group commit): kind branch = sales, payment = payments",
        &["kind"],
        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]
    ))
});

pub static GROUP_FALLBACKS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(register_int_counter_vec!(
        "sale_batch_fallbacks_total",
        "Group commits that failed as a whole (a deadlock with another server process, a lost connection, a compare-and-set another process won) and were made again one request per transaction; kind as in sale_batch_size",
        &["kind"]
    ))
});
