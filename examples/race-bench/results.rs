//! The figures of one run, in the shape `results.json` has.

use concord::strategies::Verb;
use serde::{Deserialize, Serialize};

use crate::race::controller::Run;
use crate::race::tally::Counts;

/// What one contender's writes cost and what they lost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyResult {
    /// The contender: a strategy name, `raw` or `json-index`.
    pub strategy: String,
    /// Seconds from the controller's first write to its last.
    pub wall_s: f64,
    /// Logical writes per second of `wall_s`.
    pub writes_per_s: f64,
    /// Median latency of a logical write (retries and requeues included).
    pub p50_ms: f64,
    /// 99th-percentile latency of a logical write.
    pub p99_ms: f64,
    /// HTTP requests the controller sent, every verb.
    pub requests: u64,
    /// `409 Conflict` answers (and failed JSON-patch guards).
    pub conflicts: u64,
    /// Attempts after the first: strategy retries plus controller requeues.
    pub retries: u64,
    /// Attempts that returned an error.
    pub errors: u64,
    /// Invariants broken on the final objects.
    pub lost_writes: u64,
    /// Requests by verb (see [`Verb::index`]); not part of `results.json`.
    #[serde(skip)]
    pub requests_by_verb: [u64; 4],
}

impl StrategyResult {
    /// The figures of `contender` from its run, counters and verdict.
    pub(crate) fn new(contender: &str, run: &Run, counts: Counts, lost_writes: u64) -> Self {
        let mut sorted = run.latencies_micros.clone();
        sorted.sort_unstable();
        let wall_s = run.wall.as_secs_f64();
        let writes = sorted.len() as f64;
        StrategyResult {
            strategy: contender.to_owned(),
            wall_s: round(wall_s, 3),
            writes_per_s: round(if wall_s > 0.0 { writes / wall_s } else { 0.0 }, 1),
            p50_ms: round(percentile(&sorted, 0.50), 2),
            p99_ms: round(percentile(&sorted, 0.99), 2),
            requests: counts.total(),
            conflicts: counts.conflicts,
            retries: counts.retries + run.requeues,
            errors: run.errors,
            lost_writes,
            requests_by_verb: counts.requests,
        }
    }

    /// "get 12, patch 10000": the non-zero request counts by verb.
    pub fn verbs(&self) -> String {
        let parts: Vec<String> = Verb::ALL
            .iter()
            .filter(|v| self.requests_by_verb[v.index()] > 0)
            .map(|v| format!("{} {}", v.as_str(), self.requests_by_verb[v.index()]))
            .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(", ")
        }
    }
}

/// A whole run: the scenario, its size, and one result per contender.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// `kueue`, `argo` or `hotspot`.
    pub scenario: String,
    /// The `--pods` figure.
    pub pods: u64,
    /// The `--writers` figure.
    pub writers: u64,
    /// One entry per contender, in the order they ran.
    pub results: Vec<StrategyResult>,
}

impl Report {
    /// The result of `strategy`, if it ran.
    pub fn result(&self, strategy: &str) -> Option<&StrategyResult> {
        self.results.iter().find(|r| r.strategy == strategy)
    }
}

/// The nearest-rank `q` quantile of `sorted` microseconds, in milliseconds.
fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted
        .get(rank - 1)
        .map_or(0.0, |&us| f64::from(us) / 1000.0)
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile(&sorted, 0.5), 50.0);
        assert_eq!(percentile(&sorted, 0.99), 99.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
