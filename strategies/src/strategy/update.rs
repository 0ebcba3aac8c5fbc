use concord_featuregates::{ConflictPolicy, StrategyName};

use crate::WriteStrategy;
use crate::runner::plan::Plan;

/// `update`: a `PUT` of the whole mutated object carrying its
/// `resourceVersion` (and uid, which the server checks as a precondition).
///
/// The first attempt mutates the observed object, so an up-to-date cache
/// costs one request; after a `409 Conflict` it does `GET` → mutate → `PUT`
/// within the [`ConflictPolicy`]. This is Argo Workflows' fix, minus the
/// live read before every attempt that later had to go for the API load it
/// caused.
///
/// The `PUT` is built from the complete stored JSON, never from a typed
/// copy that may lack fields: given a typed [`Observed`](crate::Observed) it reads the object
/// first (under [`ConflictPolicy::Requeue`], a read that finds the object
/// changed since the observation is a [`Error::Conflict`](crate::Error::Conflict)). `resourceVersion` and `uid` are set after the mutation, so no
/// mutation can turn the `PUT` into an unconditional one.
///
/// # Caveats
///
/// Any change to the object since the observation conflicts, even one to an
/// unrelated field, and the whole object travels on the wire.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_featuregates::ConflictPolicy;
/// use concord_strategies::{Intent, Update, WriteStrategy};
/// Update::new(ConflictPolicy::default())
///     .write(&target, &pod, &Intent::remove_finalizer("workflows.argoproj.io/status").into())
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Update {
    policy: ConflictPolicy,
}

impl Update {
    /// An `update` strategy handling conflicts by `policy`.
    pub fn new(policy: ConflictPolicy) -> Self {
        Update { policy }
    }
}

impl crate::strategy::write_strategy::sealed::Sealed for Update {
    fn plan(&self) -> Plan<'_> {
        Plan::of(StrategyName::Update, &self.policy, None)
    }
}

impl WriteStrategy for Update {}
