use std::fmt;
use std::str::FromStr;

/// The name of a write strategy, the same word in code, configuration,
/// metrics labels and the book.
///
/// ```
/// use concord_featuregates::StrategyName;
/// let s: StrategyName = "strict".parse().unwrap();
/// assert_eq!(s, StrategyName::Strict);
/// assert_eq!(s.to_string(), "strict");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StrategyName {
    /// JSON merge patch computed from the observed object, no precondition.
    Lax,
    /// JSON merge patch carrying the observed `metadata.resourceVersion`.
    Strict,
    /// PUT of the mutated object with its resourceVersion.
    Update,
    /// Per-object in-process mutex around fresh read, compute and patch.
    Locked,
    /// Server-side apply with a field manager per intent.
    Apply,
    /// A patch whose preconditions are exactly the fields and entries it
    /// writes (strategic-merge directives for one finalizer on built-in
    /// types, JSON-patch `test`s of the old values otherwise), always the uid.
    Guarded,
}

impl StrategyName {
    /// Every strategy, in the order the book and reports list them.
    pub const ALL: [StrategyName; 6] = [
        StrategyName::Lax,
        StrategyName::Strict,
        StrategyName::Update,
        StrategyName::Locked,
        StrategyName::Apply,
        StrategyName::Guarded,
    ];

    /// The configuration and metrics-label spelling of this strategy.
    pub const fn as_str(self) -> &'static str {
        match self {
            StrategyName::Lax => "lax",
            StrategyName::Strict => "strict",
            StrategyName::Update => "update",
            StrategyName::Locked => "locked",
            StrategyName::Apply => "apply",
            StrategyName::Guarded => "guarded",
        }
    }
}

impl fmt::Display for StrategyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error returned when a string names no strategy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}` (expected one of lax, strict, update, locked, apply, guarded)")]
pub struct UnknownStrategy(pub String);

impl FromStr for StrategyName {
    type Err = UnknownStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StrategyName::ALL
            .into_iter()
            .find(|name| name.as_str() == s)
            .ok_or_else(|| UnknownStrategy(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Operation;

    #[test]
    fn names_round_trip() {
        for name in StrategyName::ALL {
            assert_eq!(name.as_str().parse::<StrategyName>(), Ok(name));
        }
    }

    #[test]
    fn parse_rejects_unknown_name() {
        let err = "optimistic".parse::<StrategyName>().unwrap_err();
        assert!(err.to_string().contains("`optimistic`"));
    }

    #[test]
    fn only_apply_serves_owned_children() {
        assert!(
            StrategyName::Apply
                .description()
                .serves(Operation::ApplyOwned)
        );
        for name in StrategyName::ALL {
            assert_eq!(
                name.description().serves(Operation::ApplyOwned),
                name == StrategyName::Apply
            );
        }
    }

    #[test]
    fn apply_cannot_serve_closures() {
        assert!(!StrategyName::Apply.description().serves(Operation::Other));
        assert!(
            StrategyName::Apply
                .description()
                .serves(Operation::RemoveFinalizer)
        );
        assert!(StrategyName::Lax.description().serves(Operation::Other));
    }
}
