//! Server-side apply's own loop: one field manager per intent, and a
//! guarded fallback for what an apply configuration cannot say. The runner
//! hands an `apply` plan here at its first step.

use crate::ObjectKey;
use crate::body::field_manager::manager_for;
use crate::body::request::{Body, Request};
use crate::runner::plan::OnConflict;
use crate::runner::session::{Answer, Session};
use crate::{Error, Fallback, Intent, Mutation, Target, Written};
use concord_featuregates::{ConflictPolicy, Operation, RetryPolicy, StrategyName};
use serde_json::{Map, Value, json};

/// An `apply` write of `mutation` to `observed`, its guarded fallback
/// retried within `retry`.
pub(crate) async fn write(
    target: &Target,
    observed: Value,
    mutation: &Mutation,
    retry: &RetryPolicy,
) -> Result<Written<Value>, Error> {
    let mut session = Session::start(StrategyName::Apply, target, &observed, mutation)?;
    let result = run(&mut session, retry, observed, mutation).await;
    session.finish(result)
}

async fn run(
    session: &mut Session<'_>,
    retry: &RetryPolicy,
    observed: Value,
    mutation: &Mutation,
) -> Result<Option<Value>, Error> {
    let unsupported = |what| Error::UnsupportedMutation {
        strategy: StrategyName::Apply,
        what,
        object: session.key.clone(),
    };
    if !mutation.is_declarative() {
        return Err(unsupported("an arbitrary closure"));
    }
    if mutation
        .intents()
        .iter()
        .any(|i| matches!(i, Intent::MergeStatus(fragment) if has_null(fragment)))
    {
        return Err(unsupported(
            "a status deletion (`null` in a MergeStatus fragment)",
        ));
    }
    if mutation.operation() == Operation::ApplyOwned {
        if mutation.intents().len() > 1 {
            return Err(unsupported("`apply-owned` together with other intents"));
        }
        return owned(session, observed).await;
    }
    let atomic_conditions = mutation
        .intents()
        .iter()
        .any(|i| matches!(i, Intent::SetCondition(_)))
        && !conditions_are_a_map_list(&observed);
    // The status subresource keeps the stored metadata, so an apply to it
    // cannot carry the uid as a precondition: a status write that met a
    // deleted and recreated object would land on the new one. It goes as
    // the guarded patch, whose `test` of the uid the server checks.
    let status = mutation.is_status() == Some(true);
    if status || atomic_conditions || changes(session, &observed, mutation)? > 1 {
        // One apply request carries one field manager, and each intent has
        // its own: several changes go as one guarded patch instead, so that
        // the mutation lands whole or not at all. A condition goes the same
        // way unless `status.conditions` is known to be a map list: applied
        // to an atomic list (a CRD's default), one entry would replace
        // every other manager's.
        session.outcome.fall_back(Fallback::GuardedPatch);
        let policy = ConflictPolicy::Retry(*retry);
        return session
            .drive(
                observed,
                mutation,
                Request::Guarded,
                OnConflict::Reread(&policy),
            )
            .await;
    }
    let mut current = observed;
    for intent in mutation.intents() {
        let mut next = current.clone();
        intent.apply_to(&mut next).map_err(|e| session.convert(e))?;
        if next == current {
            continue;
        }
        let manager = manager_for(&session.target.field_manager, intent);
        let stored = if is_removal(intent) {
            remove(session, retry, intent, &manager, current).await?
        } else {
            let config = config(session, &current, Some((intent, &next)));
            match session.send(&Body::Apply { config, manager }).await? {
                Answer::Stored(stored) => Some(stored),
                Answer::NotFound => None,
                // A forced apply has no field conflicts: a 409 is the uid
                // precondition failing, so tell a vanished or recreated
                // object (the read checks the uid) from a plain conflict.
                Answer::Conflict => match session.get().await? {
                    None => None,
                    Some(_) => {
                        return Err(Error::Conflict {
                            object: session.key.clone(),
                        });
                    }
                },
                Answer::Invalid(err) => session.invalid(err).await?,
            }
        };
        match stored {
            Some(stored) => current = stored,
            None => return session.gone().map(|()| None),
        }
    }
    Ok(Some(current))
}

/// `apply-owned`: one forced apply of the whole object under the target's
/// field manager, creating it if absent.
async fn owned(session: &mut Session<'_>, desired: Value) -> Result<Option<Value>, Error> {
    let manager = session.target.field_manager.clone();
    let body = Body::Apply {
        config: desired,
        manager,
    };
    match session.send(&body).await? {
        Answer::Stored(stored) => Ok(Some(stored)),
        Answer::Conflict => Err(Error::Conflict {
            object: session.key.clone(),
        }),
        // An apply creates what is absent: a `404` names what is missing
        // around it, its namespace when the server says so.
        Answer::NotFound => Err(Error::NotFound {
            object: match session.missing_namespace.take() {
                Some(namespace) => ObjectKey::new("namespaces", None, namespace),
                None => session.key.clone(),
            },
        }),
        Answer::Invalid(source) => Err(Error::Rejected {
            object: session.key.clone(),
            source,
        }),
    }
}

/// How many of `mutation`'s intents change `observed` (applied in order).
fn changes(session: &Session<'_>, observed: &Value, mutation: &Mutation) -> Result<usize, Error> {
    let mut current = observed.clone();
    let mut changed = 0;
    for intent in mutation.intents() {
        let before = current.clone();
        intent
            .apply_to(&mut current)
            .map_err(|e| session.convert(e))?;
        changed += usize::from(current != before);
    }
    Ok(changed)
}

fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.values().any(has_null),
        _ => false,
    }
}

fn is_removal(intent: &Intent) -> bool {
    matches!(
        intent,
        Intent::RemoveFinalizer(_) | Intent::RemoveLabel(_) | Intent::RemoveAnnotation(_)
    )
}

/// Release `intent`'s entry via SSA if we own it, else (or if it survives)
/// remove it with a guarded JSON patch through the write loop. `None` if
/// the object is gone.
async fn remove(
    session: &mut Session<'_>,
    retry: &RetryPolicy,
    intent: &Intent,
    manager: &str,
    mut current: Value,
) -> Result<Option<Value>, Error> {
    if applies_as(&current, manager) {
        let config = config(session, &current, None);
        let manager = manager.to_owned();
        match session.send(&Body::Apply { config, manager }).await? {
            Answer::Stored(stored) => current = stored,
            Answer::NotFound => return Ok(None),
            Answer::Conflict => {
                return Err(Error::Conflict {
                    object: session.key.clone(),
                });
            }
            Answer::Invalid(err) => match session.invalid(err).await? {
                Some(stored) => current = stored,
                None => return Ok(None),
            },
        }
    }
    let single = Mutation::from(intent.clone());
    if session.mutate(&single, &current)?.is_none() {
        return Ok(Some(current));
    }
    // The entry survived the release (another manager owns it too) or was
    // never ours: remove it with the guarded request (for a built-in type,
    // the strategic-merge delete directive, which nothing another writer
    // does to the list can trip).
    session.outcome.fall_back(Fallback::GuardedPatch);
    let policy = ConflictPolicy::Retry(*retry);
    session
        .drive(
            current,
            &single,
            Request::Guarded,
            OnConflict::Reread(&policy),
        )
        .await
}

/// Whether `object`'s managed fields show `status.conditions` as a map
/// list (entries keyed `k:{"type":…}`), so that applying one entry leaves
/// the others alone. Anything else — an atomic list, no conditions yet, no
/// managed fields — is not known to be one.
fn conditions_are_a_map_list(object: &Value) -> bool {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| entry["fieldsV1"]["f:status"]["f:conditions"].as_object())
        .any(|fields| fields.keys().any(|key| key.starts_with("k:")))
}

/// Whether `manager` applied fields of `object`.
fn applies_as(object: &Value, manager: &str) -> bool {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|entry| entry["manager"] == manager && entry["operation"] == "Apply")
}

/// The apply configuration: identity fields, plus the entry `intent` owns
/// (taken from `next`, the object with the intent applied) if any.
fn config(session: &Session<'_>, current: &Value, owned: Option<(&Intent, &Value)>) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(session.name));
    if let Some(ns) = &session.namespace {
        metadata.insert("namespace".into(), json!(ns));
    }
    if let Some(uid) = crate::model::observed::meta(current, "uid") {
        metadata.insert("uid".into(), json!(uid));
    }
    let mut body = json!({
        "apiVersion": session.resource.api_version,
        "kind": session.target.resource.kind,
    });
    match owned {
        Some((Intent::AddFinalizer(name), _)) => {
            metadata.insert("finalizers".into(), json!([name]));
        }
        Some((Intent::SetLabel { key, value }, _)) => {
            metadata.insert("labels".into(), json!({ key: value }));
        }
        Some((Intent::SetAnnotation { key, value }, _)) => {
            metadata.insert("annotations".into(), json!({ key: value }));
        }
        Some((Intent::MergeStatus(fragment), _)) => body["status"] = fragment.clone(),
        Some((Intent::SetCondition(condition), next)) => {
            let entry = next["status"]["conditions"]
                .as_array()
                .and_then(|list| list.iter().find(|c| c["type"] == json!(condition.type_)))
                .cloned()
                .unwrap_or(Value::Null);
            body["status"] = json!({ "conditions": [entry] });
        }
        _ => {}
    }
    body["metadata"] = Value::Object(metadata);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keyed_condition_entries_show_a_map_list() {
        let with = |fields: Value| {
            json!({"metadata": {"managedFields": [
                {"manager": "m", "fieldsV1": {"f:status": {"f:conditions": fields}}}
            ]}})
        };
        assert!(conditions_are_a_map_list(&with(
            json!({"k:{\"type\":\"Ready\"}": {}})
        )));
        assert!(!conditions_are_a_map_list(&with(json!({}))), "atomic");
        assert!(
            !conditions_are_a_map_list(&json!({"metadata": {}})),
            "nothing to tell by"
        );
    }

    #[test]
    fn status_deletions_are_detected() {
        assert!(has_null(&json!({"a": null})));
        assert!(has_null(&json!({"b": {"c": null, "d": 1}})));
        assert!(!has_null(&json!({"b": {"d": 1}})));
    }
}
