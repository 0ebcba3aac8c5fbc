//! A strategy by its name: what configuration builds, and what a refused
//! combination of name and policy becomes.

use std::sync::Arc;

use concord_featuregates::{ConflictPolicy, StrategyName};

use crate::runner::plan::{Plan, REQUEUE_REFUSED};
use crate::strategy::write_strategy::sealed::Sealed;
use crate::{Apply, Error, Guarded, Lax, Locked, Strict, Update, WriteStrategy};

/// The strategy called `name` handling conflicts by `policy`.
///
/// `strict`, `update` and `guarded` take any policy; `apply` takes a retry policy for
/// its guarded fallback; `lax` and `locked` meet no conflicts they could
/// retry, so they take only a retry policy (whose bounds they ignore).
///
/// # Errors
///
/// [`Error::UnsupportedStrategy`] for a `requeue` policy on a strategy that
/// cannot honour it.
pub fn try_strategy_for(
    name: StrategyName,
    policy: ConflictPolicy,
) -> Result<Arc<dyn WriteStrategy>, Error> {
    let refuse = |reason| Error::UnsupportedStrategy {
        strategy: name,
        policy: format!("{policy:?}"),
        reason,
    };
    if !name.description().accepts_requeue() && matches!(policy, ConflictPolicy::Requeue) {
        return Err(refuse(REQUEUE_REFUSED));
    }
    Ok(match name {
        StrategyName::Strict => Arc::new(Strict::new(policy)),
        StrategyName::Update => Arc::new(Update::new(policy)),
        StrategyName::Guarded => Arc::new(Guarded::new(policy)),
        StrategyName::Apply => Arc::new(Apply::with_policy(policy)),
        StrategyName::Locked => Arc::new(Locked::new()),
        StrategyName::Lax => Arc::new(Lax),
    })
}

/// The strategy called `name`, as [`try_strategy_for`]; a combination it
/// refuses gives a strategy whose every write fails with that error — never
/// a quiet downgrade. Configuration loaded through concord never builds
/// one: the loader refuses such cells with the file and key at fault.
pub fn strategy_for(name: StrategyName, policy: ConflictPolicy) -> Arc<dyn WriteStrategy> {
    try_strategy_for(name, policy).unwrap_or_else(|refused| {
        Arc::new(Refused {
            name,
            policy: format!("{policy:?}"),
            reason: match refused {
                Error::UnsupportedStrategy { reason, .. } => reason,
                _ => "refused",
            },
        })
    })
}

/// A strategy that could not be built: every write fails, naming why.
#[derive(Debug)]
struct Refused {
    name: StrategyName,
    policy: String,
    reason: &'static str,
}

impl Sealed for Refused {
    fn plan(&self) -> Plan<'_> {
        Plan::refused(self.name, self.policy.clone(), self.reason)
    }
}

impl WriteStrategy for Refused {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_for_builds_the_named_strategy() {
        for name in StrategyName::ALL {
            assert_eq!(strategy_for(name, ConflictPolicy::default()).name(), name);
        }
    }

    #[test]
    fn requeue_is_refused_where_it_cannot_be_honoured() {
        for name in [StrategyName::Apply, StrategyName::Lax, StrategyName::Locked] {
            let err = try_strategy_for(name, ConflictPolicy::Requeue).unwrap_err();
            assert!(err.to_string().contains("requeue"), "{name}: {err}");
        }
        for name in [
            StrategyName::Strict,
            StrategyName::Update,
            StrategyName::Guarded,
        ] {
            assert!(try_strategy_for(name, ConflictPolicy::Requeue).is_ok());
        }
    }

    #[tokio::test]
    async fn a_refused_strategy_fails_every_write() {
        let (target, seen) = crate::mock::target(vec![(
            200,
            crate::mock::config_map("1", serde_json::json!({})),
        )]);
        let apply = strategy_for(StrategyName::Apply, ConflictPolicy::Requeue);
        let observed = crate::mock::object(crate::mock::config_map("1", serde_json::json!({})));
        let err = apply
            .write(
                &target,
                &observed,
                &crate::Intent::set_label("a", "1").into(),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, Error::UnsupportedStrategy { .. }), "{err:?}");
        assert!(seen.lock().unwrap().is_empty());
    }
}
