//! The graduation check: what makes the benchmark exit non-zero.

use crate::race::{Report, Scenario};

/// Every reason the run fails: a safe strategy that lost a write (`strict`,
/// `update` and `apply` always; `locked` in `argo`, where all writers share
/// one process), and, with a `baseline`, any contender whose writes/s is more
/// than `max_regression` percent below the baseline's.
pub fn failures(
    report: &Report,
    scenario: Scenario,
    baseline: Option<&str>,
    max_regression: f64,
) -> Vec<String> {
    let mut failures = Vec::new();
    for r in &report.results {
        let must_be_safe = matches!(r.strategy.as_str(), "strict" | "update" | "apply")
            || (r.strategy == "locked" && scenario == Scenario::Argo);
        if must_be_safe && r.lost_writes > 0 {
            failures.push(format!(
                "{} lost {} writes in {scenario}",
                r.strategy, r.lost_writes
            ));
        }
    }
    let Some(name) = baseline else {
        return failures;
    };
    let Some(base) = report.result(name) else {
        failures.push(format!(
            "the baseline {name} did not run; add it to --strategies"
        ));
        return failures;
    };
    let floor = base.writes_per_s * (1.0 - max_regression / 100.0);
    for r in report.results.iter().filter(|r| r.strategy != name) {
        if r.writes_per_s < floor {
            failures.push(format!(
                "{} ran {:.0} writes/s, {:.1}% below {name}'s {:.0} (allowed: {max_regression}%)",
                r.strategy,
                r.writes_per_s,
                100.0 * (1.0 - r.writes_per_s / base.writes_per_s),
                base.writes_per_s
            ));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::StrategyResult;

    fn result(name: &str, writes_per_s: f64, lost_writes: u64) -> StrategyResult {
        StrategyResult {
            strategy: name.into(),
            wall_s: 1.0,
            writes_per_s,
            p50_ms: 1.0,
            p99_ms: 1.0,
            requests: 1,
            conflicts: 0,
            retries: 0,
            errors: 0,
            lost_writes,
            requests_by_verb: [0; 4],
        }
    }

    fn report(results: Vec<StrategyResult>) -> Report {
        Report {
            scenario: "kueue".into(),
            pods: 1,
            writers: 1,
            results,
        }
    }

    #[test]
    fn regression_beyond_the_limit_fails() {
        let r = report(vec![
            result("lax", 100.0, 5),
            result("strict", 94.0, 0),
            result("apply", 96.0, 0),
        ]);
        let f = failures(&r, Scenario::Kueue, Some("lax"), 5.0);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].starts_with("strict"));
    }

    #[test]
    fn a_safe_strategy_losing_a_write_always_fails() {
        let r = report(vec![result("update", 1.0, 1), result("locked", 1.0, 2)]);
        assert_eq!(failures(&r, Scenario::Kueue, None, 5.0).len(), 1);
        assert_eq!(failures(&r, Scenario::Argo, None, 5.0).len(), 2);
    }

    #[test]
    fn a_missing_baseline_fails() {
        let r = report(vec![result("strict", 1.0, 0)]);
        assert_eq!(failures(&r, Scenario::Kueue, Some("lax"), 5.0).len(), 1);
    }
}
