use async_trait::async_trait;
use concord_featuregates::{ConflictPolicy, StrategyName};
use kube::api::Patch;
use kube::core::DynamicObject;

use crate::merge_patch::{merge_diff, set_metadata};
use crate::session::{Answer, Session};
use crate::{Error, Mutation, Target, WriteStrategy, Written};

/// `strict`: the `lax` merge patch plus the observed
/// `metadata.resourceVersion` and `metadata.uid` — an optimistic lock.
///
/// On `409 Conflict` it re-reads the object, re-applies the mutation and
/// tries again within the [`ConflictPolicy`] (or, with
/// [`ConflictPolicy::Requeue`], returns [`Error::Conflict`] at once).
///
/// # Guarantees
///
/// The patch lands only on the exact version it was computed from, so no
/// writer's change — in this process or any other — is lost. A conflict
/// costs one `GET` and one more `PATCH`.
///
/// ```no_run
/// # async fn demo(target: concord_strategies::Target, pod: kube::core::DynamicObject)
/// # -> Result<(), concord_strategies::Error> {
/// use concord_featuregates::ConflictPolicy;
/// use concord_strategies::{Intent, Strict, WriteStrategy};
/// let strict = Strict::new(ConflictPolicy::default());
/// strict.write(&target, &pod, &Intent::remove_finalizer("kueue.x-k8s.io/managed").into()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Strict {
    policy: ConflictPolicy,
}

impl Strict {
    /// A `strict` strategy handling conflicts by `policy`.
    pub fn new(policy: ConflictPolicy) -> Self {
        Strict { policy }
    }
}

#[async_trait]
impl WriteStrategy for Strict {
    fn name(&self) -> StrategyName {
        StrategyName::Strict
    }

    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error> {
        let mut session = Session::start(StrategyName::Strict, target, observed, mutation)?;
        let result = run(&mut session, &self.policy, observed, mutation).await;
        session.finish(result)
    }
}

async fn run(
    session: &mut Session<'_>,
    policy: &ConflictPolicy,
    observed: &DynamicObject,
    mutation: &Mutation,
) -> Result<Option<DynamicObject>, Error> {
    let mut current = observed.clone();
    let mut attempts = 0;
    loop {
        let json = session.to_json(&current)?;
        let Some(next) = session.mutate(mutation, &json)? else {
            session.outcome.unchanged = attempts == 0;
            return Ok(Some(current));
        };
        let Some(mut patch) = merge_diff(&json, &next) else {
            session.outcome.unchanged = attempts == 0;
            return Ok(Some(current));
        };
        let Some(rv) = current.metadata.resource_version.as_deref() else {
            return Err(Error::MissingField {
                object: session.key.clone(),
                field: "metadata.resourceVersion",
            });
        };
        set_metadata(&mut patch, "resourceVersion", rv);
        if let Some(uid) = current.metadata.uid.as_deref() {
            set_metadata(&mut patch, "uid", uid);
        }
        attempts += 1;
        match session.patch(&Patch::Merge(patch)).await? {
            Answer::Stored(stored) => return Ok(Some(stored)),
            Answer::NotFound => return session.gone().map(|()| None),
            Answer::Invalid(err) => return session.invalid(err).await,
            Answer::Conflict => {
                session.after_conflict(policy, attempts).await?;
                match session.get().await? {
                    Some(fresh) => current = fresh,
                    None => return session.gone().map(|()| None),
                }
            }
        }
    }
}
