use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::{Fallback, Outcome, Verb};

/// Upper bounds, in seconds, of the write-latency histogram buckets (the
/// Prometheus client defaults); a final `+Inf` bucket follows.
pub const LATENCY_BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Lock-free counters for the writes of one strategy on one resource.
///
/// The framework keeps one per (strategy, resource) pair, hands it to the
/// [`Target`](crate::Target) and exports [`WriteMetrics::snapshot`] as
/// Prometheus text. Recording is a handful of relaxed atomic adds.
///
/// ```
/// use concord_strategies::WriteMetrics;
/// let metrics = WriteMetrics::default();
/// assert_eq!(metrics.snapshot().writes, 0);
/// ```
#[derive(Debug, Default)]
pub struct WriteMetrics {
    writes: AtomicU64,
    errors: AtomicU64,
    unchanged: AtomicU64,
    gone: AtomicU64,
    fell_back: AtomicU64,
    fallbacks: [AtomicU64; Fallback::ALL.len()],
    rereads_from_cache: AtomicU64,
    rereads_by_get: AtomicU64,
    rebased: AtomicU64,
    requests: [AtomicU64; Verb::ALL.len()],
    conflicts: AtomicU64,
    retries: AtomicU64,
    throttled: AtomicU64,
    latency_buckets: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    latency_micros: AtomicU64,
}

/// A point-in-time copy of [`WriteMetrics`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Writes attempted.
    pub writes: u64,
    /// Writes that ended in an error.
    pub errors: u64,
    /// Writes that needed no request.
    pub unchanged: u64,
    /// Finalizer removals that found the object gone.
    pub gone: u64,
    /// Writes that fell back to another request than their strategy's
    /// usual one, for any reason.
    pub fell_back: u64,
    /// Fallbacks by reason (see [`Fallback::index`]).
    pub fallbacks: [u64; Fallback::ALL.len()],
    /// Re-reads after a conflict served from a watch cache.
    pub rereads_from_cache: u64,
    /// Re-reads after a conflict that sent a `GET`.
    pub rereads_by_get: u64,
    /// Writes that started from the copy this process's previous write of
    /// the object stored (see [`Strict`](crate::Strict), "Taking turns").
    pub rebased: u64,
    /// Requests by verb (see [`Verb::index`]).
    pub requests: [u64; Verb::ALL.len()],
    /// Conflicts met.
    pub conflicts: u64,
    /// Retries made.
    pub retries: u64,
    /// `429` answers met.
    pub throttled: u64,
    /// Non-cumulative write counts per [`LATENCY_BUCKETS`] bucket, `+Inf`
    /// last.
    pub latency_buckets: [u64; LATENCY_BUCKETS.len() + 1],
    /// Sum of write latencies in microseconds.
    pub latency_micros: u64,
}

impl MetricsSnapshot {
    /// Requests sent with `verb`.
    pub fn requests(&self, verb: Verb) -> u64 {
        self.requests[verb.index()]
    }

    /// Writes that fell back for `reason`.
    pub fn fallbacks(&self, reason: Fallback) -> u64 {
        self.fallbacks[reason.index()]
    }

    /// Requests sent in all.
    pub fn total_requests(&self) -> u64 {
        self.requests.iter().sum()
    }
}

impl WriteMetrics {
    /// Count one write that ended with `outcome`; `failed` when it returned
    /// an error.
    pub fn record(&self, outcome: &Outcome, failed: bool) {
        self.writes.fetch_add(1, Relaxed);
        add_if(&self.errors, failed);
        add_if(&self.unchanged, outcome.unchanged);
        add_if(&self.gone, outcome.gone);
        add_if(&self.fell_back, outcome.fell_back);
        if let Some(reason) = outcome.fallback {
            self.fallbacks[reason.index()].fetch_add(1, Relaxed);
        }
        self.rereads_from_cache
            .fetch_add(u64::from(outcome.rereads_from_cache), Relaxed);
        self.rereads_by_get
            .fetch_add(u64::from(outcome.rereads_by_get), Relaxed);
        self.rebased
            .fetch_add(u64::from(outcome.rebased_on_own_write), Relaxed);
        for verb in Verb::ALL {
            let n = outcome.requests(verb);
            if n > 0 {
                self.requests[verb.index()].fetch_add(u64::from(n), Relaxed);
            }
        }
        self.conflicts
            .fetch_add(u64::from(outcome.conflicts), Relaxed);
        self.retries.fetch_add(u64::from(outcome.retries), Relaxed);
        self.throttled
            .fetch_add(u64::from(outcome.throttled), Relaxed);
        self.latency_buckets[bucket(outcome.elapsed)].fetch_add(1, Relaxed);
        let micros = u64::try_from(outcome.elapsed.as_micros()).unwrap_or(u64::MAX);
        self.latency_micros.fetch_add(micros, Relaxed);
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> MetricsSnapshot {
        MetricsSnapshot {
            writes: self.writes.load(Relaxed),
            errors: self.errors.load(Relaxed),
            unchanged: self.unchanged.load(Relaxed),
            gone: self.gone.load(Relaxed),
            fell_back: self.fell_back.load(Relaxed),
            fallbacks: std::array::from_fn(|i| self.fallbacks[i].load(Relaxed)),
            rereads_from_cache: self.rereads_from_cache.load(Relaxed),
            rereads_by_get: self.rereads_by_get.load(Relaxed),
            rebased: self.rebased.load(Relaxed),
            requests: std::array::from_fn(|i| self.requests[i].load(Relaxed)),
            conflicts: self.conflicts.load(Relaxed),
            retries: self.retries.load(Relaxed),
            throttled: self.throttled.load(Relaxed),
            latency_buckets: std::array::from_fn(|i| self.latency_buckets[i].load(Relaxed)),
            latency_micros: self.latency_micros.load(Relaxed),
        }
    }
}

fn add_if(counter: &AtomicU64, yes: bool) {
    if yes {
        counter.fetch_add(1, Relaxed);
    }
}

fn bucket(elapsed: Duration) -> usize {
    let secs = elapsed.as_secs_f64();
    LATENCY_BUCKETS
        .iter()
        .position(|bound| secs <= *bound)
        .unwrap_or(LATENCY_BUCKETS.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_featuregates::StrategyName;

    #[test]
    fn record_counts_requests_conflicts_and_latency() {
        let metrics = WriteMetrics::default();
        let mut outcome = Outcome::new(StrategyName::Strict);
        outcome.requests[Verb::Patch.index()] = 2;
        outcome.requests[Verb::Get.index()] = 1;
        outcome.conflicts = 1;
        outcome.retries = 1;
        outcome.elapsed = Duration::from_millis(30);
        metrics.record(&outcome, false);
        let snap = metrics.snapshot();
        assert_eq!((snap.writes, snap.conflicts, snap.retries), (1, 1, 1));
        assert_eq!(snap.requests(Verb::Patch), 2);
        assert_eq!(snap.total_requests(), 3);
        assert_eq!(
            snap.latency_buckets[3], 1,
            "30 ms falls in the 50 ms bucket"
        );
    }

    #[test]
    fn latency_beyond_the_last_bound_lands_in_inf() {
        assert_eq!(bucket(Duration::from_secs(60)), LATENCY_BUCKETS.len());
    }
}
