//! The graduation check: what makes the benchmark exit non-zero.

use crate::stats::Verdict;
use crate::{Report, Scenario};

/// Whether `strategy` must never lose or give up a write in `scenario`:
/// `strict`, `update`, `apply` and `guarded` always; `locked` in `argo`,
/// where all writers share one process.
pub(crate) fn must_be_safe(strategy: &str, scenario: Scenario) -> bool {
    let strategy = strategy.strip_prefix("manager-").unwrap_or(strategy);
    matches!(strategy, "strict" | "update" | "apply" | "guarded")
        || (strategy == "locked" && scenario == Scenario::Argo)
}

/// Every reason the run fails: a safe strategy that lost or gave up a
/// write, then every speed verdict against the baseline that is not "met"
/// (the command line adds the latter only when `--baseline` is named).
pub fn failures(report: &Report, scenario: Scenario) -> Vec<String> {
    let mut failures = safety_failures(report, scenario);
    failures.extend(graduation_failures(report));
    failures
}

/// A safe strategy that lost or gave up a write.
pub(crate) fn safety_failures(report: &Report, scenario: Scenario) -> Vec<String> {
    let mut failures = Vec::new();
    for r in &report.results {
        if must_be_safe(&r.strategy, scenario) && (r.lost_writes > 0 || r.failed_writes > 0) {
            failures.push(format!(
                "{} lost {} and gave up {} writes in {scenario}",
                r.strategy, r.lost_writes, r.failed_writes
            ));
        }
    }
    failures
}

/// With a baseline, every concord strategy whose writes/s ratio to it is
/// not shown (by its 95% interval, paired by round) to clear
/// `1 - max_regression/100` — "missed" when the interval lies below,
/// "undecided" when it straddles the line.
pub(crate) fn graduation_failures(report: &Report) -> Vec<String> {
    let mut failures = Vec::new();
    let Some(name) = report.baseline.as_deref() else {
        return failures;
    };
    if report.result(name).is_none() {
        failures.push(format!(
            "the baseline {name} did not run; add it to --strategies"
        ));
        return failures;
    }
    let floor = 1.0 - report.max_regression / 100.0;
    for r in &report.results {
        let (Some(verdict), Some(i)) = (r.verdict, r.vs_baseline) else {
            continue;
        };
        if verdict != Verdict::Met {
            failures.push(format!(
                "{}: {:.3}x {name} (95% interval {:.3}..{:.3} over {} rounds) against a floor of {floor:.2}: {}",
                r.strategy,
                i.ratio,
                i.lo,
                i.hi,
                i.rounds,
                verdict.as_str()
            ));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Interval;
    use crate::test_support::{report, result};

    fn judged(name: &str, lo: f64, hi: f64) -> crate::StrategyResult {
        let mut r = result(name, 100.0, 0);
        let i = Interval {
            ratio: (lo + hi) / 2.0,
            lo,
            hi,
            rounds: 5,
        };
        r.vs_baseline = Some(i);
        r.verdict = Some(i.against(0.95));
        r
    }

    #[test]
    fn only_an_interval_clearing_the_floor_passes() {
        let mut r = report(vec![
            result("lax", 100.0, 5),
            judged("strict", 0.96, 1.02),
            judged("update", 0.93, 0.99),
            judged("apply", 0.80, 0.90),
        ]);
        r.baseline = Some("lax".into());
        let f = failures(&r, Scenario::Kueue);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f[0].starts_with("update") && f[0].ends_with("undecided"));
        assert!(f[1].starts_with("apply") && f[1].ends_with("missed"));
    }

    #[test]
    fn a_safe_strategy_losing_or_giving_up_a_write_always_fails() {
        let mut gave_up = result("strict", 1.0, 0);
        gave_up.failed_writes = 1;
        let r = report(vec![
            result("update", 1.0, 1),
            result("locked", 1.0, 2),
            gave_up,
            result("lax", 1.0, 9),
        ]);
        assert_eq!(failures(&r, Scenario::Kueue).len(), 2);
        assert_eq!(failures(&r, Scenario::Argo).len(), 3);
    }

    #[test]
    fn a_missing_baseline_fails() {
        let mut r = report(vec![result("strict", 1.0, 0)]);
        r.baseline = Some("lax".into());
        assert_eq!(failures(&r, Scenario::Kueue).len(), 1);
    }
}
