//! Closed-loop load: N client tasks, each sending its next request when the
//! previous one answered, for a warm-up and then a timed window. Latencies
//! go into HDR histograms (microseconds), per client, merged at the end.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;
use hdrhistogram::Histogram;
use serde::Serialize;

#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub measure_from: Instant,
    pub deadline: Instant,
}

impl Window {
    pub fn new(warmup: Duration, measure: Duration) -> Window {
        let start = Instant::now();
        Window {
            start,
            measure_from: start + warmup,
            deadline: start + warmup + measure,
        }
    }

    pub fn running(&self) -> bool {
        Instant::now() < self.deadline
    }

    pub fn counts(&self, started: Instant) -> bool {
        started >= self.measure_from && started < self.deadline
    }

    pub fn measured_secs(&self) -> f64 {
        (self.deadline - self.measure_from).as_secs_f64()
    }

    /// Seconds from the start to the timed window (for the RSS sampler).
    pub fn warmup_secs(&self) -> f64 {
        (self.measure_from - self.start).as_secs_f64()
    }
}

/// One kind of request of one client (or merged over all clients).
#[derive(Debug, Clone)]
pub struct Tally {
    pub hist: Histogram<u64>,
    pub requests: u64,
    pub ok: u64,
    pub units: u64,
    pub statuses: BTreeMap<u16, u64>,
    /// The first few error answers, for the report.
    pub samples: Vec<String>,
}

impl Default for Tally {
    #[allow(
        clippy::expect_used,
        reason = "the histogram bounds are constants, valid by construction"
    )]
    fn default() -> Tally {
        Tally {
            // 1 µs to 10 min, 3 significant digits; in range by construction.
            hist: Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("constant, valid histogram bounds"),
            requests: 0,
            ok: 0,
            units: 0,
            statuses: BTreeMap::new(),
            samples: Vec::new(),
        }
    }
}

impl Tally {
    /// Records a request that started at `started` and has just answered.
    pub fn record(&mut self, started: Instant, status: u16, units: u64) {
        let micros = started.elapsed().as_micros().clamp(1, 600_000_000) as u64;
        let _ = self.hist.record(micros);
        self.requests += 1;
        *self.statuses.entry(status).or_default() += 1;
        if (200..300).contains(&status) {
            self.ok += 1;
            self.units += units;
        }
    }

    /// Records a measured duration that is not a request's (a feed lag).
    pub fn record_micros(&mut self, micros: u64) {
        let _ = self.hist.record(micros.clamp(1, 600_000_000));
        self.requests += 1;
        self.ok += 1;
        *self.statuses.entry(200).or_default() += 1;
    }

    pub fn sample(&mut self, what: String) {
        if self.samples.len() < 5 {
            self.samples.push(what);
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        let _ = self.hist.add(&other.hist);
        self.requests += other.requests;
        self.ok += other.ok;
        self.units += other.units;
        for (s, n) in &other.statuses {
            *self.statuses.entry(*s).or_default() += n;
        }
        for s in &other.samples {
            self.sample(s.clone());
        }
    }

    pub fn summary(&self, secs: f64) -> Summary {
        let ms = |q: f64| self.hist.value_at_quantile(q) as f64 / 1000.0;
        Summary {
            requests: self.requests,
            ok: self.ok,
            per_sec: self.requests as f64 / secs,
            units_per_sec: self.units as f64 / secs,
            p50_ms: ms(0.50),
            p95_ms: ms(0.95),
            p99_ms: ms(0.99),
            max_ms: self.hist.max() as f64 / 1000.0,
            mean_ms: self.hist.mean() / 1000.0,
            statuses: self
                .statuses
                .iter()
                .map(|(s, n)| (s.to_string(), *n))
                .collect(),
            error_samples: self.samples.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub requests: u64,
    pub ok: u64,
    pub per_sec: f64,
    pub units_per_sec: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Answers by HTTP status (0 = no answer: connection error or timeout).
    pub statuses: BTreeMap<String, u64>,
    pub error_samples: Vec<String>,
}

impl Summary {
    pub fn errors(&self) -> u64 {
        self.requests - self.ok
    }
}

/// What one client saw: tallies of the timed window by request kind, what
/// it did over the whole run (warm-up included, for the effect checks), and
/// correctness failures.
#[derive(Debug, Default)]
pub struct ClientOut {
    pub tallies: BTreeMap<&'static str, Tally>,
    pub total_ok: u64,
    pub total_units: u64,
    /// Requests without an answer (their effect is unknown).
    pub total_unanswered: u64,
    pub failures: Vec<String>,
    /// Scenario-specific counters (e.g. 503 answers without Retry-After).
    pub counters: BTreeMap<&'static str, u64>,
}

impl ClientOut {
    pub fn tally(&mut self, kind: &'static str) -> &mut Tally {
        self.tallies.entry(kind).or_default()
    }

    pub fn fail(&mut self, what: String) {
        if self.failures.len() < 20 {
            self.failures.push(what);
        }
    }

    pub fn bump(&mut self, counter: &'static str, by: u64) {
        *self.counters.entry(counter).or_default() += by;
    }

    pub fn merge(&mut self, other: ClientOut) {
        for (k, t) in &other.tallies {
            self.tally(k).merge(t);
        }
        self.total_ok += other.total_ok;
        self.total_units += other.total_units;
        self.total_unanswered += other.total_unanswered;
        for f in other.failures {
            self.fail(f);
        }
        for (k, n) in other.counters {
            self.bump(k, n);
        }
    }
}

/// Runs `clients` copies of `client` to the window's deadline and merges
/// what they saw.
pub async fn drive<F, Fut>(clients: usize, window: Window, client: F) -> Result<ClientOut>
where
    F: Fn(usize, Window) -> Fut,
    Fut: Future<Output = Result<ClientOut>> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for i in 0..clients {
        set.spawn(client(i, window));
    }
    let mut all = ClientOut::default();
    while let Some(done) = set.join_next().await {
        all.merge(done??);
    }
    Ok(all)
}
