use async_trait::async_trait;
use concord_featuregates::{StrategyDescription, StrategyName};
use kube::core::DynamicObject;
use serde_json::Value;

use crate::{Error, Mutation, ObjectKey, Observed, Target, Written};

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
        crate::runner::write_loop::run(self.plan(), target, observed, mutation).await
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

/// The sealing of [`WriteStrategy`]: a strategy's plan, read by the one
/// runner, is concord's own type, so no strategy is built outside this
/// crate.
pub(crate) mod sealed {
    /// Implemented by concord's strategies only.
    #[allow(unreachable_pub)]
    pub trait Sealed {
        /// The plan the runner carries out, read from the strategy's
        /// description.
        fn plan(&self) -> crate::runner::plan::Plan<'_>;
    }
}
