use concord_featuregates::StrategyName;

use crate::WriteStrategy;
use crate::runner::plan::{HANDED_BACK, Plan};

/// `lax`: a JSON merge patch computed from the observed object, with no
/// precondition.
///
/// One request, never retried on a conflict — and no protection: a merge
/// patch replaces lists whole, so a finalizer another writer added after
/// the observation is silently dropped. (A change to a list of objects,
/// which the merge patch would replace whole, goes as JSON-patch
/// operations testing the entries it changes; when one changed meanwhile
/// the write fails with [`Error::Conflict`](crate::Error::Conflict).) This is the non-strict patch that lost Kueue's
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

impl crate::strategy::write_strategy::sealed::Sealed for Lax {
    fn plan(&self) -> Plan<'_> {
        Plan::of(StrategyName::Lax, HANDED_BACK, None)
    }
}

impl WriteStrategy for Lax {}
