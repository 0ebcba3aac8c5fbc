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
mod tests {
    use super::*;

    fn pod(finalizers: Value, labels: Value) -> Value {
        json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7",
            "finalizers": finalizers, "labels": labels}, "spec": {"a": 1}})
    }

    fn json_ops(current: &Value, next: &Value) -> Value {
        match guarded(current, next, false, &[], Holds::Whole) {
            Some(GuardedBody::Json(ops)) => ops,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn finalizers_of_a_built_in_type_go_as_merge_directives() {
        let current = pod(json!(["theirs", "ours"]), json!({}));
        let next = pod(json!(["theirs", "mine"]), json!({}));
        assert_eq!(
            guarded(&current, &next, true, &[], Holds::Whole),
            Some(GuardedBody::Strategic(json!({"metadata": {
                "uid": "u1",
                "finalizers": ["mine"],
                "$deleteFromPrimitiveList/finalizers": ["ours"],
            }})))
        );
    }

    #[test]
    fn removal_and_label_are_one_patch_testing_both() {
        let current = pod(
            json!(["argo", "other"]),
            json!({"app": "x", "done": "false"}),
        );
        let next = pod(json!(["other"]), json!({"app": "x", "done": "true"}));
        assert_eq!(
            guarded(&current, &next, true, &[], Holds::Whole),
            Some(GuardedBody::Json(json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/finalizers/0", "value": "argo"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
                {"op": "test", "path": "/metadata/labels/done", "value": "false"},
                {"op": "replace", "path": "/metadata/labels/done", "value": "true"},
            ])))
        );
    }

    #[test]
    fn an_added_key_is_tested_absent_and_an_append_tests_the_list() {
        let current = pod(json!(["a"]), json!({}));
        let next = pod(json!(["a", "b"]), json!({"k": "v"}));
        let ops = json_ops(&current, &next);
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
                {"op": "test", "path": "/metadata/labels/k", "value": null},
                {"op": "add", "path": "/metadata/labels/k", "value": "v"},
            ])
        );
    }

    #[test]
    fn a_condition_is_changed_in_place_with_its_type_tested() {
        let current = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}});
        let mut next = current.clone();
        next["status"]["conditions"][1]["status"] = json!("False");
        assert_eq!(
            json_ops(&current, &next),
            json!([
                {"op": "test", "path": "/status/conditions/1/type", "value": "B"},
                {"op": "test", "path": "/status/conditions/1/status", "value": "True"},
                {"op": "replace", "path": "/status/conditions/1/status", "value": "False"},
            ])
        );
    }

    #[test]
    fn an_entry_without_a_unique_key_is_tested_whole() {
        // Taints have no key the list is merged by, and their effects
        // repeat: the field's old value could be another entry's.
        let current = json!({"spec": {"taints": [
            {"key": "a", "effect": "NoSchedule"},
            {"key": "b", "effect": "NoSchedule"},
        ], "conditions": [{"type": "A", "x": 1}, {"type": "A", "x": 2}]}});
        let mut next = current.clone();
        next["spec"]["taints"][1]["effect"] = json!("NoExecute");
        next["spec"]["conditions"][1]["x"] = json!(3);
        assert_eq!(
            json_ops(&current, &next),
            json!([
                {"op": "test", "path": "/spec/conditions/1", "value": {"type": "A", "x": 2}},
                {"op": "test", "path": "/spec/conditions/1/x", "value": 2},
                {"op": "replace", "path": "/spec/conditions/1/x", "value": 3},
                {"op": "test", "path": "/spec/taints/1", "value": {"key": "b", "effect": "NoSchedule"}},
                {"op": "test", "path": "/spec/taints/1/effect", "value": "NoSchedule"},
                {"op": "replace", "path": "/spec/taints/1/effect", "value": "NoExecute"},
            ])
        );
    }

    #[test]
    fn dependencies_are_tested_as_observed() {
        let current = json!({"spec": {"replicas": 3}, "status": {}});
        let next = json!({"spec": {"replicas": 3}, "status": {"ready": true}});
        let Some(GuardedBody::Json(ops)) = guarded(
            &current,
            &next,
            false,
            &["/spec/replicas".into(), "/spec/paused".into()],
            Holds::Whole,
        ) else {
            panic!("not a json patch")
        };
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/spec/replicas", "value": 3})
        );
        assert_eq!(
            ops[1],
            json!({"op": "test", "path": "/spec/paused", "value": null})
        );
    }

    #[test]
    fn removing_the_last_entry_removes_the_entry_not_the_list() {
        let current = pod(json!(["ours"]), json!({"mine": "1"}));
        let mut next = current.clone();
        let metadata = next["metadata"].as_object_mut().unwrap();
        metadata.remove("finalizers");
        metadata.remove("labels");
        let ops = json_ops(&current, &next);
        assert_eq!(
            ops,
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/finalizers/0", "value": "ours"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
                {"op": "test", "path": "/metadata/labels/mine", "value": "1"},
                {"op": "remove", "path": "/metadata/labels/mine"},
            ])
        );
    }

    #[test]
    fn several_removals_go_from_the_highest_index_down() {
        let current = pod(json!(["a", "b", "c"]), json!({}));
        let next = pod(json!(["b"]), json!({}));
        let ops = json_ops(&current, &next);
        let paths: Vec<&str> = ops
            .as_array()
            .unwrap()
            .iter()
            .filter(|op| op["op"] == "remove")
            .map(|op| op["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, ["/metadata/finalizers/2", "/metadata/finalizers/0"]);
    }

    #[test]
    fn label_keys_are_escaped_in_json_pointers() {
        assert_eq!(
            crate::model::change::escape("example.com/a~b"),
            "example.com~1a~0b"
        );
    }

    #[test]
    fn a_map_emptied_of_nothing_sends_nothing_and_a_whole_map_is_removed_whole() {
        let current = json!({"metadata": {"uid": "u1", "annotations": {}}, "spec": {"m": {"deep": {"x": 1}}}});
        let mut next = current.clone();
        next["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        assert_eq!(guarded(&current, &next, false, &[], Holds::Whole), None);
        next["spec"]["m"] = json!({});
        assert_eq!(
            json_ops(&current, &next),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/m/deep", "value": {"x": 1}},
                {"op": "remove", "path": "/spec/m/deep"},
            ])
        );
    }
}
