//! Creating and deleting whole objects: the strategy table's `create` and
//! `delete` operations.
//!
//! Neither has a mutation to carry onto a newer copy, so neither retries a
//! conflict: a create meets an object of its name (`409 AlreadyExists`),
//! a delete meets a copy that changed since it was read (its
//! `resourceVersion` precondition fails). What each strategy does then:
//!
//! | strategy | create of an existing name | delete |
//! | --- | --- | --- |
//! | `strict`, `update`, `guarded` | [`Error::AlreadyExists`] | uid and `resourceVersion` preconditions: a changed copy is [`Error::Conflict`], for the reconciler to decide again |
//! | `lax` | done: the stored object is read and handed back | the uid precondition only: whatever the object holds now is deleted |
//!
//! Under every strategy a delete never removes a successor: when the
//! object was deleted, or deleted and created again under the same name
//! (another uid), the delete is done and [`Outcome::gone`] says so.
//! Transient failures are retried as every write's are (`session.rs`).

use concord_featuregates::{Operation, StrategyName};
use serde_json::Value;

use crate::observed::meta;
use crate::request::Body;
use crate::session::{Answer, Session};
use crate::{Error, Mutation, ObjectKey, Target, Written};

/// How many times `lax` creates again an object that vanished between its
/// `409` and the read of the stored copy.
const LAX_CREATE_ATTEMPTS: u32 = 3;

/// Creates `object` (it must carry `metadata.name`, and its namespace when
/// the resource is namespaced).
pub(crate) async fn create(
    target: &Target,
    strategy: StrategyName,
    object: Value,
) -> Result<Written<Value>, Error> {
    let mut session = start(target, strategy, &object, Operation::Create)?;
    let result = create_in(&mut session, strategy, object).await;
    session.finish(result)
}

/// Deletes the object `observed` is a copy of (see the module docs for the
/// preconditions each strategy sends).
pub(crate) async fn delete(
    target: &Target,
    strategy: StrategyName,
    observed: Value,
) -> Result<Written<Value>, Error> {
    let mut session = start(target, strategy, &observed, Operation::Delete)?;
    let result = delete_in(&mut session, strategy, &observed).await;
    session.finish(result)
}

fn start<'a>(
    target: &'a Target,
    strategy: StrategyName,
    object: &Value,
    operation: Operation,
) -> Result<Session<'a>, Error> {
    let session = Session::start(strategy, target, object, &Mutation::new())?;
    if !strategy.serves(operation) {
        return Err(Error::UnsupportedMutation {
            strategy,
            what: match operation {
                Operation::Create => "creating an object (`create`)",
                _ => "deleting an object (`delete`)",
            },
            object: session.key.clone(),
        });
    }
    Ok(session)
}

async fn create_in(
    session: &mut Session<'_>,
    strategy: StrategyName,
    object: Value,
) -> Result<Option<Value>, Error> {
    let namespace = session.namespace.clone();
    let body = Body::Create(object);
    for attempt in 1..=LAX_CREATE_ATTEMPTS {
        match session.send(&body).await? {
            Answer::Stored(stored) => return Ok(Some(stored)),
            Answer::Conflict if strategy == StrategyName::Lax => {
                session.outcome.conflicts += 1;
                if let Some(stored) = session.get().await? {
                    return Ok(Some(stored));
                }
                if attempt < LAX_CREATE_ATTEMPTS {
                    session.outcome.retries += 1;
                }
            }
            Answer::Conflict => {
                session.outcome.conflicts += 1;
                return Err(Error::AlreadyExists {
                    object: session.key.clone(),
                });
            }
            // A create meets `404 NotFound` only for a missing namespace.
            Answer::NotFound => {
                return Err(Error::NotFound {
                    object: ObjectKey::new("namespaces", None, namespace.unwrap_or_default()),
                });
            }
            Answer::Invalid(source) => {
                return Err(Error::Rejected {
                    object: session.key.clone(),
                    source,
                });
            }
        }
    }
    Err(Error::ConflictRetriesExhausted {
        object: session.key.clone(),
        attempts: LAX_CREATE_ATTEMPTS,
    })
}

async fn delete_in(
    session: &mut Session<'_>,
    strategy: StrategyName,
    observed: &Value,
) -> Result<Option<Value>, Error> {
    let uid = meta(observed, "uid").map(str::to_owned);
    let version = meta(observed, "resourceVersion").map(str::to_owned);
    let exact = strategy != StrategyName::Lax;
    let missing = match (&uid, &version) {
        (None, _) if exact => Some("metadata.uid"),
        (_, None) if exact => Some("metadata.resourceVersion"),
        _ => None,
    };
    if let Some(field) = missing {
        return Err(Error::MissingField {
            object: session.key.clone(),
            field,
        });
    }
    let body = Body::Delete {
        uid,
        resource_version: version.filter(|_| exact),
    };
    match session.send(&body).await? {
        // The object itself while its finalizers hold it, else a `Status`.
        Answer::Stored(answer) if answer.get("kind").and_then(Value::as_str) == Some("Status") => {
            Ok(None)
        }
        Answer::Stored(object) => Ok(Some(object)),
        Answer::NotFound => {
            session.outcome.gone = true;
            Ok(None)
        }
        Answer::Conflict => {
            session.outcome.conflicts += 1;
            match session.get().await {
                Ok(None) | Err(Error::ObjectRecreated { .. }) => {
                    session.outcome.gone = true;
                    Ok(None)
                }
                Ok(Some(_)) => Err(Error::Conflict {
                    object: session.key.clone(),
                }),
                Err(error) => Err(error),
            }
        }
        Answer::Invalid(source) => Err(Error::Rejected {
            object: session.key.clone(),
            source,
        }),
    }
}
