//! The statistics of paired rounds: medians, spreads and the 95% interval
//! of a throughput ratio, paired by round.

use serde::{Deserialize, Serialize};

/// A ratio of two contenders' writes/s with its 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interval {
    /// The geometric mean of the per-round ratios.
    pub ratio: f64,
    /// The interval's lower bound (0 with fewer than two rounds).
    pub lo: f64,
    /// The interval's upper bound (infinite with fewer than two rounds,
    /// written as `null` in JSON).
    pub hi: f64,
    /// Rounds paired.
    pub rounds: usize,
}

/// What an interval says about a floor such as `0.95`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The whole interval lies at or above the floor.
    Met,
    /// The whole interval lies below the floor.
    Missed,
    /// The interval straddles the floor: more rounds are needed to decide.
    Undecided,
}

impl Verdict {
    /// The word printed in tables.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "missed",
            Verdict::Undecided => "undecided",
        }
    }
}

impl Interval {
    /// The ratio `contender / baseline`, paired by round: a t interval on
    /// the mean of the per-round log ratios, taken back with `exp`. Log
    /// ratios make `a/b` and `b/a` symmetric and keep the bounds positive.
    /// `None` when the slices differ in length, are empty or hold a value
    /// that is not positive.
    pub fn paired(contender: &[f64], baseline: &[f64]) -> Option<Interval> {
        let df = contender.len().saturating_sub(1).max(1) as u32;
        Interval::paired_with(contender, baseline, t_quantile(0.05, df))
    }

    /// [`Interval::paired`] with the critical value `t` of the wanted
    /// level (for `n` rounds, Student's t with `n - 1` degrees of freedom).
    // ANCHOR: paired
    pub fn paired_with(contender: &[f64], baseline: &[f64], t: f64) -> Option<Interval> {
        if contender.len() != baseline.len() || contender.is_empty() {
            return None;
        }
        let logs: Option<Vec<f64>> = contender
            .iter()
            .zip(baseline)
            .map(|(c, b)| (*c > 0.0 && *b > 0.0).then(|| (c / b).ln()))
            .collect();
        let logs = logs?;
        let n = logs.len();
        let mean = logs.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Some(Interval {
                ratio: mean.exp(),
                lo: 0.0,
                hi: f64::INFINITY,
                rounds: n,
            });
        }
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t * (var / n as f64).sqrt();
        Some(Interval {
            ratio: mean.exp(),
            lo: (mean - half).exp(),
            hi: (mean + half).exp(),
            rounds: n,
        })
    }
    // ANCHOR_END: paired

    // ANCHOR: against
    /// Whether the interval clears `floor`.
    pub fn against(&self, floor: f64) -> Verdict {
        if self.lo >= floor {
            Verdict::Met
        } else if self.hi < floor {
            Verdict::Missed
        } else {
            Verdict::Undecided
        }
    }
    // ANCHOR_END: against
}

/// The two-sided critical value of Student's t with `df` degrees of
/// freedom at error rate `alpha`: the `t` with `P(|T| > t) = alpha`.
/// Found by bisection on the exact distribution function for whole
/// degrees of freedom (Abramowitz and Stegun 26.7.3 and 26.7.4).
pub fn t_quantile(alpha: f64, df: u32) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0e7_f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if 1.0 - t_within(mid, df) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// `P(|T| < t)` for Student's t with `df` (at least 1) degrees of freedom.
fn t_within(t: f64, df: u32) -> f64 {
    let df = df.max(1);
    let theta = (t / f64::from(df).sqrt()).atan();
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    if df % 2 == 1 {
        // (2/pi) (theta + s (c + 2/3 c^3 + 2*4/(3*5) c^5 + ... up to c^(df-2)))
        let mut term = c;
        let mut sum = 0.0;
        let mut k = 1;
        while 2 * k < df + 1 && df > 1 {
            sum += term;
            term *= c2 * f64::from(2 * k) / f64::from(2 * k + 1);
            k += 1;
        }
        std::f64::consts::FRAC_2_PI * (theta + s * sum)
    } else {
        // s (1 + 1/2 c^2 + 1*3/(2*4) c^4 + ... up to c^(df-2))
        let mut term = 1.0;
        let mut sum = 0.0;
        let mut k = 1;
        while 2 * k <= df {
            sum += term;
            term *= c2 * f64::from(2 * k - 1) / f64::from(2 * k);
            k += 1;
        }
        s * sum
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-3
    }

    #[test]
    fn t_quantiles_match_the_printed_table() {
        // Two-sided 95% critical values for 1 to 10 and 30 degrees of freedom.
        let table = [
            (1, 12.706),
            (2, 4.303),
            (3, 3.182),
            (4, 2.776),
            (5, 2.571),
            (6, 2.447),
            (7, 2.365),
            (8, 2.306),
            (9, 2.262),
            (10, 2.228),
            (30, 2.042),
        ];
        for (df, t) in table {
            assert!((t_quantile(0.05, df) - t).abs() < 1e-3, "df {df}");
        }
        // 99% for 4 degrees of freedom, and a Bonferroni share of 5% over 18.
        assert!((t_quantile(0.01, 4) - 4.604).abs() < 1e-3);
        assert!(t_quantile(0.05 / 18.0, 10) > t_quantile(0.01, 10));
        eprintln!(
            "19 degrees of freedom: t {:.3} at 5%, {:.3} at 5%/18",
            t_quantile(0.05, 19),
            t_quantile(0.05 / 18.0, 19)
        );
    }

    #[test]
    fn identical_ratios_give_a_point_interval() {
        let i = Interval::paired(&[90.0, 45.0, 180.0], &[100.0, 50.0, 200.0]).unwrap();
        assert!(
            close(i.ratio, 0.9) && close(i.lo, 0.9) && close(i.hi, 0.9),
            "{i:?}"
        );
        assert_eq!(i.against(0.95), Verdict::Missed);
        assert_eq!(i.against(0.9 - 1e-6), Verdict::Met);
    }

    #[test]
    fn pairing_removes_drift_shared_by_both() {
        // The machine slows down round after round; the contender is always
        // 2% faster than the baseline in the same round.
        let base = [100.0, 80.0, 60.0, 40.0, 20.0];
        let cont: Vec<f64> = base.iter().map(|b| b * 1.02).collect();
        let i = Interval::paired(&cont, &base).unwrap();
        assert!(close(i.lo, 1.02) && close(i.hi, 1.02), "{i:?}");
        assert_eq!(i.against(0.95), Verdict::Met);
    }

    #[test]
    fn the_interval_matches_a_hand_computed_t_interval() {
        // log ratios ln(1.1), ln(0.9), ln(1.0), ln(1.05), ln(0.95)
        let base = [1.0; 5];
        let cont = [1.1, 0.9, 1.0, 1.05, 0.95];
        let logs: Vec<f64> = cont.iter().map(|c: &f64| c.ln()).collect();
        let mean = logs.iter().sum::<f64>() / 5.0;
        let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let half = 2.776 * sd / 5f64.sqrt();
        let i = Interval::paired(&cont, &base).unwrap();
        assert!(close(i.lo, (mean - half).exp()) && close(i.hi, (mean + half).exp()));
        // Roughly 0.90..1.10: straddles 0.95.
        assert_eq!(i.against(0.95), Verdict::Undecided);
    }

    #[test]
    fn one_round_cannot_decide() {
        let i = Interval::paired(&[200.0], &[100.0]).unwrap();
        assert!(close(i.ratio, 2.0));
        assert_eq!(i.against(0.95), Verdict::Undecided);
    }

    #[test]
    fn unusable_input_gives_no_interval() {
        assert_eq!(Interval::paired(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(Interval::paired(&[], &[]), None);
        assert_eq!(Interval::paired(&[0.0, 1.0], &[1.0, 1.0]), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
