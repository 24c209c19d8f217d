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
use std::fmt;

use tracing::field::Field;
use tracing::Instrument;
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::{self, Writer};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;
use actors::metrics::registered;

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

static HTTP_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    registered(register_int_counter_vec!(
        "http_requests_total",
        "HTTP requests by route pattern, method and status",
        &["route", "method", "status"]
    ))
});

static HTTP_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    registered(register_histogram_vec!(
        "http_request_duration_seconds",
        "HTTP request latency by route pattern and method",
        &["route", "method"],
        vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]
    ))
});

static POOL: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    registered(register_int_gauge_vec!(
        "db_pool_connections",
        "Database pool connections by state (size, available, waiting, max)",
        &["state"]
    ))
});

/// Installs the global subscriber once; later calls (tests) are no-ops.
/// JSON logs escape every value by construction; text logs go through
/// [`escaped_fields`], so no value can break a line either way.
///
/// Lines go to stdout through a writer thread: a request only queues its
/// line (a slow terminal or log shipper never stalls a request thread).
/// The queue holds 128k lines; only when it is full does a request wait,
/// so no line is lost. Keep the returned guard until the process ends:
/// dropping it flushes what is queued.
pub fn init_logging(cfg: &LogConfig) -> Option<WorkerGuard> {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("log-writer")
        .finish(std::io::stdout());
    // Colour codes only on a terminal: a file or a pipe gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::stdout().is_terminal());
    let installed = if cfg.format == "json" {
        builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init()
    } else {
        builder.fmt_fields(escaped_fields()).try_init()
    };
    installed.ok().map(|()| guard)
}

/// The text logs' field formatter: `name=value` pairs (the message bare),
/// as the default one writes them, except that control characters in a
/// value (a newline, a carriage return, an ANSI escape) and Unicode line
/// separators are written as escapes. A value a client sent (a pushed
/// change's `entity`, a path, an error quoting a payload) therefore cannot
/// end the line and forge another, even when logged with `%` (Display).
/// Call sites still log request values with `?` (quoted and escaped).
pub fn escaped_fields() -> impl for<'w> FormatFields<'w> + Send + Sync + 'static {
    format::debug_fn(
        |w: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug| {
            let raw = format!("{value:?}");
            let text = escape_controls(&raw);
            if field.name() == "message" {
                write!(w, "{text}")
            } else {
                write!(w, "{}={text}", field.name())
            }
        },
    )
    .delimited(" ")
}

/// `text` with every control character and line separator escaped
/// (`\n`, `\r`, `\u{1b}`, ...); anything else unchanged.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let needs = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if !text.chars().any(needs) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Runs `f` with a text-log subscriber writing into a buffer (the service's
/// own field formatter, no colours, no time) and answers what was written.
#[cfg(test)]
pub(crate) fn captured_text_logs(f: impl FnOnce()) -> String {
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .fmt_fields(escaped_fields())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buffer.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    String::from_utf8_lossy(&bytes).into_owned()
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
    // The path is the client's: logged escaped (`?`).
    let span =
        tracing::info_span!("request", request_id = %request_id, method = %method, path = ?path);
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

/// One route's requests served by this process since it started.
pub struct RouteFigures {
    pub route: String,
    pub method: String,
    pub count: u64,
    pub mean_ms: f64,
}

/// The routes this process has served, busiest first (the console's
/// operations page; the same histogram `/metrics` exports).
pub fn route_figures() -> Vec<RouteFigures> {
    use prometheus::core::Collector;
    let mut out = Vec::new();
    for family in HTTP_SECONDS.collect() {
        for m in family.get_metric() {
            let label = |name: &str| {
                m.get_label()
                    .iter()
                    .find(|l| l.name() == name)
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default()
            };
            let h = m.get_histogram();
            let count = h.get_sample_count();
            let mean_ms = match count {
                0 => 0.0,
                n => h.get_sample_sum() * 1000.0 / n as f64,
            };
            out.push(RouteFigures {
                route: label("route"),
                method: label("method"),
                count,
                mean_ms,
            });
        }
    }
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.route.cmp(&b.route)));
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("plain"), "plain");
        assert_eq!(escape_controls("a\nb\rc"), "a\\nb\\rc");
        assert_eq!(escape_controls("\u{1b}[31m"), "\\u{1b}[31m");
        assert_eq!(escape_controls("x\u{2028}y"), "x\\u{2028}y");
        assert_eq!(escape_controls("é ü"), "é ü");
    }

    #[test]
    fn a_newline_in_a_value_does_not_forge_a_log_line() {
        let forged = "customer\n2026-01-01T00:00:00Z  INFO pharmacy: admin signed in";
        let out = captured_text_logs(|| {
            // Displayed (`%`), debugged (`?`) and as a plain str: all escaped.
            tracing::info!(entity = %forged, op = ?forged, cmid = forged, "push change");
            tracing::info_span!("request", path = %forged).in_scope(|| {
                tracing::info!("request done");
            });
        });
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(!out.lines().any(|l| l.starts_with("2026")), "{out}");
        assert_eq!(out.matches("customer\\n2026").count(), 4, "{out}");
    }
}
