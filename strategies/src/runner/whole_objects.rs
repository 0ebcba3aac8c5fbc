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
//! A create with `generateName` (and no name) names a new object whatever
//! the strategy: a `409` means the server found no free name and the
//! create is sent again, and the stored object comes back with the name
//! the server chose.
//!
//! Under every strategy a delete never removes a successor: when the
//! object was deleted, or deleted and created again under the same name
//! (another uid), the delete is done and [`Outcome::gone`] says so.
//! Transient failures are retried as every write's are (`session.rs`).

use concord_featuregates::{Operation, StrategyName, WholeObjects};
use serde_json::Value;

use crate::body::request::Body;
use crate::model::observed::meta;
use crate::runner::session::{Answer, Sent, Session};
use crate::{Error, Mutation, ObjectKey, Target, Written};

/// How many times a create is sent in all: by `lax` when the object of
/// its name vanished between its `409` and the read of the stored copy,
/// and under every strategy when a `generateName` create met a `409`.
const LAX_CREATE_ATTEMPTS: u32 = 3;

/// Creates `object` (it must carry `metadata.name` or
/// `metadata.generateName`, and its namespace when the resource is
/// namespaced).
///
/// A `generateName` create names no object before the server answers, so
/// it is sent again only where no object can have been stored: after a
/// `409` (the server ran out of names to try) and a `429`; after a `5xx`,
/// which may come after the object was stored, it is not sent again (a
/// second object would be created) and the answer is handed back.
pub(crate) async fn create(
    target: &Target,
    strategy: StrategyName,
    object: Value,
) -> Result<Written<Value>, Error> {
    let named = meta(&object, "name").filter(|name| !name.is_empty());
    let generated = match named {
        Some(_) => None,
        None => meta(&object, "generateName").map(|prefix| format!("{prefix}*")),
    };
    let name = named.map(str::to_owned).or_else(|| generated.clone());
    let session = Session::start_named(strategy, target, &object, &Mutation::new(), name)?;
    let mut session = serves(session, strategy, Operation::Create)?;
    let result = match generated {
        Some(_) => create_generated(&mut session, object).await,
        None => create_in(&mut session, strategy, object).await,
    };
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
    serves(session, strategy, operation)
}

/// `session`, if `strategy` serves `operation`.
fn serves(
    session: Session<'_>,
    strategy: StrategyName,
    operation: Operation,
) -> Result<Session<'_>, Error> {
    if !strategy.description().serves(operation) {
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

/// Whether `strategy` creates and deletes leniently (`lax`): an existing
/// name counts as created, a delete checks only the uid.
fn lenient(strategy: StrategyName) -> bool {
    strategy.description().whole_objects == WholeObjects::Lenient
}

async fn create_in(
    session: &mut Session<'_>,
    strategy: StrategyName,
    object: Value,
) -> Result<Option<Value>, Error> {
    let body = Body::Create(object);
    for attempt in 1..=LAX_CREATE_ATTEMPTS {
        match session.send(&body).await? {
            Answer::Stored(stored) => return Ok(Some(stored)),
            Answer::Conflict if lenient(strategy) => {
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
            refusal @ (Answer::NotFound | Answer::Invalid(_)) => {
                return Err(refused(session, refusal));
            }
        }
    }
    Err(Error::ConflictRetriesExhausted {
        object: session.key.clone(),
        attempts: LAX_CREATE_ATTEMPTS,
    })
}

/// The error of a create the server refused: `404 NotFound` (a create
/// meets it only for a missing namespace, which it names) or `422`.
fn refused(session: &mut Session<'_>, answer: Answer) -> Error {
    match answer {
        Answer::NotFound => Error::NotFound {
            object: ObjectKey::new(
                "namespaces",
                None,
                session
                    .missing_namespace
                    .take()
                    .or_else(|| session.namespace.clone())
                    .unwrap_or_default(),
            ),
        },
        Answer::Invalid(source) => Error::Rejected {
            object: session.key.clone(),
            source,
        },
        Answer::Stored(_) | Answer::Conflict => Error::Rejected {
            object: session.key.clone(),
            source: Box::new(kube::Error::Service(
                "a create was refused with an answer that is no refusal".into(),
            )),
        },
    }
}

/// A create with `generateName`, under every strategy alike: each
/// attempt is a new object under a new name, so a `409` is tried again
/// rather than read back, and a transient answer only when it proves
/// nothing was stored (`429`).
async fn create_generated(
    session: &mut Session<'_>,
    object: Value,
) -> Result<Option<Value>, Error> {
    let body = Body::Create(object);
    let mut transient = 0;
    let mut retry = false;
    let mut attempt = 0;
    while attempt < LAX_CREATE_ATTEMPTS {
        let answer = match session.send_once(&body, retry).await? {
            Sent::Answer(answer) => answer,
            Sent::Transient { error, after } if is_throttled(&error) => {
                session.wait_transient(&mut transient, after, error).await?;
                retry = true;
                continue;
            }
            Sent::Transient { error, .. } => {
                return Err(Error::Request {
                    object: session.key.clone(),
                    source: Box::new(error),
                });
            }
        };
        retry = false;
        attempt += 1;
        match answer {
            Answer::Stored(stored) => return Ok(Some(stored)),
            Answer::Conflict => {
                session.outcome.conflicts += 1;
                if attempt < LAX_CREATE_ATTEMPTS {
                    session.outcome.retries += 1;
                }
            }
            refusal @ (Answer::NotFound | Answer::Invalid(_)) => {
                return Err(refused(session, refusal));
            }
        }
    }
    Err(Error::ConflictRetriesExhausted {
        object: session.key.clone(),
        attempts: LAX_CREATE_ATTEMPTS,
    })
}

/// Whether `error` is a `429`: the server refused the request before
/// handling it.
fn is_throttled(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 429)
}

async fn delete_in(
    session: &mut Session<'_>,
    strategy: StrategyName,
    observed: &Value,
) -> Result<Option<Value>, Error> {
    let uid = meta(observed, "uid").map(str::to_owned);
    let version = meta(observed, "resourceVersion").map(str::to_owned);
    let exact = !lenient(strategy);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{config_map, status, target};
    use serde_json::json;

    /// A ConfigMap to create with `generateName` and no name.
    fn generated() -> Value {
        let mut object = config_map("", json!({}));
        let metadata = object["metadata"].as_object_mut().unwrap();
        metadata.retain(|key, _| key == "namespace");
        metadata.insert("generateName".into(), json!("cm-"));
        object
    }

    #[tokio::test]
    async fn a_generate_name_create_is_sent_again_after_a_conflict() {
        let (target, seen) = target(vec![
            status(409, "AlreadyExists", 0),
            (200, config_map("1", json!({}))),
        ]);
        let written = create(&target, StrategyName::Strict, generated())
            .await
            .unwrap();
        assert_eq!(written.object.unwrap()["metadata"]["name"], "cm");
        assert_eq!(written.outcome.conflicts, 1);
        let post = "POST /api/v1/namespaces/ns/configmaps";
        assert_eq!(*seen.lock().unwrap(), [post, post]);
    }

    #[tokio::test]
    async fn a_generate_name_create_is_never_sent_twice_after_a_server_error() {
        let (target, seen) = target(vec![
            status(503, "ServiceUnavailable", 0),
            (200, config_map("1", json!({}))),
        ]);
        let err = create(&target, StrategyName::Lax, generated())
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Request { .. }), "{err:?}");
        assert_eq!(seen.lock().unwrap().len(), 1, "a second object may be made");
    }

    #[tokio::test]
    async fn a_throttled_generate_name_create_is_sent_again() {
        let (target, seen) = target(vec![
            status(429, "TooManyRequests", 0),
            (200, config_map("1", json!({}))),
        ]);
        let written = create(&target, StrategyName::Guarded, generated())
            .await
            .unwrap();
        assert_eq!(written.outcome.throttled, 1);
        assert_eq!(seen.lock().unwrap().len(), 2);
    }
}
