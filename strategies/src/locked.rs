use std::sync::Arc;

use concord_featuregates::StrategyName;

use crate::plan::{Plan, Read};
use crate::request::Request;
use crate::write_loop::OnConflict;
use crate::{LockTable, WriteStrategy};

/// `locked`: an in-process async mutex per object around a fresh `GET`,
/// the mutation, and a merge patch without a resourceVersion.
///
/// Argo Workflows' first fix. Tasks of this process writing the same object
/// take turns, so each computes its patch from what the previous one wrote.
///
/// # Caveats
///
/// A mutex protects only the tasks of one process. A write from another
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
    table: Arc<LockTable>,
}

impl Locked {
    /// A `locked` strategy on the process-wide [`LockTable::global`].
    pub fn new() -> Self {
        Locked {
            table: LockTable::global(),
        }
    }

    /// A `locked` strategy on its own table.
    pub fn with_table(table: Arc<LockTable>) -> Self {
        Locked { table }
    }

    /// The lock table in use.
    pub fn table(&self) -> &Arc<LockTable> {
        &self.table
    }
}

impl Default for Locked {
    fn default() -> Self {
        Locked::new()
    }
}

impl WriteStrategy for Locked {
    fn plan(&self) -> Plan<'_> {
        // The uid guards against a recreated object; deliberately no
        // resourceVersion — that would make this `strict`.
        let request = Request::MergeWithUid;
        Plan::new(
            StrategyName::Locked,
            &["get", "patch"],
            request,
            OnConflict::Fail,
        )
        .reading(Read::Always, Some(&self.table))
    }
}
