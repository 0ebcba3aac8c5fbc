//! One target's comparison in one run, as the report holds it.

use serde::{Deserialize, Serialize};

use crate::stats::{Interval, Verdict};

/// One target's comparison in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetCheck {
    /// The contender measured.
    pub contender: String,
    /// The contender it is compared with.
    pub against: String,
    /// The ratio the target asks for at least.
    pub floor: f64,
    /// `contender / against` writes/s, paired by round.
    pub interval: Interval,
    /// What the interval says about `floor`.
    pub verdict: Verdict,
    /// The round count after which it was decided; `None` while undecided.
    #[serde(default)]
    pub decided_after_rounds: Option<u64>,
}
