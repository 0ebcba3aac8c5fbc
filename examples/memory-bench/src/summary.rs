//! What the rounds and the hold both summarise with: the operators in the
//! order each round runs them, a figure's spread over the rounds, the
//! concord/controller-runtime ratio with its interval, and both as
//! Markdown tables.

use std::fmt::Write as _;

use concord_race_bench::Interval;
use serde::Serialize;

/// The operators, in the order each round runs them.
pub const OPERATORS: [&str; 2] = ["concord", "controller-runtime"];

/// One figure of one operator over the rounds.
#[derive(Clone, Debug, Serialize)]
pub struct Spread {
    /// `concord` or `controller-runtime`.
    pub operator: String,
    /// Which figure.
    pub figure: String,
    /// The median over the rounds.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

/// A concord/controller-runtime ratio, paired by round.
#[derive(Clone, Debug, Serialize)]
pub struct Ratio {
    /// Which figure.
    pub figure: String,
    /// The ratio and its 95% interval.
    pub interval: Interval,
    /// `lower` (the whole interval below 1), `higher` (above 1) or
    /// `undecided`.
    pub against_peer: &'static str,
    /// The same against the target of 0.5: `within`, `beyond` or
    /// `undecided`.
    pub against_half: &'static str,
}

/// Where `interval` lies against `bound`: `words[0]` wholly below it,
/// `words[1]` wholly above, else `undecided`.
pub(crate) fn side(interval: &Interval, bound: f64, words: [&'static str; 2]) -> &'static str {
    if interval.hi < bound {
        words[0]
    } else if interval.lo > bound {
        words[1]
    } else {
        "undecided"
    }
}

/// The spreads of `figures` per operator, then `ratios`, as Markdown
/// tables.
pub(crate) fn tables(spreads: &[Spread], figures: &[&str], ratios: &[Ratio]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| figure | concord median (min–max) | controller-runtime median (min–max) |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: |");
    for figure in figures {
        let cell = |operator: &str| {
            spreads
                .iter()
                .find(|s| s.operator == operator && s.figure == *figure)
                .map_or("-".to_owned(), |s| {
                    format!("{:.1} ({:.1}–{:.1})", s.median, s.min, s.max)
                })
        };
        let _ = writeln!(
            out,
            "| {figure} | {} | {} |",
            cell(OPERATORS[0]),
            cell(OPERATORS[1])
        );
    }
    if ratios.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n| concord / controller-runtime | ratio | 95% interval | vs 1 | vs 0.5 |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | --- | --- |");
    for r in ratios {
        let hi = if r.interval.hi.is_finite() {
            format!("{:.2}", r.interval.hi)
        } else {
            "∞".to_owned()
        };
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.2}–{hi} | {} | {} |",
            r.figure, r.interval.ratio, r.interval.lo, r.against_peer, r.against_half
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_placed_against_a_bound() {
        let i = |lo, hi| Interval {
            ratio: 1.0,
            lo,
            hi,
            rounds: 3,
        };
        assert_eq!(side(&i(0.7, 0.9), 1.0, ["lower", "higher"]), "lower");
        assert_eq!(side(&i(1.1, 1.3), 1.0, ["lower", "higher"]), "higher");
        assert_eq!(side(&i(0.9, 1.1), 1.0, ["lower", "higher"]), "undecided");
        assert_eq!(
            side(&i(0.0, f64::INFINITY), 0.5, ["within", "beyond"]),
            "undecided"
        );
    }
}
