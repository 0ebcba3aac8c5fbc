//! Sequential rounds: how many rounds a run makes, and when it stops.
//!
//! With `--until-decided` the run looks at its checked ratios after every
//! round from the [`FIRST_LOOK`]th on and stops as soon as each one's
//! interval lies wholly on one side of its floor. Looking again and again
//! at a 95% interval would decide a ratio that sits on its floor wrongly
//! far more often than 5% of the time, so every look uses a Bonferroni
//! share of the error rate: with `L` possible looks each interval is a
//! `1 - 0.05/L` interval, and the chance that *any* of them misses the true
//! ratio is at most `L × 0.05/L = 0.05`. A verdict is therefore wrong with
//! probability at most 5% whichever look made it, and a ratio keeps the
//! verdict (and interval) of the round that decided it.

use std::time::Duration;

use crate::stats::{Interval, Verdict, t_quantile};

/// The error rate every verdict is held to, whatever the number of looks.
pub const ALPHA: f64 = 0.05;

/// The first round after which a sequential run looks at its intervals:
/// with two rounds a t interval has one degree of freedom and a
/// Bonferroni share of 5% gives it no chance to decide anything, so that
/// look would only spend error rate.
pub const FIRST_LOOK: u32 = 3;

/// How many rounds a run makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stopping {
    /// Exactly this many rounds, one look at the end at 95%.
    Fixed(u32),
    /// Rounds until every checked ratio is decided, at most `max_rounds`,
    /// and no round started once `max_time` has gone by.
    UntilDecided {
        /// The most rounds.
        max_rounds: u32,
        /// The longest the rounds may take in all, if limited.
        max_time: Option<Duration>,
    },
}

impl Stopping {
    /// The most rounds the run can make.
    pub const fn max_rounds(self) -> u32 {
        match self {
            Stopping::Fixed(n) => n,
            Stopping::UntilDecided { max_rounds, .. } => max_rounds,
        }
    }

    /// How many times the intervals are looked at, at most.
    pub const fn looks(self) -> u32 {
        match self {
            Stopping::Fixed(_) => 1,
            Stopping::UntilDecided { max_rounds, .. } => max_rounds.saturating_sub(FIRST_LOOK) + 1,
        }
    }

    /// The error rate of one look: [`ALPHA`] split evenly over the looks.
    pub fn alpha_per_look(self) -> f64 {
        ALPHA / f64::from(self.looks())
    }

    /// Whether the intervals are looked at after `rounds` rounds.
    const fn looks_after(self, rounds: u32) -> bool {
        match self {
            Stopping::Fixed(n) => rounds == n,
            Stopping::UntilDecided { max_rounds, .. } => {
                rounds >= FIRST_LOOK && rounds <= max_rounds
            }
        }
    }

    /// The word in the report: `fixed` or `until-decided`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stopping::Fixed(_) => "fixed",
            Stopping::UntilDecided { .. } => "until-decided",
        }
    }
}

/// One ratio the run decides: `contender`'s writes/s over `against`'s,
/// against `floor`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Check {
    /// The contender measured.
    pub(crate) contender: String,
    /// The contender it is compared with.
    pub(crate) against: String,
    /// The threshold.
    pub(crate) floor: f64,
}

/// What a check came to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Decision {
    /// The interval the verdict rests on.
    pub(crate) interval: Interval,
    /// Its verdict against the floor.
    pub(crate) verdict: Verdict,
    /// The round count that decided it; `None` while undecided.
    pub(crate) after_rounds: Option<u32>,
}

/// The checks of a run and what each came to so far.
#[derive(Debug)]
pub(crate) struct Tracker {
    stopping: Stopping,
    checks: Vec<Check>,
    decisions: Vec<Option<Decision>>,
    /// The two-sided quantile of one look, by degrees of freedom minus one.
    t: Vec<f64>,
}

impl Tracker {
    /// A tracker for `checks` (duplicates dropped) under `stopping`.
    pub(crate) fn new(stopping: Stopping, checks: Vec<Check>) -> Self {
        let mut unique: Vec<Check> = Vec::with_capacity(checks.len());
        for c in checks {
            if !unique.contains(&c) {
                unique.push(c);
            }
        }
        let alpha = stopping.alpha_per_look();
        let t = (1..stopping.max_rounds().max(2))
            .map(|df| t_quantile(alpha, df))
            .collect();
        Tracker {
            stopping,
            decisions: vec![None; unique.len()],
            checks: unique,
            t,
        }
    }

    /// The checks, in order.
    pub(crate) fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The interval of `contender / baseline` over the rounds so far, at
    /// this run's per-look level.
    pub(crate) fn interval(&self, contender: &[f64], baseline: &[f64]) -> Option<Interval> {
        let n = contender.len();
        let t = self
            .t
            .get(n.saturating_sub(2))
            .copied()
            .unwrap_or(f64::INFINITY);
        Interval::paired_with(contender, baseline, t)
    }

    // ANCHOR: look
    /// Look after `rounds` rounds at the per-round writes/s that
    /// `writes_per_s` gives for a contender's name; returns whether every
    /// check is decided (the run may stop).
    pub(crate) fn look<'a>(
        &mut self,
        rounds: u32,
        writes_per_s: impl Fn(&str) -> Option<&'a [f64]>,
    ) -> bool {
        if !self.stopping.looks_after(rounds) {
            return false;
        }
        for (check, slot) in self.checks.iter().zip(self.decisions.iter_mut()) {
            if slot.is_some_and(|d| d.after_rounds.is_some()) {
                continue;
            }
            let (Some(c), Some(b)) = (writes_per_s(&check.contender), writes_per_s(&check.against))
            else {
                continue;
            };
            let n = c.len().min(b.len());
            let t = self.t.get(n.saturating_sub(2)).copied();
            let Some(interval) = t.and_then(|t| Interval::paired_with(&c[..n], &b[..n], t)) else {
                continue;
            };
            let verdict = interval.against(check.floor);
            *slot = Some(Decision {
                interval,
                verdict,
                after_rounds: (verdict != Verdict::Undecided).then_some(rounds),
            });
        }
        self.all_decided()
    }
    // ANCHOR_END: look

    /// How many checks are decided so far.
    pub(crate) fn decided_count(&self) -> usize {
        self.decisions
            .iter()
            .filter(|d| d.is_some_and(|d| d.after_rounds.is_some()))
            .count()
    }

    /// Whether every check has a verdict other than "undecided".
    pub(crate) fn all_decided(&self) -> bool {
        self.decisions
            .iter()
            .all(|d| d.is_some_and(|d| d.after_rounds.is_some()))
    }

    /// What the check of `contender` over `against` at `floor` came to.
    pub(crate) fn decision(&self, contender: &str, against: &str, floor: f64) -> Option<Decision> {
        self.checks
            .iter()
            .position(|c| c.contender == contender && c.against == against && c.floor == floor)
            .and_then(|i| self.decisions[i])
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng as _, SeedableRng as _};

    use super::*;

    const BUDGET: Stopping = Stopping::UntilDecided {
        max_rounds: 20,
        max_time: None,
    };

    /// A round of two contenders: the baseline at a drifting speed, the
    /// contender at `ratio` times it with multiplicative noise of about
    /// `noise` (a log-normal factor).
    fn round(rng: &mut StdRng, ratio: f64, noise: f64) -> (f64, f64) {
        let base = 100.0 * (1.0 + rng.random::<f64>());
        // Box–Muller: a standard normal from two uniforms.
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (base * ratio * (noise * z).exp(), base)
    }

    /// Run rounds until the tracker stops or the budget ends; the decision
    /// and the rounds made.
    fn sequential(
        stopping: Stopping,
        floor: f64,
        ratio: f64,
        noise: f64,
        seed: u64,
    ) -> (Decision, u32) {
        let mut rng = StdRng::seed_from_u64(seed);
        let check = Check {
            contender: "c".into(),
            against: "b".into(),
            floor,
        };
        let mut tracker = Tracker::new(stopping, vec![check]);
        let (mut c, mut b) = (Vec::new(), Vec::new());
        let mut rounds = 0;
        while rounds < stopping.max_rounds() {
            let (x, y) = round(&mut rng, ratio, noise);
            c.push(x);
            b.push(y);
            rounds += 1;
            let stop = tracker.look(rounds, |name| match name {
                "c" => Some(c.as_slice()),
                "b" => Some(b.as_slice()),
                _ => None,
            });
            if stop {
                break;
            }
        }
        let decision = tracker
            .decision("c", "b", floor)
            .unwrap_or_else(|| panic!("no decision"));
        (decision, rounds)
    }

    #[test]
    fn a_clear_difference_stops_early() {
        let (d, rounds) = sequential(BUDGET, 0.95, 0.6, 0.05, 1);
        assert_eq!(d.verdict, Verdict::Missed, "{d:?}");
        assert!(rounds < BUDGET.max_rounds(), "stopped after {rounds}");
        assert_eq!(d.after_rounds, Some(rounds));
        let (d, rounds) = sequential(BUDGET, 0.95, 1.5, 0.05, 2);
        assert_eq!(d.verdict, Verdict::Met, "{d:?}");
        assert!(rounds < BUDGET.max_rounds(), "stopped after {rounds}");
    }

    #[test]
    fn an_equal_pair_runs_to_the_budget_undecided() {
        let (d, rounds) = sequential(BUDGET, 1.0, 1.0, 0.05, 3);
        assert_eq!(d.verdict, Verdict::Undecided, "{d:?}");
        assert_eq!(d.after_rounds, None);
        assert_eq!(rounds, BUDGET.max_rounds());
        assert_eq!(d.interval.rounds, rounds as usize);
    }

    #[test]
    fn a_fixed_count_looks_once_at_the_end() {
        let (d, rounds) = sequential(Stopping::Fixed(5), 0.95, 0.6, 0.05, 4);
        assert_eq!(rounds, 5);
        assert_eq!((d.verdict, d.after_rounds), (Verdict::Missed, Some(5)));
        assert_eq!(Stopping::Fixed(5).alpha_per_look(), ALPHA);
    }

    /// How often runs at a true ratio equal to the floor are decided
    /// (wrongly, either way) under `stopping` with `alpha` per look.
    fn wrong_decisions(stopping: Stopping, runs: u64) -> f64 {
        let wrong = (0..runs)
            .filter(|seed| {
                sequential(stopping, 1.0, 1.0, 0.1, 1000 + seed)
                    .0
                    .after_rounds
                    .is_some()
            })
            .count();
        wrong as f64 / runs as f64
    }

    #[test]
    fn repeated_looks_keep_the_error_rate_at_five_percent() {
        // A ratio exactly on its floor: any verdict is an error.
        let rate = wrong_decisions(BUDGET, 2000);
        eprintln!(
            "Bonferroni over {} looks: wrong verdicts in {rate} of 2000 runs",
            BUDGET.looks()
        );
        assert!(rate <= ALPHA, "wrong verdicts in {rate} of the runs");
    }

    #[test]
    fn uncorrected_looks_would_err_more_often() {
        // The same looks, each at a plain 95% (one look's share): the naive
        // procedure the Bonferroni split replaces.
        let naive = Tracker::new(Stopping::Fixed(20), vec![]);
        let mut wrong = 0;
        let runs = 2000;
        for seed in 0..runs {
            let mut rng = StdRng::seed_from_u64(1000 + seed);
            let (mut c, mut b) = (Vec::new(), Vec::new());
            for n in 1..=20 {
                let (x, y) = round(&mut rng, 1.0, 0.1);
                c.push(x);
                b.push(y);
                if n >= FIRST_LOOK
                    && naive
                        .interval(&c, &b)
                        .is_some_and(|i| i.against(1.0) != Verdict::Undecided)
                {
                    wrong += 1;
                    break;
                }
            }
        }
        let rate = f64::from(wrong) / runs as f64;
        eprintln!("uncorrected 95% looks: wrong verdicts in {rate} of {runs} runs");
        assert!(
            rate > 2.0 * ALPHA,
            "naive looks erred in only {rate} of the runs"
        );
    }

    #[test]
    fn a_check_whose_contender_did_not_run_stays_open() {
        let mut t = Tracker::new(
            BUDGET,
            vec![Check {
                contender: "x".into(),
                against: "b".into(),
                floor: 1.0,
            }],
        );
        assert!(!t.look(3, |_| None));
        assert_eq!(t.decision("x", "b", 1.0), None);
    }
}
