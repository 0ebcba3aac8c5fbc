//! A ratio of two contenders paired by round, with its 95% interval.

/// `a / b` over the rounds: the geometric mean of the per-round ratios
/// and a 95% t interval on their logs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Interval {
    pub(crate) ratio: f64,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    pub(crate) rounds: usize,
}

/// Two-sided 95% critical values of Student's t for 1 to 30 degrees of
/// freedom; beyond, 30's (a little wider than the exact value).
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

impl Interval {
    /// `a[i] / b[i]` paired by round; `None` when the lengths differ, there
    /// is no round, or a value is not positive. With one round the bounds
    /// are 0 and infinity.
    pub(crate) fn paired(a: &[f64], b: &[f64]) -> Option<Interval> {
        if a.len() != b.len() || a.is_empty() {
            return None;
        }
        let logs: Vec<f64> = a
            .iter()
            .zip(b)
            .map(|(x, y)| (*x > 0.0 && *y > 0.0).then(|| (x / y).ln()))
            .collect::<Option<_>>()?;
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
        let t = T95[(n - 2).min(T95.len() - 1)];
        let half = t * (var / n as f64).sqrt();
        Some(Interval {
            ratio: mean.exp(),
            lo: (mean - half).exp(),
            hi: (mean + half).exp(),
            rounds: n,
        })
    }

    /// Whether the ratio stays at or below `ceiling`: `met` when the whole
    /// interval does, `missed` when the whole interval lies above it,
    /// `undecided` when it straddles it.
    pub(crate) fn at_most(&self, ceiling: f64) -> &'static str {
        if self.hi <= ceiling {
            "met"
        } else if self.lo > ceiling {
            "missed"
        } else {
            "undecided"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_ratio_gives_a_point_interval() {
        let i = Interval::paired(&[9.0, 18.0, 4.5], &[10.0, 20.0, 5.0]).unwrap();
        assert!((i.ratio - 0.9).abs() < 1e-9 && (i.hi - 0.9).abs() < 1e-9);
        assert_eq!(i.at_most(1.1), "met");
        assert_eq!(i.at_most(0.8), "missed");
    }

    #[test]
    fn the_interval_matches_a_hand_computed_one() {
        // ln ratios 0.1 and -0.1: mean 0, sd 0.1414, t(1) 12.706.
        let i = Interval::paired(&[0.1f64.exp(), (-0.1f64).exp()], &[1.0, 1.0]).unwrap();
        let half = 12.706 * (0.02f64 / 2.0).sqrt();
        assert!((i.hi - half.exp()).abs() < 1e-6, "{i:?}");
        assert_eq!(i.at_most(1.1), "undecided");
    }

    #[test]
    fn unusable_rounds_give_no_interval() {
        assert_eq!(Interval::paired(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(Interval::paired(&[], &[]), None);
        assert_eq!(Interval::paired(&[0.0], &[1.0]), None);
        let one = Interval::paired(&[2.0], &[1.0]);
        assert_eq!(one.map(|i| i.at_most(1.1)), Some("undecided"));
    }
}
