//! The throughput comparisons the project's targets name, computed in every
//! run that has both contenders: each a ratio paired by round with its 95%
//! interval and what that interval says about the target's floor. They are
//! reported, never enforced: only `--baseline` asks for a failing check.

use crate::sequential::{Check, Tracker};
use crate::target_check::TargetCheck;
use crate::{Report, StrategyResult};

/// `(contender, against, floor)`: the contender's writes/s over the other's.
const TARGETS: [(&str, &str, f64); 10] = [
    // Preconditions on exactly what is written cost what no precondition
    // costs, and beat controller-runtime's whole-object lock.
    ("guarded", "lax", 0.95),
    ("guarded", "controller-runtime", 1.3),
    ("manager-guarded", "lax", 0.95),
    // Reading your own writes costs the manager no more than 5%.
    ("manager-guarded", "manager-guarded-ungated", 0.95),
    // Optimistic locking costs no more than the same requests by hand.
    ("strict", "raw", 0.98),
    // concord's safe strategy keeps up with controller-runtime's.
    ("strict", "controller-runtime", 1.0),
    // The safe strategies reach most of the API server's own capacity.
    ("strict", "ceiling", 0.9),
    ("update", "ceiling", 0.9),
    ("apply", "ceiling", 0.9),
    ("locked", "ceiling", 0.9),
];

/// The targets whose two contenders both ran, as checks to decide.
pub(crate) fn wanted(contenders: &[&str]) -> Vec<Check> {
    TARGETS
        .iter()
        .filter(|(c, a, _)| contenders.contains(c) && contenders.contains(a))
        .map(|&(contender, against, floor)| Check {
            contender: contender.into(),
            against: against.into(),
            floor,
        })
        .collect()
}

/// The targets whose two contenders both ran, in [`TARGETS`]' order, as
/// `tracker` decided them.
pub(crate) fn checks(results: &[StrategyResult], tracker: &Tracker) -> Vec<TargetCheck> {
    let names: Vec<&str> = results.iter().map(|r| r.strategy.as_str()).collect();
    wanted(&names)
        .into_iter()
        .filter_map(|check| {
            let d = tracker.decision(&check.contender, &check.against, check.floor)?;
            Some(TargetCheck {
                contender: check.contender,
                against: check.against,
                floor: check.floor,
                interval: d.interval,
                verdict: d.verdict,
                decided_after_rounds: d.after_rounds.map(u64::from),
            })
        })
        .collect()
}

/// The targets as Markdown lines, empty when none could be computed.
pub(crate) fn markdown(report: &Report) -> String {
    let mut out = String::new();
    for t in &report.targets {
        if out.is_empty() {
            out.push_str(
                "\ntargets (writes/s ratio paired by round, 95% CI, against its floor):\n",
            );
        }
        let i = t.interval;
        out.push_str(&format!(
            "- {} / {}: {:.3}x [{:.3}, {:.3}] vs floor {:.2}: {}{}\n",
            t.contender,
            t.against,
            i.ratio,
            i.lo,
            i.hi,
            t.floor,
            t.verdict.as_str(),
            match t.decided_after_rounds {
                Some(n) => format!(" after {n} rounds"),
                None => format!(" after {} rounds", i.rounds),
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{Interval, Verdict};
    use crate::test_support::{report, result};

    #[test]
    fn a_target_is_checked_only_when_both_contenders_ran() {
        let mut strict = result("strict", 100.0, 0);
        strict.rounds_writes_per_s = vec![100.0, 102.0, 98.0];
        let mut raw = result("raw", 100.0, 0);
        raw.rounds_writes_per_s = vec![100.0, 101.0, 99.0];
        let results = [strict.clone(), raw];
        let names: Vec<&str> = results.iter().map(|r| r.strategy.as_str()).collect();
        let mut tracker = Tracker::new(crate::Stopping::Fixed(3), wanted(&names));
        tracker.look(3, |name| {
            results
                .iter()
                .find(|r| r.strategy == name)
                .map(|r| r.rounds_writes_per_s.as_slice())
        });
        let checks = checks(&results, &tracker);
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(
            (checks[0].contender.as_str(), checks[0].against.as_str()),
            ("strict", "raw")
        );
        assert!(checks[0].interval.lo < 1.0 && checks[0].interval.hi > 1.0);
        assert_eq!(checks[0].verdict, Verdict::Undecided);
        assert_eq!(checks[0].decided_after_rounds, None);
        assert!(wanted(&["strict"]).is_empty());
    }

    #[test]
    fn the_report_lists_each_target_with_its_verdict() {
        let mut r = report(vec![]);
        r.targets = vec![TargetCheck {
            contender: "strict".into(),
            against: "ceiling".into(),
            floor: 0.9,
            interval: Interval {
                ratio: 0.7,
                lo: 0.66,
                hi: 0.8,
                rounds: 5,
            },
            verdict: Verdict::Missed,
            decided_after_rounds: Some(5),
        }];
        let text = markdown(&r);
        assert!(
            text.contains(
                "- strict / ceiling: 0.700x [0.660, 0.800] vs floor 0.90: missed after 5 rounds"
            ),
            "{text}"
        );
    }
}
