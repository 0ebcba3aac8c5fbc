use async_trait::async_trait;
use concord_featuregates::StrategyName;
use serde_json::Value;

use crate::request::Request;
use crate::write_loop::{OnConflict, write};
use crate::{Error, Mutation, Observed, Target, WriteStrategy, Written};

/// `lax`: a JSON merge patch computed from the observed object, with no
/// precondition.
///
/// One request, never a conflict — and no protection: a merge patch replaces
/// lists whole, so a finalizer another writer added after the observation
/// is silently dropped. This is the non-strict patch that lost Kueue's
/// finalizers, kept as the baseline the other strategies are measured
/// against.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_strategies::{Intent, Lax, WriteStrategy};
/// Lax.write(&target, &pod, &Intent::set_label("tier", "web").into()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Lax;

#[async_trait]
impl WriteStrategy for Lax {
    fn name(&self) -> StrategyName {
        StrategyName::Lax
    }

    fn verbs(&self) -> &'static [&'static str] {
        &["get", "patch"]
    }

    async fn write_json(
        &self,
        target: &Target,
        observed: Observed,
        mutation: &Mutation,
    ) -> Result<Written<Value>, Error> {
        // Without a precondition the server has nothing to conflict on; a
        // 409 is reported rather than passed off as success.
        let observed = observed.into_json();
        write(
            StrategyName::Lax,
            target,
            observed,
            mutation,
            Request::Merge,
            OnConflict::Fail,
        )
        .await
    }
}
