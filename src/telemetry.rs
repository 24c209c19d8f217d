//! Logs (text or JSON, every line of a request carrying its request id) and
//! HTTP metrics.

use std::io::IsTerminal;
use std::sync::LazyLock;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use prometheus::{
    register_histogram_vec, register_int_counter_vec, register_int_gauge_vec, HistogramVec,
    IntCounterVec, IntGaugeVec,
};
use tracing::Instrument;
use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

static HTTP_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "http_requests_total",
        "HTTP requests by route pattern, method and status",
        &["route", "method", "status"]
    )
    .expect("metric registers once")
});

static HTTP_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "http_request_duration_seconds",
        "HTTP request latency by route pattern and method",
        &["route", "method"],
        vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]
    )
    .expect("metric registers once")
});

static POOL: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    register_int_gauge_vec!(
        "db_pool_connections",
        "Database pool connections by state (size, available, waiting, max)",
        &["state"]
    )
    .expect("metric registers once")
});

/// Installs the global subscriber once; later calls (tests) are no-ops.
pub fn init_logging(cfg: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only on a terminal: a file or a pipe gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    let _ = if cfg.format == "json" {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init()
    } else {
        builder.try_init()
    };
}

/// Accepts a sane `X-Request-Id` or makes one, runs the request inside a span
/// carrying it, echoes it back, and records the request's metrics.
pub async fn request_context(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let request_id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let method = req.method().to_string();
    let path = req.path().to_owned();
    let span =
        tracing::info_span!("request", request_id = %request_id, method = %method, path = %path);
    let started = Instant::now();
    let mut res = next.call(req).instrument(span.clone()).await?;
    let elapsed = started.elapsed();
    let route = res
        .request()
        .match_pattern()
        .unwrap_or_else(|| "unmatched".to_owned());
    let status = res.status();
    HTTP_REQUESTS
        .with_label_values(&[route.as_str(), method.as_str(), status.as_str()])
        .inc();
    HTTP_SECONDS
        .with_label_values(&[route.as_str(), method.as_str()])
        .observe(elapsed.as_secs_f64());
    span.in_scope(|| {
        tracing::info!(
            status = status.as_u16(),
            elapsed_ms = elapsed.as_secs_f64() * 1000.0,
            "request done"
        )
    });
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(REQUEST_ID.clone(), v);
    }
    Ok(res)
}

/// Refreshes the pool gauges (called when metrics are scraped).
pub fn record_pool(pool: &deadpool_postgres::Pool) {
    let s = pool.status();
    POOL.with_label_values(&["max"]).set(s.max_size as i64);
    POOL.with_label_values(&["size"]).set(s.size as i64);
    POOL.with_label_values(&["available"])
        .set(s.available as i64);
    POOL.with_label_values(&["waiting"]).set(s.waiting as i64);
}
