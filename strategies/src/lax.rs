use async_trait::async_trait;
use concord_featuregates::StrategyName;
use kube::api::Patch;
use kube::core::DynamicObject;

use crate::merge_patch::merge_diff;
use crate::session::{Answer, Session};
use crate::{Error, Mutation, Target, WriteStrategy, Written};

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

    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error> {
        let mut session = Session::start(StrategyName::Lax, target, observed, mutation)?;
        let result = run(&mut session, observed, mutation).await;
        session.finish(result)
    }
}

async fn run(
    session: &mut Session<'_>,
    observed: &DynamicObject,
    mutation: &Mutation,
) -> Result<Option<DynamicObject>, Error> {
    let current = session.to_json(observed)?;
    let Some(next) = session.mutate(mutation, &current)? else {
        session.outcome.unchanged = true;
        return Ok(Some(observed.clone()));
    };
    let Some(patch) = merge_diff(&current, &next) else {
        session.outcome.unchanged = true;
        return Ok(Some(observed.clone()));
    };
    match session.patch(&Patch::Merge(patch)).await? {
        Answer::Stored(stored) => Ok(Some(*stored)),
        Answer::NotFound => session.gone().map(|()| None),
        // Without a precondition the server has nothing to conflict on;
        // report one anyway rather than pretend it succeeded.
        Answer::Conflict => Err(Error::Conflict {
            object: session.key.clone(),
        }),
        Answer::Invalid(err) => Err(Error::Rejected {
            object: session.key.clone(),
            source: err,
        }),
    }
}
