use concord_featuregates::{ConflictPolicy, RetryPolicy, StrategyName};

use crate::WriteStrategy;
use crate::runner::plan::Plan;

/// `apply`: server-side apply with a field manager per intent, so each
/// owner's finalizer, label or annotation is an entry of its own.
///
/// Adding (`AddFinalizer`, `SetLabel`, `SetAnnotation`, status intents)
/// applies a configuration holding just that entry under
/// `<manager>/finalizer/<name>` (or `label/<key>`, `annotation/<key>`,
/// `condition/<type>`, `status/<fields>`), with `force`. `metadata.finalizers` is a set in SSA, so concurrent owners never
/// overwrite each other and nothing is read first.
///
/// Removing releases the entry by applying an empty configuration under the
/// same manager — when the observed `managedFields` show that manager owns
/// it. SSA removes an entry only when no other manager owns it too, and the
/// creator of an object (an `Update` manager) usually does. So if the entry
/// survives, or was never ours, `apply` falls back to the `guarded`
/// strategy's request: for a built-in type the strategic-merge directive
/// deleting exactly that entry (guarded by the uid), for a custom resource
/// a JSON patch that `test`s the uid and the entry at each index before
/// removing it — a failed `test` counts as a conflict and is retried on a
/// fresh read within the retry policy ([`Outcome::fell_back`](crate::Outcome)).
///
/// # Caveats
///
/// Arbitrary closures are refused ([`Error::UnsupportedMutation`](crate::Error::UnsupportedMutation)); the
/// configuration layer rejects that combination at load time through
/// [`StrategyDescription::serves`](concord_featuregates::StrategyDescription::serves). So is a `null` (a deletion) in a
/// [`Intent::MergeStatus`](crate::Intent::MergeStatus) fragment, which an apply configuration cannot
/// carry: refused before anything is sent, never silently dropped.
/// A mutation is all-or-nothing: one apply request carries one field
/// manager, so a mutation whose intents change the object in more than one
/// place is sent as one guarded patch instead (a JSON patch that `test`s
/// every entry it removes or replaces, or the `strict` merge patch with
/// `resourceVersion` and `uid` where entry tests cannot express the
/// change) — never one request per intent, so a rejection leaves the object
/// as it was. Both fallbacks (the guarded removal and the guarded patch)
/// are reported in [`Outcome::fell_back`](crate::Outcome) and the
/// `fell_back` metric. A status fragment is owned by a manager named
/// after the fields it sets: a later fragment setting the same fields but
/// omitting a nested one releases that nested field.
/// A condition is applied as one list entry only where the observed
/// managed fields show `status.conditions` to be a map list keyed by
/// `type`; otherwise (an atomic list, a CRD's default, or nothing to tell
/// by yet) it goes as the guarded patch, since applying one entry to an
/// atomic list would replace every other manager's.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_strategies::{Apply, Intent, WriteStrategy};
/// Apply::new().write(&target, &pod, &Intent::add_finalizer("example.com/f").into()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Apply {
    /// Always a retry policy: `apply` cannot hand a conflict back.
    policy: ConflictPolicy,
}

impl Apply {
    /// An `apply` strategy whose guarded fallback retries within client-go's
    /// default policy.
    pub fn new() -> Self {
        Apply::default()
    }

    /// Retry a failed fallback guard within `retry`.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.policy = ConflictPolicy::Retry(retry);
        self
    }

    /// An `apply` strategy under `policy`, which [`try_strategy_for`](crate::try_strategy_for)
    /// has checked is a retry policy.
    pub(crate) fn with_policy(policy: ConflictPolicy) -> Self {
        Apply { policy }
    }
}

impl crate::strategy::write_strategy::sealed::Sealed for Apply {
    fn plan(&self) -> Plan<'_> {
        Plan::of(StrategyName::Apply, &self.policy, None)
    }
}

impl WriteStrategy for Apply {}
