use async_trait::async_trait;
use concord_featuregates::{ConflictPolicy, StrategyName};
use kube::core::DynamicObject;

use crate::session::{Answer, Session};
use crate::{Error, Mutation, Target, WriteStrategy, Written};

/// `update`: a `PUT` of the whole mutated object carrying its
/// `resourceVersion` (and uid, which the server checks as a precondition).
///
/// The first attempt mutates the observed object, so an up-to-date cache
/// costs one request; after a `409 Conflict` it does `GET` → mutate → `PUT`
/// within the [`ConflictPolicy`]. This is Argo Workflows' fix, minus the
/// live read before every attempt that later had to go for the API load it
/// caused.
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

#[async_trait]
impl WriteStrategy for Update {
    fn name(&self) -> StrategyName {
        StrategyName::Update
    }

    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error> {
        let mut session = Session::start(StrategyName::Update, target, observed, mutation)?;
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
        if current.metadata.resource_version.is_none() {
            return Err(Error::MissingField {
                object: session.key.clone(),
                field: "metadata.resourceVersion",
            });
        }
        let next = session.json_to_object(next)?;
        attempts += 1;
        match session.replace(&next).await? {
            Answer::Stored(stored) => return Ok(Some(*stored)),
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
