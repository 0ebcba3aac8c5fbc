use std::fmt;

use super::duration::format_duration;
use crate::{ConflictPolicy, StrategyName};

/// What the table says for one (resource, operation) cell: the strategy and,
/// for `strict` and `update`, what to do on `409 Conflict`.
///
/// ```
/// use concord_featuregates::{ConflictPolicy, StrategyChoice, StrategyName};
/// let choice = StrategyChoice::new(StrategyName::Strict, ConflictPolicy::Requeue);
/// assert_eq!(choice.to_string(), "strict (on conflict: requeue)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct StrategyChoice {
    /// The strategy.
    pub strategy: StrategyName,
    /// The conflict policy; only `strict` and `update` use it, the other
    /// strategies carry the default.
    pub on_conflict: ConflictPolicy,
}

impl StrategyChoice {
    /// A cell value.
    pub const fn new(strategy: StrategyName, on_conflict: ConflictPolicy) -> Self {
        StrategyChoice {
            strategy,
            on_conflict,
        }
    }

    /// `strategy` with the default conflict policy (retry as client-go does).
    pub fn of(strategy: StrategyName) -> Self {
        StrategyChoice {
            strategy,
            on_conflict: ConflictPolicy::default(),
        }
    }

    /// The choice as a YAML flow value that the loader reads back.
    pub(crate) fn to_yaml(self) -> String {
        if !self.strategy.description().takes_conflict_policy() {
            return self.strategy.to_string();
        }
        match self.on_conflict {
            ConflictPolicy::Requeue => {
                format!("{{strategy: {}, onConflict: requeue}}", self.strategy)
            }
            ConflictPolicy::Retry(retry) => format!(
                "{{strategy: {}, onConflict: retry, retry: {{steps: {}, initial: {}, factor: {:?}, jitter: {:?}, cap: {}}}}}",
                self.strategy,
                retry.steps,
                format_duration(retry.initial),
                retry.factor,
                retry.jitter,
                format_duration(retry.cap)
            ),
        }
    }
}

impl fmt::Display for StrategyChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.strategy.description().takes_conflict_policy() {
            return write!(f, "{}", self.strategy);
        }
        match self.on_conflict {
            ConflictPolicy::Requeue => write!(f, "{} (on conflict: requeue)", self.strategy),
            ConflictPolicy::Retry(retry) => write!(
                f,
                "{} (on conflict: retry {} steps from {}, factor {}, jitter {}, cap {})",
                self.strategy,
                retry.steps,
                format_duration(retry.initial),
                retry.factor,
                retry.jitter,
                format_duration(retry.cap)
            ),
        }
    }
}
