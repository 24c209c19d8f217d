//! Actor metrics, registered in the process-wide Prometheus registry that
//! `GET /metrics` renders.
//!
//! Label cardinality: the mailbox series (`actor_mailbox_depth`,
//! `actor_mailbox_capacity`, `actor_mailbox_rejected_total`,
//! `actor_mailbox_wait_seconds`) carry `kind` and the `branch` or `device`
//! id of their actor (the other label empty): one series (one histogram for
//! the wait) per live actor of the process, that is at most one per branch
//! and per till that sent work to it since it started. Nothing else is keyed
//! by an id: handling time stays by kind and command.

use std::sync::LazyLock;

use prometheus::{
    register_histogram_vec, register_int_counter_vec, register_int_gauge_vec, HistogramVec,
    IntCounterVec, IntGaugeVec,
};

/// A metric of this process, registered on first use. Registration fails
/// only for a name registered twice or a malformed definition (labels,
/// histogram bounds): fixed in the code below, so a programming error that
/// the first test run shows, not a condition to handle.
#[allow(
    clippy::expect_used,
    reason = "metric names, labels and bounds are constants: failing to register is a bug"
)]
#[track_caller]
pub fn registered<T>(r: prometheus::Result<T>) -> T {
    r.expect("metric registers once")
}

pub static MAILBOX_DEPTH: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    registered(register_int_gauge_vec!(
        "actor_mailbox_depth",
        "Requests waiting for an actor (messages in its mailbox, plus REST sales waiting for a branch's group commit), by actor",
        &["kind", "branch", "device"]
    ))
});

pub static MAILBOX_REJECTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(register_int_counter_vec!(
        "actor_mailbox_rejected_total",
        "Requests refused because the actor's mailbox (or a branch's sale queue) was full (answered 503), by actor",
        &["kind", "branch", "device"]
    ))
});

pub static MAILBOX_WAIT: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(register_histogram_vec!(
        "actor_mailbox_wait_seconds",
        "Time a request waited for its actor before handling (a REST sale: until its group commit took it), by actor",
        &["kind", "branch", "device"],
        vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
    ))
});

pub static MAILBOX_CAPACITY: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    registered(register_int_gauge_vec!(
        "actor_mailbox_capacity",
        "Requests an actor admits before refusing (its mailbox capacity, changeable per branch at run time), by actor",
        &["kind", "branch", "device"]
    ))
});

pub static HANDLE_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(register_histogram_vec!(
        "actor_handle_seconds",
        "Time an actor spent handling one message, by actor kind and command",
        &["kind", "command"],
        vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]
    ))
});

pub static ACTORS_STARTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(register_int_counter_vec!(
        "actors_started_total",
        "Actors started (first use or restart), by kind",
        &["kind"]
    ))
});
