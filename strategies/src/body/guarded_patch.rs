//! The guarded request: a patch whose preconditions are exactly the fields
//! and entries it writes, so a concurrent change to another field never
//! conflicts and a concurrent change to the same one always does. Used by
//! the `guarded` strategy, and by `apply` for a mutation one apply request
//! cannot carry.
//!
//! - Finalizers only, on a built-in type (the server strategic-merges it):
//!   the merge directives that add or delete exactly those entries —
//!   `finalizers: [ours]` adds it unless present, and
//!   `$deleteFromPrimitiveList/finalizers: [ours]` removes every copy —
//!   with the uid as the only precondition. Nothing another writer does to
//!   the list can trip it, and a retry can never duplicate.
//! - Anything else: a JSON patch (RFC 6902) that `test`s the uid, every
//!   path the write depends on, and before each change the value it
//!   changes — the old value before a `replace` or `remove`, `null` (absent)
//!   before an `add`, the whole list before an append (never a duplicate),
//!   and the identity of each list entry it reaches into (its `type` or
//!   `name` where unique in the list, otherwise the whole entry as read).
//!
//! A tripped `test` answers `422`; the write loop counts it a conflict:
//! re-read, re-apply the mutation, retry within the policy.

use serde_json::{Map, Value, json};

use crate::model::change::value_at;
use crate::model::change::{Edit, Holds, Step, diff_holding, pointer};
use crate::model::observed::meta;

/// The API groups kube-apiserver serves from its own Go types, for which it
/// accepts strategic merge patches (custom resources do not).
const BUILT_IN_GROUPS: [&str; 19] = [
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
];

/// Whether the API server strategic-merges resources of `group`.
pub(crate) fn strategic_merges(group: &str) -> bool {
    BUILT_IN_GROUPS.contains(&group)
}

/// A guarded request body.
#[derive(Debug, PartialEq)]
pub(crate) enum GuardedBody {
    /// A strategic merge patch of finalizer directives.
    Strategic(Value),
    /// JSON patch operations.
    Json(Value),
}

/// The guarded body turning `current` into `next`, testing also the
/// `depends` paths (JSON pointers); `None` when they are equal.
pub(crate) fn guarded(
    current: &Value,
    next: &Value,
    strategic: bool,
    depends: &[String],
    holds: Holds,
) -> Option<GuardedBody> {
    if current == next {
        return None;
    }
    if strategic && depends.is_empty() && without_finalizers(current) == without_finalizers(next) {
        return Some(GuardedBody::Strategic(finalizer_directives(current, next)));
    }
    let mut ops = Vec::new();
    if let Some(uid) = meta(current, "uid") {
        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
    }
    for path in depends {
        let (at, value) = dependency(current, path);
        ops.push(json!({"op": "test", "path": at, "value": value}));
    }
    let mut appended_to: Vec<Vec<Step>> = Vec::new();
    let mut identified: Vec<Vec<Step>> = Vec::new();
    for edit in diff_holding(current, next, holds)
        .into_iter()
        .flat_map(entry_by_entry)
    {
        if holds == Holds::Part {
            scalars_as_shown(current, &edit, &mut appended_to, &mut ops);
        }
        match edit {
            Edit::Set { path, old, new } => {
                identities(current, parent(&path), &mut identified, &mut ops);
                let at = pointer(&path);
                let (op, tested) = match old {
                    Some(old) => ("replace", old),
                    None => ("add", Value::Null),
                };
                ops.push(json!({"op": "test", "path": at, "value": tested}));
                ops.push(json!({"op": op, "path": at, "value": new}));
            }
            Edit::Remove { path, old } => {
                identities(current, parent(&path), &mut identified, &mut ops);
                let at = pointer(&path);
                ops.push(json!({"op": "test", "path": at, "value": old}));
                ops.push(json!({"op": "remove", "path": at}));
            }
            Edit::Append { path, new } => {
                if !appended_to.contains(&path) {
                    identities(current, &path, &mut identified, &mut ops);
                    let list = value_at(current, &path).cloned().unwrap_or(Value::Null);
                    ops.push(json!({"op": "test", "path": pointer(&path), "value": list}));
                    appended_to.push(path.clone());
                }
                ops.push(
                    json!({"op": "add", "path": format!("{}/-", pointer(&path)), "value": new}),
                );
            }
        }
    }
    // Tests alone change nothing (an emptied map the copy held no key of):
    // nothing to send.
    let changes = ops.iter().any(|op| op["op"] != "test");
    changes.then_some(GuardedBody::Json(Value::Array(ops)))
}

/// The `test` standing for a dependency on `path`: its value, or, where
/// the copy lacks it, the absence of its first missing ancestor (a `test`
/// below a missing parent could never pass).
fn dependency(current: &Value, path: &str) -> (String, Value) {
    if let Some(value) = current.pointer(path) {
        return (path.to_owned(), value.clone());
    }
    let mut at = String::new();
    for segment in path.split('/').skip(1) {
        at.push('/');
        at.push_str(segment);
        if current.pointer(&at).is_none() {
            break;
        }
    }
    (at, Value::Null)
}

/// A removal of a whole finalizer list, label or annotation map (the last
/// entry went) as the removal of each entry: another writer's entry added
/// meanwhile is no reason to conflict, and survives.
fn entry_by_entry(edit: Edit) -> Vec<Edit> {
    let Edit::Remove { path, old } = &edit else {
        return vec![edit];
    };
    let entries = matches!(
        path.as_slice(),
        [Step::Key(metadata), Step::Key(field)]
            if metadata == "metadata" && ["finalizers", "labels", "annotations"].contains(&field.as_str())
    );
    let at = |step: Step| {
        let mut entry = path.clone();
        entry.push(step);
        entry
    };
    match old {
        Value::Array(list) if entries && !list.is_empty() => (0..list.len())
            .rev()
            .map(|index| Edit::Remove {
                path: at(Step::Index(index)),
                old: list[index].clone(),
            })
            .collect(),
        Value::Object(map) if entries && !map.is_empty() => map
            .iter()
            .map(|(key, value)| Edit::Remove {
                path: at(Step::Key(key.clone())),
                old: value.clone(),
            })
            .collect(),
        _ => vec![edit],
    }
}

/// `test`s of the identity of each list entry `path` reaches into, so an
/// index that moved to another entry trips the patch rather than change
/// the wrong one: an object entry's `type` or `name` where no other entry
/// of its list shares it, and otherwise the whole entry as read (a keyless
/// list — taints, tolerations, RBAC rules, ports — or a repeated key has
/// no other identity: a field's old value alone can be another entry's
/// too). Each entry is tested once, before the patch's first change to
/// it: a later `test` of its identity would see the patch's own change.
fn identities(
    current: &Value,
    path: &[Step],
    identified: &mut Vec<Vec<Step>>,
    ops: &mut Vec<Value>,
) {
    for end in 1..=path.len() {
        let prefix = &path[..end];
        let Some(Step::Index(index)) = prefix.last() else {
            continue;
        };
        if identified.iter().any(|done| done == prefix) {
            continue;
        }
        identified.push(prefix.to_vec());
        let Some(Value::Array(list)) = value_at(current, &prefix[..end - 1]) else {
            continue;
        };
        let Some(entry) = list.get(*index) else {
            continue;
        };
        let at = pointer(prefix);
        match unique_key(list, entry) {
            Some((key, id)) => {
                ops.push(json!({"op": "test", "path": format!("{at}/{key}"), "value": id}));
            }
            None => ops.push(json!({"op": "test", "path": at, "value": entry})),
        }
    }
}

/// From a copy that may not show a list as stored (a type that sorts or
/// deduplicates it: `["a","m","a"]` shown as `{"a","m"}`), an edit of a
/// list of scalars by index tests the whole list as the copy shows it,
/// once: an index is only meaningful in the list it was taken from. Where
/// the copy shows the list as stored the test passes; elsewhere the write
/// meets a failed test and starts again from the stored object. (Entries
/// that are objects are matched by their own identities instead.)
fn scalars_as_shown(
    current: &Value,
    edit: &Edit,
    tested: &mut Vec<Vec<Step>>,
    ops: &mut Vec<Value>,
) {
    let path = match edit {
        Edit::Set { path, .. } | Edit::Remove { path, .. } => path,
        Edit::Append { .. } => return,
    };
    let Some(Step::Index(_)) = path.last() else {
        return;
    };
    let list = parent(path);
    if tested.iter().any(|done| done == list) {
        return;
    }
    let Some(Value::Array(entries)) = value_at(current, list) else {
        return;
    };
    if entries
        .iter()
        .any(|e| matches!(e, Value::Object(_) | Value::Array(_)))
    {
        return;
    }
    ops.push(json!({"op": "test", "path": pointer(list), "value": entries}));
    tested.push(list.to_vec());
}

/// The path of the map or list holding the member at `path` (a member's
/// own old value is tested by its edit).
fn parent(path: &[Step]) -> &[Step] {
    &path[..path.len().saturating_sub(1)]
}

/// The `type` or `name` of `entry` when it is a string no other entry of
/// `list` holds under the same key.
fn unique_key<'a>(list: &[Value], entry: &'a Value) -> Option<(&'static str, &'a Value)> {
    ["type", "name"].into_iter().find_map(|key| {
        let id = entry.get(key).filter(|v| v.is_string())?;
        let holders = list.iter().filter(|e| e.get(key) == Some(id)).count();
        (holders == 1).then_some((key, id))
    })
}

/// `object` without `metadata.finalizers`, to compare the rest.
fn without_finalizers(object: &Value) -> Value {
    let mut rest = object.clone();
    if let Some(Value::Object(metadata)) = rest.get_mut("metadata") {
        metadata.remove("finalizers");
    }
    rest
}

fn finalizers(object: &Value) -> Vec<&Value> {
    object["metadata"]["finalizers"]
        .as_array()
        .map(|list| list.iter().collect())
        .unwrap_or_default()
}

/// The strategic merge directives adding the finalizers of `next` that
/// `current` lacks and deleting those it has that `next` lacks.
fn finalizer_directives(current: &Value, next: &Value) -> Value {
    let (before, after) = (finalizers(current), finalizers(next));
    let mut metadata = Map::new();
    if let Some(uid) = meta(current, "uid") {
        metadata.insert("uid".into(), json!(uid));
    }
    let added: Vec<&Value> = after
        .iter()
        .copied()
        .filter(|f| !before.contains(f))
        .collect();
    if !added.is_empty() {
        metadata.insert("finalizers".into(), json!(added));
    }
    let mut removed: Vec<&Value> = Vec::new();
    for f in before.iter().copied().filter(|f| !after.contains(f)) {
        if !removed.contains(&f) {
            removed.push(f);
        }
    }
    if !removed.is_empty() {
        metadata.insert("$deleteFromPrimitiveList/finalizers".into(), json!(removed));
    }
    json!({"metadata": metadata})
}

#[cfg(test)]
#[path = "guarded_patch_tests.rs"]
mod tests;
