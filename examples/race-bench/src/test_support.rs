//! Small reports for unit tests.

use crate::{Report, StrategyResult};

/// A result with the given writes/s and lost writes, everything else zero.
pub(crate) fn result(name: &str, writes_per_s: f64, lost_writes: u64) -> StrategyResult {
    StrategyResult {
        strategy: name.into(),
        wall_s: 1.0,
        writes_per_s,
        p50_ms: 1.0,
        p99_ms: 2.0,
        requests: 1,
        conflicts: 0,
        retries: 0,
        errors: 0,
        lost_writes,
        writes: 1,
        failed_writes: 0,
        raced_writes: 0,
        fallbacks: 0,
        rereads_from_cache: None,
        rereads_by_get: None,
        cpu_ms_per_write: Some(0.1),
        peak_rss_mib: Some(30.0),
        requests_per_write: 1.0,
        bytes_sent_per_write: Some(100.0),
        bytes_received_per_write: Some(2000.0),
        server_cpu_ms_per_write: None,
        decided_after_rounds: None,
        rounds_writes_per_s: vec![writes_per_s],
        median_writes_per_s: writes_per_s,
        fraction_of_ceiling: None,
        vs_baseline: None,
        vs_direct: None,
        rounds_cpu_ms_per_write: Vec::new(),
        cpu_vs_direct: None,
        verdict: None,
        requests_by_verb: [0; 4],
    }
}

/// A `kueue` report of `results`, without a baseline.
pub(crate) fn report(results: Vec<StrategyResult>) -> Report {
    Report {
        scenario: "kueue".into(),
        pods: 1,
        writers: 1,
        rounds: 1,
        stopping: "fixed".into(),
        max_rounds: 1,
        alpha_per_look: 0.05,
        stopped_because: "fixed".into(),
        server_process: None,
        manager_cache: None,
        pods_per_round: 1,
        race: "lockstep".into(),
        race_intensity: 0.75,
        seed: 1,
        baseline: None,
        max_regression: 5.0,
        order: vec![],
        results,
        targets: vec![],
    }
}
