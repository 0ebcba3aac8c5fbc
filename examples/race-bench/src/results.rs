//! The figures of one run, in the shape `results.json` has.

use std::time::Duration;

use concord::strategies::Verb;
use serde::{Deserialize, Serialize};

use crate::stats::{Interval, Verdict, median};
use crate::tally::Counts;

/// What one contender's writes cost and what they lost, over every round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrategyResult {
    /// The contender: a strategy name, `raw`, `json-index`, `ceiling` or
    /// `controller-runtime`.
    pub strategy: String,
    /// Seconds of write phase, summed over the rounds.
    pub wall_s: f64,
    /// Successful logical writes per second of `wall_s`.
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
    /// Broken invariants on the final objects: an expected finalizer or
    /// label missing (a foreign write vanished, or a write reported
    /// successful is not there), an unexpected finalizer left behind.
    pub lost_writes: u64,
    /// Logical writes asked for.
    pub writes: u64,
    /// Logical writes the controller gave up on (requeues exhausted or a
    /// final error); not counted as lost, not counted in `writes_per_s`.
    pub failed_writes: u64,
    /// Logical writes raced for certain (`--race lockstep`).
    pub raced_writes: u64,
    /// `apply` removals sent as its guarded JSON-patch fallback.
    pub fallbacks: u64,
    /// Re-reads after a conflict served from concord's watch cache (no
    /// request); `None` for contenders that are not concord. The direct
    /// concord contenders have no such cache, so theirs is 0.
    #[serde(default)]
    pub rereads_from_cache: Option<u64>,
    /// Re-reads after a conflict sent as a `GET` (concord contenders).
    #[serde(default)]
    pub rereads_by_get: Option<u64>,
    /// Client CPU time per logical write, in milliseconds: the process's
    /// user plus system time over the write phase (for the Go peer, its
    /// own process) divided by `writes`.
    pub cpu_ms_per_write: Option<f64>,
    /// The highest peak resident set size of one round, in MiB (for the Go
    /// peer, its own process).
    pub peak_rss_mib: Option<f64>,
    /// `requests` divided by `writes`.
    #[serde(default)]
    pub requests_per_write: f64,
    /// HTTP body bytes the contender's clients sent over its write phases
    /// (its watch cache and its writes; the other controller's excluded),
    /// divided by `writes`.
    #[serde(default)]
    pub bytes_sent_per_write: Option<f64>,
    /// HTTP body bytes those clients received (watch events included),
    /// divided by `writes`.
    #[serde(default)]
    pub bytes_received_per_write: Option<f64>,
    /// CPU time of the API server process (`--server-pid`, or the embedded
    /// control plane's kube-apiserver and etcd) over the contender's write
    /// phases, in milliseconds per write; `None` when that process is not
    /// known.
    #[serde(default)]
    pub server_cpu_ms_per_write: Option<f64>,
    /// The round count after which `verdict` was decided; `None` while
    /// undecided or unjudged.
    #[serde(default)]
    pub decided_after_rounds: Option<u64>,
    /// Successful writes/s of each round, in round order.
    pub rounds_writes_per_s: Vec<f64>,
    /// The median of `rounds_writes_per_s`.
    pub median_writes_per_s: f64,
    /// `writes_per_s` divided by `ceiling`'s, when `ceiling` ran.
    pub fraction_of_ceiling: Option<f64>,
    /// The ratio to the `--baseline`'s writes/s, paired by round, with its
    /// 95% interval.
    pub vs_baseline: Option<Interval>,
    /// For a `manager-*` contender: its writes/s ratio to the direct call
    /// of the same strategy, paired by round; `1 - ratio` is the
    /// framework's overhead.
    pub vs_direct: Option<Interval>,
    /// The client's CPU milliseconds per write of each round, in round
    /// order; empty when a round's CPU time is not known.
    #[serde(default)]
    pub rounds_cpu_ms_per_write: Vec<f64>,
    /// For a `manager-*` contender: its client CPU per write against the
    /// direct call's, paired by round (above 1: the framework costs more).
    #[serde(default)]
    pub cpu_vs_direct: Option<Interval>,
    /// What `vs_baseline` says about `1 - max_regression`, for the concord
    /// strategies the graduation check judges.
    pub verdict: Option<Verdict>,
    /// Requests by verb (see [`Verb::index`]); not part of `results.json`.
    #[serde(skip)]
    pub requests_by_verb: [u64; 4],
}

/// What one contender did in one round.
#[derive(Clone, Debug, Default)]
pub(crate) struct RoundFigures {
    pub(crate) wall: Duration,
    pub(crate) latencies_micros: Vec<u32>,
    pub(crate) writes: u64,
    pub(crate) succeeded: u64,
    pub(crate) failed: u64,
    pub(crate) errors: u64,
    pub(crate) requeues: u64,
    pub(crate) raced: u64,
    pub(crate) counts: Counts,
    pub(crate) lost: u64,
    pub(crate) cpu_ms: Option<f64>,
    pub(crate) peak_rss_kib: Option<u64>,
    /// Body bytes sent and received by the contender's clients.
    pub(crate) bytes: Option<crate::wire::Bytesum>,
    /// CPU time of the API server process over the phase.
    pub(crate) server_cpu_ms: Option<f64>,
}

impl RoundFigures {
    /// Successful writes per second of this round.
    pub(crate) fn writes_per_s(&self) -> f64 {
        let wall = self.wall.as_secs_f64();
        if wall > 0.0 {
            self.succeeded as f64 / wall
        } else {
            0.0
        }
    }
}

impl StrategyResult {
    /// The figures of `contender` from its rounds.
    pub(crate) fn from_rounds(contender: &str, rounds: &[RoundFigures]) -> Self {
        let mut sorted: Vec<u32> = rounds
            .iter()
            .flat_map(|r| r.latencies_micros.iter().copied())
            .collect();
        sorted.sort_unstable();
        let sum = |f: fn(&RoundFigures) -> u64| rounds.iter().map(f).sum::<u64>();
        let wall_s: f64 = rounds.iter().map(|r| r.wall.as_secs_f64()).sum();
        let writes = sum(|r| r.writes);
        let succeeded = sum(|r| r.succeeded);
        let cpu: Option<f64> = rounds.iter().map(|r| r.cpu_ms).sum();
        let server_cpu: Option<f64> = rounds.iter().map(|r| r.server_cpu_ms).sum();
        let sent: Option<u64> = rounds.iter().map(|r| r.bytes.map(|b| b.sent)).sum();
        let received: Option<u64> = rounds.iter().map(|r| r.bytes.map(|b| b.received)).sum();
        let per_write =
            |total: f64, digits| (writes > 0).then(|| round(total / writes as f64, digits));
        let per_round: Vec<f64> = rounds.iter().map(|r| round(r.writes_per_s(), 1)).collect();
        let mut by_verb = [0; 4];
        for r in rounds {
            for (total, n) in by_verb.iter_mut().zip(r.counts.requests) {
                *total += n;
            }
        }
        StrategyResult {
            strategy: contender.to_owned(),
            wall_s: round(wall_s, 3),
            writes_per_s: round(
                if wall_s > 0.0 {
                    succeeded as f64 / wall_s
                } else {
                    0.0
                },
                1,
            ),
            p50_ms: round(percentile(&sorted, 0.50), 2),
            p99_ms: round(percentile(&sorted, 0.99), 2),
            requests: by_verb.iter().sum(),
            conflicts: sum(|r| r.counts.conflicts),
            retries: sum(|r| r.counts.retries + r.requeues),
            errors: sum(|r| r.errors),
            lost_writes: sum(|r| r.lost),
            writes,
            failed_writes: sum(|r| r.failed),
            raced_writes: sum(|r| r.raced),
            fallbacks: sum(|r| r.counts.fallbacks),
            rereads_from_cache: rounds.iter().map(|r| r.counts.cache_rereads).sum(),
            rereads_by_get: rounds.iter().map(|r| r.counts.get_rereads).sum(),
            cpu_ms_per_write: cpu
                .filter(|_| writes > 0)
                .map(|ms| round(ms / writes as f64, 3)),
            peak_rss_mib: rounds
                .iter()
                .filter_map(|r| r.peak_rss_kib)
                .max()
                .map(|kib| round(kib as f64 / 1024.0, 1)),
            requests_per_write: per_write(by_verb.iter().sum::<u64>() as f64, 3).unwrap_or(0.0),
            bytes_sent_per_write: sent.and_then(|b| per_write(b as f64, 0)),
            bytes_received_per_write: received.and_then(|b| per_write(b as f64, 0)),
            server_cpu_ms_per_write: server_cpu.and_then(|ms| per_write(ms, 3)),
            decided_after_rounds: None,
            median_writes_per_s: round(median(&per_round), 1),
            rounds_writes_per_s: per_round,
            fraction_of_ceiling: None,
            vs_baseline: None,
            vs_direct: None,
            rounds_cpu_ms_per_write: rounds
                .iter()
                .map(|r| {
                    r.cpu_ms
                        .filter(|_| r.writes > 0)
                        .map(|ms| ms / r.writes as f64)
                })
                .collect::<Option<Vec<f64>>>()
                .unwrap_or_default(),
            cpu_vs_direct: None,
            verdict: None,
            requests_by_verb: by_verb,
        }
    }

    /// "get 12, patch 10000": the non-zero request counts by verb.
    pub fn verbs(&self) -> String {
        // The benchmark's writes patch, put, apply and get; it neither
        // creates nor deletes through a writer.
        let parts: Vec<String> = Verb::ALL
            .iter()
            .filter_map(|v| {
                let n = *self.requests_by_verb.get(v.index())?;
                (n > 0).then(|| format!("{} {n}", v.as_str()))
            })
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
    /// The `--pods` figure: pods per contender over all rounds.
    pub pods: u64,
    /// The `--writers` figure.
    pub writers: u64,
    /// Rounds made.
    pub rounds: u64,
    /// `fixed` (`--rounds`) or `until-decided`.
    #[serde(default)]
    pub stopping: String,
    /// The most rounds the run could make.
    #[serde(default)]
    pub max_rounds: u64,
    /// The error rate of one look at the intervals: 0.05 split evenly over
    /// the looks the run could make (Bonferroni); every interval in the
    /// report is at this level.
    #[serde(default)]
    pub alpha_per_look: f64,
    /// Why the run made no more rounds: `fixed`, `decided`, `max-rounds`
    /// or `max-minutes`.
    #[serde(default)]
    pub stopped_because: String,
    /// The process whose CPU time is `server_cpu_ms_per_write`, if any.
    #[serde(default)]
    pub server_process: Option<String>,
    /// The `manager-*` contenders' cache layout (`--cache-layout`), when
    /// one of them ran.
    #[serde(default)]
    pub manager_cache: Option<String>,
    /// Pods per contender per round.
    pub pods_per_round: u64,
    /// `lockstep` or `random`.
    pub race: String,
    /// The `--race-intensity` figure (lockstep only).
    pub race_intensity: f64,
    /// The `--seed` figure.
    pub seed: u64,
    /// The `--baseline` contender, if any.
    pub baseline: Option<String>,
    /// The `--max-regression` figure, in percent.
    pub max_regression: f64,
    /// The contenders' order in each round.
    pub order: Vec<Vec<String>>,
    /// One entry per contender.
    pub results: Vec<StrategyResult>,
    /// The comparisons the project's targets name, where both contenders ran.
    #[serde(default)]
    pub targets: Vec<crate::TargetCheck>,
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

pub(crate) fn round(x: f64, digits: i32) -> f64 {
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

    #[test]
    fn writes_per_s_counts_successful_writes_only() {
        let round = RoundFigures {
            wall: Duration::from_secs(2),
            writes: 100,
            succeeded: 60,
            failed: 40,
            cpu_ms: Some(50.0),
            ..RoundFigures::default()
        };
        let r = StrategyResult::from_rounds("json-index", &[round.clone(), round]);
        assert_eq!(r.server_cpu_ms_per_write, None, "not measured is not 0");
        assert_eq!(r.writes_per_s, 30.0);
        assert_eq!(r.rounds_writes_per_s, [30.0, 30.0]);
        assert_eq!((r.writes, r.failed_writes, r.lost_writes), (200, 80, 0));
        assert_eq!(r.cpu_ms_per_write, Some(0.5));
        assert_eq!(r.rounds_cpu_ms_per_write, [0.5, 0.5]);
        let unknown = RoundFigures {
            cpu_ms: None,
            ..RoundFigures::default()
        };
        let r = StrategyResult::from_rounds("peer", &[unknown.clone(), unknown]);
        assert!(r.rounds_cpu_ms_per_write.is_empty(), "no CPU, no rounds");
    }
}
