use std::sync::Arc;

use async_trait::async_trait;
use concord_featuregates::StrategyName;
use kube::api::Patch;
use kube::core::DynamicObject;

use crate::merge_patch::{merge_diff, set_metadata};
use crate::session::{Answer, Session};
use crate::{Error, LockTable, Mutation, Target, WriteStrategy, Written};

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

#[async_trait]
impl WriteStrategy for Locked {
    fn name(&self) -> StrategyName {
        StrategyName::Locked
    }

    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error> {
        let mut session = Session::start(StrategyName::Locked, target, observed, mutation)?;
        let result = {
            let _held = self.table.lock(session.key.clone()).await;
            run(&mut session, mutation).await
        };
        session.finish(result)
    }
}

async fn run(
    session: &mut Session<'_>,
    mutation: &Mutation,
) -> Result<Option<DynamicObject>, Error> {
    let Some(fresh) = session.get().await? else {
        return session.gone().map(|()| None);
    };
    let json = session.to_json(&fresh)?;
    let Some(next) = session.mutate(mutation, &json)? else {
        session.outcome.unchanged = true;
        return Ok(Some(fresh));
    };
    let Some(mut patch) = merge_diff(&json, &next) else {
        session.outcome.unchanged = true;
        return Ok(Some(fresh));
    };
    // The uid guards against a recreated object; deliberately no
    // resourceVersion — that would make this `strict`.
    if let Some(uid) = fresh.metadata.uid.as_deref() {
        set_metadata(&mut patch, "uid", uid);
    }
    match session.patch(&Patch::Merge(patch)).await? {
        Answer::Stored(stored) => Ok(Some(*stored)),
        Answer::NotFound => session.gone().map(|()| None),
        Answer::Conflict => Err(Error::Conflict {
            object: session.key.clone(),
        }),
        Answer::Invalid(err) => session.invalid(err).await,
    }
}
