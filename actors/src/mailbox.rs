//! One actor's admission and what `GET /ops/actors` reports about it.
//!
//! - Admission is a semaphore of `capacity` permits whose size changes at
//!   run time: growing adds permits; shrinking forgets the free ones at once
//!   and retires the ones in use as their messages end (a debt the releasing
//!   permits pay), so the number of messages admitted never stays above the
//!   new capacity longer than the messages already admitted take.
//! - The actor's metric series (`kind`, `branch`, `device` labels) are
//!   resolved once, when the actor starts.
//! - A small rolling window keeps the refusals of the last minute (one slot
//!   per second) and the last [`MAX_SAMPLES`] mailbox waits of the last
//!   minute, for the p99: memory per actor is bounded.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus::{Histogram, IntCounter, IntGauge};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

use crate::metrics;

/// How far back the window looks.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Most wait samples one actor keeps.
pub const MAX_SAMPLES: usize = 512;
const SLOTS: usize = 60;

/// Seconds are counted from here, so refusal slots need no wall clock.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn second_of(t: Instant) -> u64 {
    t.saturating_duration_since(*EPOCH).as_secs()
}

/// Refusals per second for the last minute and recent mailbox waits.
#[derive(Debug)]
pub struct Window {
    /// `(second, refusals in it)`, indexed by `second % SLOTS`.
    refusals: [(u64, u64); SLOTS],
    waits: VecDeque<(Instant, Duration)>,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            refusals: [(u64::MAX, 0); SLOTS],
            waits: VecDeque::new(),
        }
    }
}

impl Window {
    pub fn refused(&mut self, now: Instant) {
        let s = second_of(now);
        let slot = &mut self.refusals[(s % SLOTS as u64) as usize];
        if slot.0 != s {
            *slot = (s, 0);
        }
        slot.1 += 1;
    }

    /// Refusals within the last [`WINDOW`] (to the second).
    pub fn refusals(&self, now: Instant) -> u64 {
        let s = second_of(now);
        self.refusals
            .iter()
            .filter(|(at, _)| *at != u64::MAX && *at <= s && s - *at < SLOTS as u64)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn waited(&mut self, now: Instant, wait: Duration) {
        if self.waits.len() >= MAX_SAMPLES {
            self.waits.pop_front();
        }
        self.waits.push_back((now, wait));
    }

    /// The 99th percentile of the waits of the last [`WINDOW`] (nearest
    /// rank), and how many samples it was taken from.
    pub fn p99_wait(&self, now: Instant) -> (Option<Duration>, usize) {
        let mut recent: Vec<Duration> = self
            .waits
            .iter()
            .filter(|(at, _)| now.saturating_duration_since(*at) <= WINDOW)
            .map(|(_, w)| *w)
            .collect();
        if recent.is_empty() {
            return (None, 0);
        }
        recent.sort_unstable();
        let rank = (recent.len() * 99).div_ceil(100).max(1);
        (Some(recent[rank - 1]), recent.len())
    }
}

/// The actor's own series in the process-wide metrics registry.
struct Series {
    depth: IntGauge,
    capacity: IntGauge,
    rejected: IntCounter,
    wait: Histogram,
}

/// Admission, depth and the rolling window of one actor. It outlives the
/// actor it was made for: a replacement actor (after a closed mailbox)
/// keeps it.
pub struct Mailbox {
    permits: Arc<Semaphore>,
    capacity: AtomicUsize,
    /// Permits still to retire when they come back (a shrink found them in use).
    owed: AtomicUsize,
    resizing: Mutex<()>,
    /// Messages admitted and not started, plus requests waiting in a queue
    /// the actor drains in batches.
    depth: AtomicI64,
    window: Mutex<Window>,
    series: Series,
}

/// A permit to put one message in the mailbox; released (or retired, when
/// the mailbox shrank meanwhile) when dropped.
pub struct Permit {
    inner: Option<OwnedSemaphorePermit>,
    mailbox: Arc<Mailbox>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(permit) = self.inner.take() {
            if self.mailbox.take_owed(1) == 1 {
                permit.forget();
            }
        }
    }
}

impl Mailbox {
    /// `kind` is `branch` or `device`; the key goes to the matching label.
    pub fn new(kind: &str, key: Uuid, capacity: usize) -> Mailbox {
        let capacity = capacity.max(1);
        let key = key.to_string();
        let (branch, device) = match kind {
            "device" => ("", key.as_str()),
            _ => (key.as_str(), ""),
        };
        let labels = [kind, branch, device];
        let series = Series {
            depth: metrics::MAILBOX_DEPTH.with_label_values(&labels),
            capacity: metrics::MAILBOX_CAPACITY.with_label_values(&labels),
            rejected: metrics::MAILBOX_REJECTED.with_label_values(&labels),
            wait: metrics::MAILBOX_WAIT.with_label_values(&labels),
        };
        series.capacity.set(capacity as i64);
        Mailbox {
            permits: Arc::new(Semaphore::new(capacity)),
            capacity: AtomicUsize::new(capacity),
            owed: AtomicUsize::new(0),
            resizing: Mutex::new(()),
            depth: AtomicI64::new(0),
            window: Mutex::new(Window::default()),
            series,
        }
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Acquire)
    }

    pub fn depth(&self) -> i64 {
        self.depth.load(Ordering::Relaxed)
    }

    /// Takes up to `n` of the debt; returns how much it took.
    fn take_owed(&self, n: usize) -> usize {
        let mut owed = self.owed.load(Ordering::Acquire);
        loop {
            let take = owed.min(n);
            if take == 0 {
                return 0;
            }
            match self.owed.compare_exchange_weak(
                owed,
                owed - take,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return take,
                Err(now) => owed = now,
            }
        }
    }

    /// Sets the number of messages the mailbox admits. Messages already
    /// admitted stay; a smaller capacity admits nothing new until the
    /// messages in it fall below it.
    pub fn resize(&self, capacity: usize) {
        let capacity = capacity.max(1);
        let _one_at_a_time = self.resizing.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.capacity.swap(capacity, Ordering::AcqRel);
        if capacity > old {
            let grow = capacity - old;
            let cancelled = self.take_owed(grow);
            self.permits.add_permits(grow - cancelled);
        } else if capacity < old {
            let shrink = old - capacity;
            let gone = self.permits.forget_permits(shrink);
            self.owed.fetch_add(shrink - gone, Ordering::AcqRel);
            // Permits released between the two steps went back to the
            // semaphore unretired: retire them now.
            let owed = self.take_owed(usize::MAX);
            if owed > 0 {
                let gone = self.permits.forget_permits(owed);
                self.owed.fetch_add(owed - gone, Ordering::AcqRel);
            }
        }
        self.series.capacity.set(capacity as i64);
    }

    /// A permit now, or `None` when the mailbox is full (the refusal is
    /// counted).
    pub fn try_admit(self: &Arc<Self>) -> Option<Permit> {
        match self.permits.clone().try_acquire_owned() {
            Ok(p) => Some(Permit {
                inner: Some(p),
                mailbox: self.clone(),
            }),
            Err(_) => {
                self.refused();
                None
            }
        }
    }

    /// A permit once there is room; `None` only if the semaphore closed.
    pub async fn admit(self: &Arc<Self>) -> Option<Permit> {
        let p = self.permits.clone().acquire_owned().await.ok()?;
        Some(Permit {
            inner: Some(p),
            mailbox: self.clone(),
        })
    }

    /// Counts one refusal (a 503) against this actor.
    pub fn refused(&self) {
        self.series.rejected.inc();
        self.window().refused(Instant::now());
    }

    /// `n` more requests wait for this actor (negative: fewer).
    pub fn queued(&self, n: i64) {
        self.depth.fetch_add(n, Ordering::Relaxed);
        self.series.depth.add(n);
    }

    /// A request waited `wait` before the actor took it.
    pub fn waited(&self, wait: Duration) {
        self.series.wait.observe(wait.as_secs_f64());
        self.window().waited(Instant::now(), wait);
    }

    /// Refusals of the last minute, the p99 wait of the last minute and the
    /// number of waits it was taken from.
    pub fn recent(&self) -> (u64, Option<Duration>, usize) {
        let now = Instant::now();
        let w = self.window();
        let (p99, samples) = w.p99_wait(now);
        (w.refusals(now), p99, samples)
    }

    /// Permits free right now.
    pub fn free(&self) -> usize {
        self.permits.available_permits()
    }

    /// Messages holding a place now (waiting or being handled); may read
    /// high for a moment while a resize is under way.
    pub fn admitted(&self) -> usize {
        (self.capacity() + self.owed.load(Ordering::Acquire)).saturating_sub(self.free())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mailbox(capacity: usize) -> Arc<Mailbox> {
        Arc::new(Mailbox::new("branch", Uuid::now_v7(), capacity))
    }

    #[test]
    fn admits_up_to_capacity_and_refuses_the_next() {
        let m = mailbox(2);
        let a = m.try_admit().unwrap();
        let _b = m.try_admit().unwrap();
        assert!(m.try_admit().is_none());
        drop(a);
        assert!(m.try_admit().is_some());
        assert_eq!(m.recent().0, 1);
    }

    #[test]
    fn growing_admits_more_at_once() {
        let m = mailbox(1);
        let _a = m.try_admit().unwrap();
        assert!(m.try_admit().is_none());
        m.resize(3);
        let _b = m.try_admit().unwrap();
        let _c = m.try_admit().unwrap();
        assert!(m.try_admit().is_none());
        assert_eq!(m.capacity(), 3);
    }

    #[test]
    fn shrinking_below_the_messages_in_use_retires_permits_as_they_return() {
        let m = mailbox(4);
        let held: Vec<Permit> = (0..4).map(|_| m.try_admit().unwrap()).collect();
        m.resize(1);
        assert_eq!(m.free(), 0);
        let mut held = held.into_iter();
        // Three of the four returning permits are retired.
        for _ in 0..3 {
            drop(held.next());
            assert_eq!(m.free(), 0);
            assert!(m.try_admit().is_none());
        }
        drop(held.next());
        assert_eq!(m.free(), 1);
        let _one = m.try_admit().unwrap();
        assert!(m.try_admit().is_none());
    }

    #[test]
    fn growing_again_cancels_the_debt_first() {
        let m = mailbox(4);
        let held: Vec<Permit> = (0..4).map(|_| m.try_admit().unwrap()).collect();
        m.resize(1); // owes 3
        m.resize(3); // owes 1
        drop(held);
        assert_eq!(m.free(), 3);
        m.resize(5);
        assert_eq!(m.free(), 5);
        m.resize(2);
        assert_eq!(m.free(), 2);
    }

    #[test]
    fn refusals_older_than_a_minute_drop_out() {
        let mut w = Window::default();
        let t0 = *EPOCH + Duration::from_secs(1000);
        w.refused(t0);
        w.refused(t0);
        w.refused(t0 + Duration::from_secs(30));
        assert_eq!(w.refusals(t0 + Duration::from_secs(30)), 3);
        assert_eq!(w.refusals(t0 + Duration::from_secs(61)), 1);
        assert_eq!(w.refusals(t0 + Duration::from_secs(200)), 0);
        // A slot reused a minute later starts from zero.
        w.refused(t0 + Duration::from_secs(60));
        assert_eq!(w.refusals(t0 + Duration::from_secs(60)), 2);
    }

    #[test]
    fn p99_is_the_nearest_rank_of_the_last_minute() {
        let mut w = Window::default();
        let t0 = Instant::now();
        assert_eq!(w.p99_wait(t0), (None, 0));
        for ms in 1..=100 {
            w.waited(t0, Duration::from_millis(ms));
        }
        assert_eq!(w.p99_wait(t0), (Some(Duration::from_millis(99)), 100));
        w.waited(t0, Duration::from_millis(5000));
        assert_eq!(w.p99_wait(t0).0, Some(Duration::from_millis(100)));
        // Samples older than the window do not count.
        let later = t0 + WINDOW + Duration::from_secs(1);
        w.waited(later, Duration::from_millis(7));
        assert_eq!(w.p99_wait(later), (Some(Duration::from_millis(7)), 1));
    }

    #[test]
    fn the_sample_buffer_is_bounded() {
        let mut w = Window::default();
        let t0 = Instant::now();
        for i in 0..(MAX_SAMPLES * 3) {
            w.waited(t0, Duration::from_micros(i as u64));
        }
        assert_eq!(w.waits.len(), MAX_SAMPLES);
    }
}
