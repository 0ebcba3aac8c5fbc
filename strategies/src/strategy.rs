use std::sync::Arc;

use async_trait::async_trait;
use concord_featuregates::{ConflictPolicy, StrategyName};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::plan::Plan;
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
/// off and re-read on conflict, record. The trait is implemented by
/// concord's strategies only.
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
/// use concord_featuregates::{ConflictPolicy, StrategyName};
///
/// let strict = try_strategy_for(StrategyName::Strict, ConflictPolicy::default())?;
/// let written = strict
///     .write(&target, &pod, &Mutation::from(Intent::remove_finalizer("example.com/cleanup")))
///     .await?;
/// println!("{} requests", written.outcome.total_requests());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait WriteStrategy: Send + Sync + std::fmt::Debug {
    /// The strategy's description of its writes, which one runner carries
    /// out. Its type is concord's own: the strategies are the five (and
    /// the refused one) this crate builds.
    #[doc(hidden)]
    fn plan(&self) -> Plan<'_>;

    /// The strategy's name, as in configuration and metrics.
    fn name(&self) -> StrategyName {
        self.plan().name
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
/// cannot honour it, or a strategy name this version does not know.
pub fn try_strategy_for(
    name: StrategyName,
    policy: ConflictPolicy,
) -> Result<Arc<dyn WriteStrategy>, Error> {
    let refuse = |reason| Error::UnsupportedStrategy {
        strategy: name,
        policy: format!("{policy:?}"),
        reason,
    };
    let retry = match policy {
        ConflictPolicy::Retry(retry) => Some(retry),
        _ => None,
    };
    Ok(match (name, retry) {
        (StrategyName::Strict, _) => Arc::new(Strict::new(policy)),
        (StrategyName::Update, _) => Arc::new(Update::new(policy)),
        (StrategyName::Guarded, _) => Arc::new(Guarded::new(policy)),
        (StrategyName::Apply, Some(retry)) => Arc::new(Apply::new().with_retry(retry)),
        (StrategyName::Locked, Some(_)) => Arc::new(Locked::new()),
        (StrategyName::Lax, Some(_)) => Arc::new(Lax),
        (StrategyName::Apply | StrategyName::Locked | StrategyName::Lax, None) => {
            return Err(refuse(
                "only `strict`, `update` and `guarded` can hand a conflict back to requeue",
            ));
        }
        _ => return Err(refuse("this version of concord does not know the strategy")),
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

impl WriteStrategy for Refused {
    fn plan(&self) -> Plan<'_> {
        Plan::refused(self.name, self.policy.clone(), self.reason)
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
