use std::sync::Arc;

use async_trait::async_trait;
use concord_featuregates::{ConflictPolicy, StrategyDescription, StrategyName};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::plan::{Plan, REQUEUE_REFUSED};
use crate::{
    Apply, Error, Guarded, Lax, Locked, Mutation, ObjectKey, Observed, Strict, Target, Update,
    Written,
};

/// How a mutation reaches the API server.
///
/// Object-safe, so a registry can hold one `Arc<dyn WriteStrategy>` per
/// resource and operation. It works on JSON: the typed
/// [`Writer`](crate::Writer) converts once on the way in and once on the
/// way out; [`write`](Self::write) does the same for [`DynamicObject`]s.
///
/// Every strategy describes its writes as a plan (how its request is
/// built, whether it reads first, what a conflict means) and one runner
/// carries every plan out: mutate, skip if unchanged, send, classify, back
/// off and re-read on conflict, record. What each strategy does is its
/// [`StrategyDescription`]. The trait is sealed: concord's six strategies
/// are its only implementations, and a new strategy is a new description.
///
/// # Guarantees
///
/// A mutation that does not change the object sends no request. A write
/// never lands on an object whose uid differs from the observed one when the
/// strategy re-reads (`strict`, `update`, `locked`, `apply` fallback).
///
/// # Errors
///
/// See [`Error`]: conflicts beyond the policy, permanent rejections,
/// recreated or missing objects, mutations the strategy cannot express.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_strategies::{Intent, Mutation, try_strategy_for};
/// use concord_featuregates::{ConflictPolicy, StrategyDescription, StrategyName};
///
/// let strict = try_strategy_for(StrategyName::Strict, ConflictPolicy::default())?;
/// let written = strict
///     .write(&target, &pod, &Mutation::from(Intent::remove_finalizer("example.com/cleanup")))
///     .await?;
/// println!("{} requests", written.outcome.total_requests());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait WriteStrategy: sealed::Sealed + Send + Sync + std::fmt::Debug {
    /// The strategy's name, as in configuration and metrics.
    fn name(&self) -> StrategyName {
        self.plan().name
    }

    /// What the strategy does: its request, its read, its lock, what a
    /// conflict means, what it serves.
    fn description(&self) -> StrategyDescription {
        self.name().description()
    }

    /// The RBAC verbs on the written resource this strategy needs, besides
    /// the `list` and `watch` a controller needs anyway.
    fn verbs(&self) -> &'static [&'static str] {
        self.plan().verbs
    }

    /// Apply `mutation` to the object last seen as `observed` and write it
    /// to `target`; the written object comes back as JSON.
    async fn write_json(
        &self,
        target: &Target,
        observed: Observed,
        mutation: &Mutation,
    ) -> Result<Written<Value>, Error> {
        crate::write_loop::run(self.plan(), target, observed, mutation).await
    }

    /// Apply `mutation` to the object last seen as `observed` (typically
    /// from a reflector cache) and write it to `target`.
    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error> {
        let convert = |source| Error::Convert {
            object: ObjectKey::of(target.resource(), observed),
            source,
        };
        let json = serde_json::to_value(observed).map_err(convert)?;
        let written = self
            .write_json(target, Observed::complete(json), mutation)
            .await?;
        let object = written
            .object
            .map(serde_json::from_value)
            .transpose()
            .map_err(convert)?;
        Ok(Written::new(object, written.outcome))
    }
}

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

impl sealed::Sealed for Refused {
    fn plan(&self) -> Plan<'_> {
        Plan::refused(self.name, self.policy.clone(), self.reason)
    }
}

impl WriteStrategy for Refused {}

/// The sealing of [`WriteStrategy`]: a strategy's plan, read by the one
/// runner, is concord's own type, so no strategy is built outside this
/// crate.
pub(crate) mod sealed {
    /// Implemented by concord's strategies only.
    #[allow(unreachable_pub)]
    pub trait Sealed {
        /// The plan the runner carries out, read from the strategy's
        /// description.
        fn plan(&self) -> crate::plan::Plan<'_>;
    }
}

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
