use async_trait::async_trait;
use concord_featuregates::{ConflictPolicy, RetryPolicy, StrategyName};
use kube::api::Patch;
use kube::core::DynamicObject;
use serde_json::{Map, Value, json};

use crate::field_manager::manager_for;
use crate::session::{Answer, Session};
use crate::{Error, Intent, Mutation, Target, WriteStrategy, Written};

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
/// survives, or was never ours, `apply` falls back to a guarded JSON patch:
/// `test` the uid, `test` the exact index and value, then `remove` — atomic
/// on the server; a failed `test` counts as a conflict and is retried on a
/// fresh read within the retry policy ([`Outcome::fell_back`](crate::Outcome)).
///
/// # Caveats
///
/// Arbitrary closures are refused ([`Error::UnsupportedMutation`]); the
/// configuration layer rejects that combination at load time through
/// [`StrategyName::serves`]. A status fragment is owned by a manager named
/// after the fields it sets: a later fragment setting the same fields but
/// omitting a nested one releases that nested field.
/// Conditions are applied as one list entry, which replaces the list on
/// custom resources that do not declare `conditions` a map list.
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
    retry: RetryPolicy,
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
        self.retry = retry;
        self
    }
}

#[async_trait]
impl WriteStrategy for Apply {
    fn name(&self) -> StrategyName {
        StrategyName::Apply
    }

    async fn write(
        &self,
        target: &Target,
        observed: &DynamicObject,
        mutation: &Mutation,
    ) -> Result<Written<DynamicObject>, Error> {
        let mut session = Session::start(StrategyName::Apply, target, observed, mutation)?;
        let result = run(&mut session, &self.retry, observed, mutation).await;
        session.finish(result)
    }
}

async fn run(
    session: &mut Session<'_>,
    retry: &RetryPolicy,
    observed: &DynamicObject,
    mutation: &Mutation,
) -> Result<Option<DynamicObject>, Error> {
    if !mutation.is_declarative() {
        return Err(Error::UnsupportedMutation {
            strategy: StrategyName::Apply,
            what: "an arbitrary closure",
            object: session.key.clone(),
        });
    }
    let mut current = observed.clone();
    for intent in mutation.intents() {
        let json = session.to_json(&current)?;
        let mut next = json.clone();
        intent.apply_to(&mut next).map_err(|e| session.convert(e))?;
        if next == json {
            continue;
        }
        let manager = manager_for(&session.target.field_manager, intent);
        let stored = if is_removal(intent) {
            remove(session, retry, intent, &manager, current).await?
        } else {
            let body = config(session, &current, Some((intent, &next)));
            match session.apply(body, &manager).await? {
                Answer::Stored(stored) => Some(*stored),
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
    session.outcome.unchanged = session.outcome.total_requests() == 0;
    Ok(Some(current))
}

fn is_removal(intent: &Intent) -> bool {
    matches!(
        intent,
        Intent::RemoveFinalizer(_) | Intent::RemoveLabel(_) | Intent::RemoveAnnotation(_)
    )
}

/// Release `intent`'s entry via SSA if we own it, else (or if it survives)
/// remove it with a guarded JSON patch. `None` if the object is gone.
async fn remove(
    session: &mut Session<'_>,
    retry: &RetryPolicy,
    intent: &Intent,
    manager: &str,
    mut current: DynamicObject,
) -> Result<Option<DynamicObject>, Error> {
    if applies_as(&current, manager) {
        let body = config(session, &current, None);
        match session.apply(body, manager).await? {
            Answer::Stored(stored) => current = *stored,
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
    let policy = ConflictPolicy::Retry(*retry);
    let mut attempts = 0;
    loop {
        let Some(ops) = guarded_removal(intent, &current) else {
            return Ok(Some(current));
        };
        session.outcome.fell_back = true;
        attempts += 1;
        let patch: json_patch::Patch =
            serde_json::from_value(ops.clone()).map_err(|e| session.convert(e))?;
        match session.patch(&Patch::Json(patch)).await? {
            Answer::Stored(stored) => return Ok(Some(*stored)),
            Answer::NotFound => return Ok(None),
            Answer::Conflict => {}
            Answer::Invalid(err) => {
                // A failed `test` answers 422. If a fresh read yields the
                // very same guards, it was something else: give up.
                session.after_conflict(&policy, attempts).await?;
                let Some(fresh) = session.get().await? else {
                    return Ok(None);
                };
                if guarded_removal(intent, &fresh).as_ref() == Some(&ops) {
                    return Err(Error::Rejected {
                        object: session.key.clone(),
                        source: err,
                    });
                }
                current = fresh;
                continue;
            }
        }
        session.after_conflict(&policy, attempts).await?;
        match session.get().await? {
            Some(fresh) => current = fresh,
            None => return Ok(None),
        }
    }
}

/// Whether `manager` applied fields of `object`.
fn applies_as(object: &DynamicObject, manager: &str) -> bool {
    object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|entry| {
            entry.manager.as_deref() == Some(manager) && entry.operation.as_deref() == Some("Apply")
        })
}

/// The apply configuration: identity fields, plus the entry `intent` owns
/// (taken from `next`, the object with the intent applied) if any.
fn config(
    session: &Session<'_>,
    current: &DynamicObject,
    owned: Option<(&Intent, &Value)>,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(session.name));
    if let Some(ns) = &session.namespace {
        metadata.insert("namespace".into(), json!(ns));
    }
    if let Some(uid) = &current.metadata.uid {
        metadata.insert("uid".into(), json!(uid));
    }
    let mut body = json!({
        "apiVersion": session.target.resource.api_version,
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
        Some((Intent::MergeStatus(fragment), _)) => body["status"] = strip_nulls(fragment),
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

/// A merge fragment without its `null` deletions, which apply cannot carry.
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// JSON patch ops removing `intent`'s entry from `object` only if the
/// object, and the entry at that exact place, are still what we saw.
/// `None` if the entry is absent.
fn guarded_removal(intent: &Intent, object: &DynamicObject) -> Option<Value> {
    let (path, value) = match intent {
        Intent::RemoveFinalizer(name) => {
            let index = object
                .metadata
                .finalizers
                .iter()
                .flatten()
                .position(|f| f == name)?;
            (format!("/metadata/finalizers/{index}"), json!(name))
        }
        Intent::RemoveLabel(key) => {
            let value = object.metadata.labels.as_ref()?.get(key)?;
            (format!("/metadata/labels/{}", escape(key)), json!(value))
        }
        Intent::RemoveAnnotation(key) => {
            let value = object.metadata.annotations.as_ref()?.get(key)?;
            (
                format!("/metadata/annotations/{}", escape(key)),
                json!(value),
            )
        }
        _ => return None,
    };
    let mut ops = Vec::new();
    if let Some(uid) = &object.metadata.uid {
        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
    }
    ops.push(json!({"op": "test", "path": path, "value": value}));
    ops.push(json!({"op": "remove", "path": path}));
    Some(Value::Array(ops))
}

/// RFC 6901 escaping of one JSON-pointer segment.
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ApiResource;

    fn pod(finalizers: &[&str]) -> DynamicObject {
        let ar = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let mut obj = DynamicObject::new("p", &ar).within("ns");
        obj.metadata.uid = Some("u1".into());
        obj.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        obj
    }

    #[test]
    fn guarded_removal_tests_uid_index_and_value() {
        let ops = guarded_removal(&Intent::remove_finalizer("b"), &pod(&["a", "b"])).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/finalizers/1", "value": "b"},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ])
        );
    }

    #[test]
    fn guarded_removal_of_absent_entry_is_none() {
        assert_eq!(
            guarded_removal(&Intent::remove_finalizer("z"), &pod(&["a"])),
            None
        );
    }

    #[test]
    fn label_keys_are_escaped_in_json_pointers() {
        assert_eq!(escape("example.com/a~b"), "example.com~1a~0b");
    }

    #[test]
    fn strip_nulls_drops_deletions() {
        assert_eq!(
            strip_nulls(&json!({"a": null, "b": {"c": null, "d": 1}})),
            json!({"b": {"d": 1}})
        );
    }
}
