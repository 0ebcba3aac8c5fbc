use std::sync::Arc;

use async_trait::async_trait;
use concord_featuregates::{ConflictPolicy, StrategyName};
use kube::core::DynamicObject;

use crate::{Apply, Error, Lax, Locked, Mutation, Strict, Target, Update, Written};

/// How a mutation reaches the API server.
///
/// Object-safe, so a registry can hold one `Arc<dyn WriteStrategy>` per
/// resource and operation. It works on [`DynamicObject`]s; the typed
/// [`Writer`](crate::Writer) converts.
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
/// use concord_strategies::{Intent, Mutation, strategy_for};
/// use concord_featuregates::{ConflictPolicy, StrategyName};
///
/// let strict = strategy_for(StrategyName::Strict, ConflictPolicy::default());
/// let written = strict
///     .write(&target, &pod, &Mutation::from(Intent::remove_finalizer("example.com/cleanup")))
///     .await?;
/// println!("{} requests", written.outcome.total_requests());
/// # Ok(()) }
/// ```
#[async_trait]
pub trait WriteStrategy: Send + Sync + std::fmt::Debug {
    /// The strategy's name, as in configuration and metrics.
    fn name(&self) -> StrategyName;

    /// Apply `mutation` to the object last seen as `observed` (typically
    /// from a reflector cache) and write it to `target`.
    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error>;
}

/// The strategy called `name`. `policy` is used by `strict` and `update`
/// and, for its retry bounds, by `apply`'s guarded fallback; `locked` uses
/// the process-wide lock table.
pub fn strategy_for(name: StrategyName, policy: ConflictPolicy) -> Arc<dyn WriteStrategy> {
    match name {
        StrategyName::Strict => Arc::new(Strict::new(policy)),
        StrategyName::Update => Arc::new(Update::new(policy)),
        StrategyName::Locked => Arc::new(Locked::new()),
        StrategyName::Apply => Arc::new(match policy {
            ConflictPolicy::Retry(retry) => Apply::new().with_retry(retry),
            _ => Apply::new(),
        }),
        _ => Arc::new(Lax),
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
}
