use concord_featuregates::{ConflictPolicy, StrategyName};

use crate::WriteStrategy;
use crate::runner::plan::Plan;

/// `guarded`: a patch whose preconditions are exactly the fields and
/// entries it writes, and always the uid.
///
/// - Finalizers of a built-in type (which the API server strategic-merges):
///   the merge directives that add (`finalizers: [ours]`) or delete
///   (`$deleteFromPrimitiveList/finalizers: [ours]`) exactly that entry,
///   with the uid as the only precondition: another writer's finalizers,
///   added first or last, can never trip it, and a retry never duplicates.
/// - Everything else (labels, annotations, conditions, status fragments,
///   closures, custom resources' finalizers): a JSON patch that `test`s the
///   old value of exactly each path the mutation changes (`null` before an
///   add, the whole list before an append, the `type` or `name` of each
///   list entry it reaches into), then changes it.
///
/// A tripped test is a conflict: the object is re-read from the shared
/// cache (a `GET` when it has not caught up), the mutation re-applied, and
/// the write retried within the [`ConflictPolicy`] (or handed back with
/// [`ConflictPolicy::Requeue`]). Except for a copy that may show what the
/// server does not store (a typed copy shows a type's defaults, such as an
/// empty map): when its test trips, the object is read, and if it is still
/// the version the copy was read at, the patch is built again from that
/// stored form and sent, with no conflict counted, under either policy.
///
/// # Guarantees
///
/// No lost update of any field anyone writes: a concurrent change to a
/// path this write changes trips its test; a concurrent change to any other
/// path never conflicts. A recreated object is never written (the uid).
///
/// # Caveats
///
/// It does not protect a decision the reconciler took from a field it did
/// not write — that is [`Strict`](crate::Strict)'s whole-object guarantee —
/// unless the mutation names that field with
/// [`Mutation::depending_on`](crate::Mutation::depending_on), which is
/// tested like the written ones.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_featuregates::ConflictPolicy;
/// use concord_strategies::{Guarded, Intent, WriteStrategy};
/// Guarded::new(ConflictPolicy::default())
///     .write(&target, &pod, &Intent::remove_finalizer("kueue.x-k8s.io/managed").into())
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Guarded {
    policy: ConflictPolicy,
}

impl Guarded {
    /// A `guarded` strategy handling tripped guards by `policy`.
    pub fn new(policy: ConflictPolicy) -> Self {
        Guarded { policy }
    }
}

impl crate::strategy::write_strategy::sealed::Sealed for Guarded {
    fn plan(&self) -> Plan<'_> {
        Plan::of(StrategyName::Guarded, &self.policy, None)
    }
}

impl WriteStrategy for Guarded {}
