//! The figures of each run, their summary per contender, and the table.

use std::fmt::Write as _;

use concord_race_bench::{Interval, Verdict};
use serde::Serialize;

use crate::args::{Args, ContenderName};

/// The targets: a new object's first reconcile within this (p99, median
/// over rounds)…
const P99_TARGET_MS: f64 = 1000.0;
/// …and no object waiting longer than this many storms.
const WAIT_TARGET_STORMS: f64 = 2.0;

/// One contender's run in one round.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    /// 0-based.
    pub round: usize,
    /// Who ran.
    pub contender: ContenderName,
    /// Objects listed when it started.
    pub objects: usize,
    /// Objects created during its storm.
    pub new_objects: usize,
    /// From its start to the last listed object's first reconcile.
    pub storm_s: f64,
    /// New objects' create-to-first-reconcile latency, nearest-rank.
    pub p50_ms: f64,
    /// The same, 99th percentile.
    pub p99_ms: f64,
    /// The same, the longest.
    pub max_ms: f64,
    /// The longest wait of any object (a listed one's from the start, a
    /// new one's from its create) over the storm's length.
    pub max_wait_storms: f64,
}

impl Round {
    pub(crate) fn new(
        round: usize,
        contender: ContenderName,
        objects: usize,
        storm_s: f64,
        mut latencies_ms: Vec<f64>,
    ) -> Self {
        latencies_ms.sort_by(f64::total_cmp);
        let max_ms = latencies_ms.last().copied().unwrap_or(0.0);
        let max_wait_s = storm_s.max(max_ms / 1000.0);
        Round {
            round,
            contender,
            objects,
            new_objects: latencies_ms.len(),
            storm_s,
            p50_ms: percentile(&latencies_ms, 0.50),
            p99_ms: percentile(&latencies_ms, 0.99),
            max_ms,
            max_wait_storms: if storm_s > 0.0 {
                max_wait_s / storm_s
            } else {
                0.0
            },
        }
    }
}

/// Nearest-rank percentile of sorted `values` (0 when empty).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    // Nearest rank: the smallest value with at least p of them at or below.
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One contender over all rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Who.
    pub contender: ContenderName,
    /// The median over rounds of each round's p99.
    pub median_p99_ms: f64,
    /// The median storm length.
    pub median_storm_s: f64,
    /// The longest new-object latency of any round.
    pub max_ms: f64,
    /// The worst round's longest wait over its storm.
    pub worst_wait_storms: f64,
    /// Median p99 within the target.
    pub p99_target_met: bool,
    /// Worst wait within the target.
    pub wait_target_met: bool,
}

/// concord's storm against the controller-runtime priority queue's, paired
/// by round.
#[derive(Clone, Debug, Serialize)]
pub struct StormRatio {
    /// Each round's concord storm over the peer's.
    pub per_round: Vec<f64>,
    /// Their geometric mean, with its 95% interval (a t interval on the
    /// mean log ratio, as the race benchmark computes it).
    pub interval: Interval,
    /// `met` when the interval's upper end is at most 1 (concord's storm
    /// is at most the peer's), `missed` when its lower end is above 1,
    /// `undecided` otherwise.
    pub verdict: Verdict,
}

impl StormRatio {
    /// Pairs concord's and the priority queue's runs by round; `None`
    /// unless both ran.
    fn new(runs: &[Round]) -> Option<Self> {
        let storms = |who| -> Vec<(usize, f64)> {
            runs.iter()
                .filter(|r| r.contender == who)
                .map(|r| (r.round, r.storm_s))
                .collect()
        };
        let (ours, theirs): (Vec<f64>, Vec<f64>) = storms(ContenderName::Concord)
            .into_iter()
            .filter_map(|(round, storm)| {
                let peer = storms(ContenderName::CrPriority)
                    .into_iter()
                    .find(|(r, _)| *r == round)?;
                Some((storm, peer.1))
            })
            .unzip();
        let interval = Interval::paired(&ours, &theirs)?;
        // At most the peer's storm is at least the peer's speed: the
        // inverse ratio's interval against a floor of 1 says the same
        // about this one against a ceiling of 1.
        let verdict = Interval::paired(&theirs, &ours)?.against(1.0);
        Some(StormRatio {
            per_round: ours.iter().zip(&theirs).map(|(o, t)| o / t).collect(),
            interval,
            verdict,
        })
    }
}

/// The benchmark's report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Objects listed at each start.
    pub objects: usize,
    /// Rounds run.
    pub rounds: usize,
    /// New objects per second during each storm.
    pub rate: u32,
    /// Each reconcile's work.
    pub work_ms: u64,
    /// Reconciles at once.
    pub concurrency: u16,
    /// Every run.
    pub runs: Vec<Round>,
    /// Per contender.
    pub summary: Vec<Summary>,
    /// concord's storm over the priority queue's, when both ran.
    pub storm_ratio: Option<StormRatio>,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

impl Report {
    pub(crate) fn new(args: &Args, runs: Vec<Round>) -> Self {
        let summary = args
            .contenders
            .iter()
            .map(|who| {
                let mine: Vec<&Round> = runs.iter().filter(|r| r.contender == *who).collect();
                let median_p99_ms = median(mine.iter().map(|r| r.p99_ms).collect());
                let worst_wait_storms = mine.iter().map(|r| r.max_wait_storms).fold(0.0, f64::max);
                Summary {
                    contender: *who,
                    median_p99_ms,
                    median_storm_s: median(mine.iter().map(|r| r.storm_s).collect()),
                    max_ms: mine.iter().map(|r| r.max_ms).fold(0.0, f64::max),
                    worst_wait_storms,
                    p99_target_met: median_p99_ms <= P99_TARGET_MS,
                    wait_target_met: worst_wait_storms <= WAIT_TARGET_STORMS,
                }
            })
            .collect();
        Report {
            objects: args.objects,
            rounds: args.rounds,
            rate: args.rate,
            work_ms: args.work_ms,
            concurrency: args.concurrency,
            storm_ratio: StormRatio::new(&runs),
            runs,
            summary,
        }
    }
}

fn yes(met: bool) -> &'static str {
    if met { "yes" } else { "no" }
}

/// The report as Markdown: the summary, then every run.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ConfigMaps listed at each start, {} paired round(s), {} new ConfigMaps/s during each storm, \
         {} ms per reconcile, {} reconciles at once\n",
        report.objects, report.rounds, report.rate, report.work_ms, report.concurrency
    );
    let _ = writeln!(
        out,
        "| contender | new object p99, median of rounds (ms) | longest new-object wait (ms) | storm, median (s) | worst wait / storm | p99 ≤ {P99_TARGET_MS:.0} ms | wait ≤ {WAIT_TARGET_STORMS:.0}× storm |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | --- | --- |");
    for s in &report.summary {
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.0} | {:.1} | {:.2} | {} | {} |",
            s.contender.as_str(),
            s.median_p99_ms,
            s.max_ms,
            s.median_storm_s,
            s.worst_wait_storms,
            yes(s.p99_target_met),
            yes(s.wait_target_met)
        );
    }
    if let Some(ratio) = &report.storm_ratio {
        let i = &ratio.interval;
        let rounds: Vec<String> = ratio.per_round.iter().map(|r| format!("{r:.3}")).collect();
        let _ = writeln!(
            out,
            "\nconcord's storm / the controller-runtime priority queue's, paired by round: \
             {:.3}× (geometric mean), 95% interval [{:.3}, {:.3}] over {} round(s) ({}): {} \
             (met when the interval's upper end is at most 1)",
            i.ratio,
            i.lo,
            i.hi,
            i.rounds,
            rounds.join(", "),
            ratio.verdict.as_str()
        );
    }
    let _ = writeln!(
        out,
        "\n| round | contender | new objects | p50 (ms) | p99 (ms) | max (ms) | storm (s) | wait / storm |"
    );
    let _ = writeln!(
        out,
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    for r in &report.runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.2} |",
            r.round + 1,
            r.contender.as_str(),
            r.new_objects,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.storm_s,
            r.max_wait_storms
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.50), 50.0);
        assert_eq!(percentile(&values, 0.99), 99.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
    }

    fn run(round: usize, contender: ContenderName, storm_s: f64) -> Round {
        Round::new(round, contender, 1, storm_s, vec![1.0])
    }

    #[test]
    fn the_storm_ratio_pairs_rounds_and_decides_against_one() {
        let faster = [
            run(0, ContenderName::Concord, 6.0),
            run(0, ContenderName::CrPriority, 7.0),
            run(1, ContenderName::CrPriority, 7.2),
            run(1, ContenderName::Concord, 6.1),
            run(2, ContenderName::Concord, 6.2),
            run(2, ContenderName::CrWorkqueue, 1.0),
            run(2, ContenderName::CrPriority, 7.1),
        ];
        let ratio = StormRatio::new(&faster).unwrap();
        assert_eq!(ratio.per_round.len(), 3);
        assert!((ratio.per_round[1] - 6.1 / 7.2).abs() < 1e-9);
        assert!(ratio.interval.hi < 1.0, "{:?}", ratio.interval);
        assert_eq!(ratio.verdict, Verdict::Met);
        let slower: Vec<Round> = faster
            .iter()
            .map(|r| match r.contender {
                ContenderName::Concord => run(r.round, r.contender, r.storm_s * 1.3),
                _ => r.clone(),
            })
            .collect();
        assert_eq!(StormRatio::new(&slower).unwrap().verdict, Verdict::Missed);
        let one = &faster[..2];
        assert_eq!(StormRatio::new(one).unwrap().verdict, Verdict::Undecided);
        assert!(StormRatio::new(&faster[..1]).is_none(), "no peer: no ratio");
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
