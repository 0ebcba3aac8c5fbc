use std::sync::Arc;

use concord_featuregates::StrategyName;

use crate::runner::plan::{HANDED_BACK, Plan};
use crate::{LockTable, WriteStrategy};

/// `locked`: an in-process async mutex per object around a fresh `GET`,
/// the mutation, and a merge patch without a resourceVersion.
///
/// Argo Workflows' first fix. Writes of the same object through the
/// target's [turns](crate::WriteTurns) (a manager's writes, of every
/// strategy) wait for each other, so each computes its patch from what the
/// previous one wrote; given a [`LockTable`], `locked` writes sharing the
/// table also exclude each other across targets.
///
/// # Caveats
///
/// A mutex protects only the writes that share it, in one process. A write from another
/// process (another controller, a second replica, `kubectl`) between the
/// `GET` and the `PATCH` is lost exactly as with `lax`. Same-object writes
/// are serialised and each costs a `GET`.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_strategies::{Intent, Locked, WriteStrategy};
/// Locked::new().write(&target, &pod, &Intent::remove_finalizer("example.com/f").into()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Locked {
    table: Option<Arc<LockTable>>,
}

impl Locked {
    /// A `locked` strategy excluding the writes that share the target's
    /// turns.
    pub fn new() -> Self {
        Locked { table: None }
    }

    /// A `locked` strategy that also holds `table`'s lock of the object, so
    /// `locked` writes sharing the table exclude each other whatever their
    /// targets' turns.
    pub fn with_table(table: Arc<LockTable>) -> Self {
        Locked { table: Some(table) }
    }

    /// The lock table in use, if any.
    pub fn table(&self) -> Option<&Arc<LockTable>> {
        self.table.as_ref()
    }
}

impl Default for Locked {
    fn default() -> Self {
        Locked::new()
    }
}

impl crate::strategy::write_strategy::sealed::Sealed for Locked {
    fn plan(&self) -> Plan<'_> {
        Plan::of(StrategyName::Locked, HANDED_BACK, self.table.as_deref())
    }
}

impl WriteStrategy for Locked {}
