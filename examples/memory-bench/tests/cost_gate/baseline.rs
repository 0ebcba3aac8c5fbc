//! The committed baseline and the rule that judges a run against it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;

/// Where the baseline lives, beside the tests' `Cargo.toml`.
pub(crate) const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cost-baseline.yaml");

/// The command that rewrites the baseline from a run.
pub(crate) const BLESS: &str =
    "CONCORD_BLESS=1 cargo test -p concord-memory-bench --test cost_gate";

// ANCHOR: rule
/// A count fails when it exceeds its baseline by more than this share.
pub(crate) const TOLERANCE: f64 = 0.10;
/// A count below this share of its baseline passes, reported as an
/// improvement to re-bless, so the gate keeps its edge.
pub(crate) const IMPROVED: f64 = 0.70;
// ANCHOR_END: rule

/// One count of a run: its key in the baseline, what it counts, its value.
#[derive(Clone, Debug)]
pub(crate) struct Figure {
    pub(crate) key: String,
    pub(crate) what: String,
    pub(crate) value: f64,
}

/// What a figure's comparison with its baseline says.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Verdict {
    Within,
    Exceeded,
    Improved,
    Unknown,
}

impl Verdict {
    fn of(measured: f64, baseline: Option<f64>) -> Verdict {
        match baseline {
            None => Verdict::Unknown,
            Some(b) if measured > b * (1.0 + TOLERANCE) => Verdict::Exceeded,
            Some(b) if measured < b * IMPROVED => Verdict::Improved,
            Some(_) => Verdict::Within,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Verdict::Within => "ok",
            Verdict::Exceeded => "EXCEEDED",
            Verdict::Improved => "improved, re-bless",
            Verdict::Unknown => "no baseline",
        }
    }
}

/// The baseline's figures by key.
///
/// # Errors
///
/// When the file cannot be read or is not a mapping of numbers.
pub(crate) fn read(path: &Path) -> anyhow::Result<BTreeMap<String, f64>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The baseline file for `figures`: a header saying what it is and how to
/// rewrite it, then each figure under a comment saying what it counts.
pub(crate) fn render(figures: &[Figure]) -> String {
    let mut text = format!(
        "# The cost gate's baseline: what examples/memory-bench/tests/cost_gate/ counts for\n\
         # its fixed, seeded workload on the embedded control plane. The test fails\n\
         # when a count exceeds its figure here by more than {:.0}%, and reports\n\
         # one below {:.0}% of it as an improvement to re-bless. After an intended\n\
         # change, rewrite this file with\n\
         #   {BLESS}\n\
         # and commit it with the change, saying why the counts moved.\n",
        TOLERANCE * 100.0,
        IMPROVED * 100.0,
    );
    for figure in figures {
        text.push_str(&format!(
            "\n# {}\n{}: {}\n",
            figure.what,
            figure.key,
            rounded(figure.value)
        ));
    }
    text
}

/// A figure as the baseline keeps it: two decimals below 10, one below
/// 1,000, whole above.
fn rounded(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.2}")
    } else if value < 1000.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

/// Each figure beside its baseline and limit, with its verdict; and the
/// figures that exceeded theirs or have none, with their verdicts.
pub(crate) fn judge(figures: &[Figure], baseline: &BTreeMap<String, f64>) -> (String, Vec<String>) {
    let mut table = format!(
        "{:<32} {:>10} {:>10} {:>10}  verdict\n",
        "count", "measured", "baseline", "limit"
    );
    let mut failed = Vec::new();
    for figure in figures {
        let base = baseline.get(&figure.key).copied();
        let verdict = Verdict::of(figure.value, base);
        let (base, limit) = match base {
            Some(b) => (rounded(b), rounded(b * (1.0 + TOLERANCE))),
            None => ("-".into(), "-".into()),
        };
        let word = match (verdict, baseline.get(&figure.key)) {
            (Verdict::Exceeded, Some(b)) => {
                format!(
                    "{} (+{:.1}%)",
                    verdict.word(),
                    (figure.value / b - 1.0) * 100.0
                )
            }
            _ => verdict.word().to_owned(),
        };
        table.push_str(&format!(
            "{:<32} {:>10} {:>10} {:>10}  {word}\n",
            figure.key,
            rounded(figure.value),
            base,
            limit
        ));
        if matches!(verdict, Verdict::Exceeded | Verdict::Unknown) {
            failed.push(format!("{} ({word})", figure.key));
        }
    }
    (table, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_fails_only_above_its_limit() {
        assert_eq!(Verdict::of(110.0, Some(100.0)), Verdict::Within);
        assert_eq!(Verdict::of(110.1, Some(100.0)), Verdict::Exceeded);
        assert_eq!(Verdict::of(70.0, Some(100.0)), Verdict::Within);
        assert_eq!(Verdict::of(69.9, Some(100.0)), Verdict::Improved);
        assert_eq!(Verdict::of(1.0, None), Verdict::Unknown);
    }
}
