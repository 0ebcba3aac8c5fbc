use std::fmt;
use std::sync::Arc;

use concord_featuregates::Operation;
use serde_json::{Map, Value};

/// A fallible change to an object's JSON, re-runnable on fresher copies.
pub(crate) type Closure = Arc<dyn Fn(&mut Value) -> Result<(), serde_json::Error> + Send + Sync>;

/// One change a reconciler wants made, stated as intent rather than as a
/// request.
///
/// Every intent is idempotent: applied twice, or to an object that already
/// satisfies it, it changes nothing — and a write that changes nothing sends
/// no request.
///
/// ```
/// use concord_strategies::Intent;
/// let intent = Intent::remove_finalizer("kueue.x-k8s.io/managed");
/// assert!(matches!(intent, Intent::RemoveFinalizer(_)));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Intent {
    /// Add this entry to `metadata.finalizers` if missing.
    AddFinalizer(String),
    /// Remove this entry from `metadata.finalizers` if present.
    RemoveFinalizer(String),
    /// Set `metadata.labels[key] = value`.
    SetLabel {
        /// Label key.
        key: String,
        /// Label value.
        value: String,
    },
    /// Remove `metadata.labels[key]`.
    RemoveLabel(String),
    /// Set `metadata.annotations[key] = value`.
    SetAnnotation {
        /// Annotation key.
        key: String,
        /// Annotation value.
        value: String,
    },
    /// Remove `metadata.annotations[key]`.
    RemoveAnnotation(String),
    /// JSON-merge this fragment into `status` (RFC 7386: `null` removes a
    /// key). Written to the status subresource.
    MergeStatus(Value),
    /// Insert or replace the entry of `status.conditions` whose `type`
    /// matches. Written to the status subresource.
    SetCondition(Condition),
    /// Create or update the observed object as a whole: it is the desired
    /// state of a child the reconciler owns, sent as one forced server-side
    /// apply under the target's field manager. The `apply-owned` operation;
    /// only the `apply` strategy serves it, alone in its mutation.
    ApplyOwned,
    /// An arbitrary change to the object's JSON. Not available to the
    /// `apply` strategy.
    Custom {
        /// Whether the closure changes the status subresource.
        status: bool,
        /// The change.
        closure: Closure,
    },
}

/// A status condition as [`Intent::SetCondition`] writes it.
///
/// `lastTransitionTime` is set when the condition is added or its `status`
/// changes, and kept otherwise, so re-running the intent is a no-op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// The condition type, e.g. `Ready`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

impl Intent {
    /// Add finalizer `name`.
    pub fn add_finalizer(name: impl Into<String>) -> Self {
        Intent::AddFinalizer(name.into())
    }

    /// Remove finalizer `name`.
    pub fn remove_finalizer(name: impl Into<String>) -> Self {
        Intent::RemoveFinalizer(name.into())
    }

    /// Set label `key` to `value`.
    pub fn set_label(key: impl Into<String>, value: impl Into<String>) -> Self {
        Intent::SetLabel {
            key: key.into(),
            value: value.into(),
        }
    }

    /// Set annotation `key` to `value`.
    pub fn set_annotation(key: impl Into<String>, value: impl Into<String>) -> Self {
        Intent::SetAnnotation {
            key: key.into(),
            value: value.into(),
        }
    }

    /// The operation this intent falls under in the strategy table.
    pub fn operation(&self) -> Operation {
        match self {
            Intent::AddFinalizer(_) => Operation::AddFinalizer,
            Intent::RemoveFinalizer(_) => Operation::RemoveFinalizer,
            Intent::SetLabel { .. }
            | Intent::RemoveLabel(_)
            | Intent::SetAnnotation { .. }
            | Intent::RemoveAnnotation(_) => Operation::Metadata,
            Intent::MergeStatus(_) | Intent::SetCondition(_) => Operation::Status,
            Intent::Custom { .. } => Operation::Other,
            Intent::ApplyOwned => Operation::ApplyOwned,
        }
    }

    /// Whether the intent targets the status subresource.
    pub fn is_status(&self) -> bool {
        match self {
            Intent::MergeStatus(_) | Intent::SetCondition(_) => true,
            Intent::Custom { status, .. } => *status,
            _ => false,
        }
    }

    /// Apply the intent to an object's JSON in place.
    pub(crate) fn apply_to(&self, object: &mut Value) -> Result<(), serde_json::Error> {
        match self {
            Intent::AddFinalizer(name) => {
                let list = array_at(object, &["metadata", "finalizers"]);
                if !list.iter().any(|f| f.as_str() == Some(name)) {
                    list.push(Value::String(name.clone()));
                }
            }
            Intent::RemoveFinalizer(name) => {
                let list = array_at(object, &["metadata", "finalizers"]);
                list.retain(|f| f.as_str() != Some(name));
                if list.is_empty() {
                    remove_at(object, &["metadata"], "finalizers");
                }
            }
            Intent::SetLabel { key, value } => {
                map_at(object, &["metadata", "labels"]).insert(key.clone(), value.clone().into());
            }
            Intent::RemoveLabel(key) => remove_at(object, &["metadata", "labels"], key),
            Intent::SetAnnotation { key, value } => {
                map_at(object, &["metadata", "annotations"])
                    .insert(key.clone(), value.clone().into());
            }
            Intent::RemoveAnnotation(key) => remove_at(object, &["metadata", "annotations"], key),
            Intent::MergeStatus(fragment) => {
                let status = map_at(object, &["status"]);
                let mut merged = Value::Object(std::mem::take(status));
                json_patch::merge(&mut merged, fragment);
                *map_at(object, &["status"]) = match merged {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
            }
            Intent::SetCondition(condition) => set_condition(object, condition)?,
            Intent::Custom { closure, .. } => closure(object)?,
            // The object is its own desired state.
            Intent::ApplyOwned => {}
        }
        Ok(())
    }
}

fn set_condition(object: &mut Value, condition: &Condition) -> Result<(), serde_json::Error> {
    let conditions = array_at(object, &["status", "conditions"]);
    let existing = conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(&condition.type_));
    let transitions = match &existing {
        Some(c) => c.get("status").and_then(Value::as_str) != Some(&condition.status),
        None => true,
    };
    let mut wanted = serde_json::json!({
        "type": condition.type_,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
    });
    // The time is set only when the status changes: a copy that does not
    // show it (a view's condition type) must not reset the stored one.
    if transitions {
        wanted["lastTransitionTime"] =
            serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ))?;
    }
    match existing {
        Some(c) => {
            // Keep fields we do not manage (observedGeneration) as they are.
            if let (Value::Object(have), Value::Object(want)) = (c, wanted) {
                for (k, v) in want {
                    have.insert(k, v);
                }
            }
        }
        None => conditions.push(wanted),
    }
    Ok(())
}

/// The object at `path`, created (replacing any non-object) if needed.
fn map_at<'a>(object: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut cur = object;
    for key in path {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else {
            unreachable!("just made an object")
        };
        cur = map
            .entry((*key).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !cur.is_object() {
        *cur = Value::Object(Map::new());
    }
    match cur {
        Value::Object(map) => map,
        _ => unreachable!("just made an object"),
    }
}

/// The array at `path`, created (replacing any non-array) if needed.
fn array_at<'a>(object: &'a mut Value, path: &[&str]) -> &'a mut Vec<Value> {
    let (last, parent) = match path.split_last() {
        Some(split) => split,
        None => unreachable!("paths are never empty"),
    };
    let slot = map_at(object, parent)
        .entry((*last).to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    match slot {
        Value::Array(list) => list,
        _ => unreachable!("just made an array"),
    }
}

/// Remove `key` from the map at `path`, dropping the map when it empties.
fn remove_at(object: &mut Value, path: &[&str], key: &str) {
    let mut cur = &mut *object;
    for p in path {
        match cur.get_mut(*p) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Value::Object(map) = cur {
        map.remove(key);
        if map.is_empty()
            && path.len() > 1
            && let Some((last, parent)) = path.split_last()
        {
            remove_at(object, parent, last);
        }
    }
}

impl fmt::Debug for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Intent::AddFinalizer(n) => f.debug_tuple("AddFinalizer").field(n).finish(),
            Intent::RemoveFinalizer(n) => f.debug_tuple("RemoveFinalizer").field(n).finish(),
            Intent::SetLabel { key, value } => f
                .debug_struct("SetLabel")
                .field("key", key)
                .field("value", value)
                .finish(),
            Intent::RemoveLabel(k) => f.debug_tuple("RemoveLabel").field(k).finish(),
            Intent::SetAnnotation { key, value } => f
                .debug_struct("SetAnnotation")
                .field("key", key)
                .field("value", value)
                .finish(),
            Intent::RemoveAnnotation(k) => f.debug_tuple("RemoveAnnotation").field(k).finish(),
            Intent::MergeStatus(v) => f.debug_tuple("MergeStatus").field(v).finish(),
            Intent::SetCondition(c) => f.debug_tuple("SetCondition").field(c).finish(),
            Intent::ApplyOwned => f.write_str("ApplyOwned"),
            Intent::Custom { status, .. } => f
                .debug_struct("Custom")
                .field("status", status)
                .finish_non_exhaustive(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(intent: Intent, mut obj: Value) -> Value {
        intent.apply_to(&mut obj).unwrap();
        obj
    }

    #[test]
    fn add_finalizer_is_idempotent() {
        let obj = json!({"metadata": {"finalizers": ["a"]}});
        let once = run(Intent::add_finalizer("b"), obj);
        let twice = run(Intent::add_finalizer("b"), once.clone());
        assert_eq!(once, twice);
        assert_eq!(once["metadata"]["finalizers"], json!(["a", "b"]));
    }

    #[test]
    fn remove_last_finalizer_drops_the_list() {
        let obj = run(
            Intent::remove_finalizer("a"),
            json!({"metadata": {"name": "x", "finalizers": ["a"]}}),
        );
        assert_eq!(obj, json!({"metadata": {"name": "x"}}));
    }

    #[test]
    fn remove_label_keeps_other_labels() {
        let obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let obj = run(Intent::RemoveLabel("a".into()), obj);
        assert_eq!(obj["metadata"]["labels"], json!({"b": "2"}));
    }

    #[test]
    fn merge_status_removes_null_keys() {
        let obj = json!({"status": {"phase": "Running", "old": 1}});
        let obj = run(
            Intent::MergeStatus(json!({"phase": "Done", "old": null})),
            obj,
        );
        assert_eq!(obj["status"], json!({"phase": "Done"}));
    }

    #[test]
    fn set_condition_keeps_transition_time_when_status_is_unchanged() {
        let cond = Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Done".into(),
            message: "ok".into(),
        };
        let once = run(Intent::SetCondition(cond.clone()), json!({}));
        let twice = run(Intent::SetCondition(cond), once.clone());
        assert_eq!(once, twice);
        assert_eq!(once["status"]["conditions"][0]["type"], "Ready");
    }
}
