//! `apply`'s single request for a mutation of several intents.
//!
//! One server-side apply request carries one field manager, and `apply`
//! gives every intent a manager of its own; so a mutation whose intents
//! change the object in more than one place cannot be one apply. Rather
//! than send one request per intent (which can half succeed), `apply` sends
//! the whole mutation as one request that is all-or-nothing on the server:
//!
//! - a JSON patch that `test`s the uid and every finalizer, label or
//!   annotation it removes or replaces before changing it, when the
//!   mutation only touches `metadata.finalizers`, `metadata.labels` and
//!   `metadata.annotations` (and the lists/maps it touches exist);
//! - otherwise (status, a map that does not exist yet: an absence cannot
//!   be tested) a merge patch carrying `resourceVersion` and `uid`, as
//!   `strict` sends.
//!
//! Either way a tripped guard is a conflict: re-read, re-apply, retry.

use serde_json::{Map, Value, json};

use crate::observed::meta;

/// The metadata fields a guarded JSON patch can change entry by entry.
const ENTRIES: [&str; 3] = ["finalizers", "labels", "annotations"];

/// JSON patch ops turning `current` into `next` with every entry they
/// remove or replace tested first; `None` if the difference is not one
/// such a patch can guard (anything outside the three entry fields, or an
/// entry field that `current` lacks).
pub(crate) fn guarded_patch(current: &Value, next: &Value) -> Option<Value> {
    if without_entries(current) != without_entries(next) {
        return None;
    }
    let mut ops = Vec::new();
    if let Some(uid) = meta(current, "uid") {
        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
    }
    let field =
        |object: &Value, name: &str| object.get("metadata").and_then(|m| m.get(name)).cloned();
    for name in ENTRIES {
        let (old, new) = (field(current, name), field(next, name));
        if old == new {
            continue;
        }
        let base = format!("/metadata/{name}");
        match (old, new.unwrap_or(Value::Null)) {
            (Some(Value::Array(old)), Value::Array(new)) => list_ops(&base, &old, &new, &mut ops)?,
            (Some(Value::Array(old)), Value::Null) => list_ops(&base, &old, &[], &mut ops)?,
            (Some(Value::Object(old)), Value::Object(new)) => map_ops(&base, &old, &new, &mut ops),
            (Some(Value::Object(old)), Value::Null) => map_ops(&base, &old, &Map::new(), &mut ops),
            _ => return None,
        }
    }
    Some(Value::Array(ops))
}

/// `object` without the entry fields, for comparing the rest.
fn without_entries(object: &Value) -> Value {
    let mut rest = object.clone();
    if let Some(Value::Object(metadata)) = rest.get_mut("metadata") {
        for name in ENTRIES {
            metadata.remove(name);
        }
    }
    rest
}

/// `old` becomes `new` by removing entries and appending others: test the
/// list if appending, test and remove from the highest index down, then
/// append. `None` for a reorder.
fn list_ops(base: &str, old: &[Value], new: &[Value], ops: &mut Vec<Value>) -> Option<()> {
    let (removed, kept) = crate::change::split_kept(old, new);
    let appended = &new[kept..];
    if appended.iter().any(|entry| old.contains(entry)) {
        return None;
    }
    if !appended.is_empty() {
        // An entry is appended only where it is still absent: the whole
        // list is tested, so a retry after a write that did commit, or a
        // concurrent add of the same entry, never stores a duplicate.
        ops.push(json!({"op": "test", "path": base, "value": old}));
    }
    for index in removed.into_iter().rev() {
        let path = format!("{base}/{index}");
        ops.push(json!({"op": "test", "path": path, "value": old[index]}));
        ops.push(json!({"op": "remove", "path": path}));
    }
    for entry in appended {
        ops.push(json!({"op": "add", "path": format!("{base}/-"), "value": entry}));
    }
    Some(())
}

/// Test and remove or replace each changed key, add each new one (a set
/// wins over a concurrent set of the same key, as a forced apply does).
fn map_ops(base: &str, old: &Map<String, Value>, new: &Map<String, Value>, ops: &mut Vec<Value>) {
    for (key, value) in old {
        let path = format!("{base}/{}", escape(key));
        match new.get(key) {
            Some(next) if next == value => continue,
            Some(next) => {
                ops.push(json!({"op": "test", "path": path, "value": value}));
                ops.push(json!({"op": "replace", "path": path, "value": next}));
            }
            None => {
                ops.push(json!({"op": "test", "path": path, "value": value}));
                ops.push(json!({"op": "remove", "path": path}));
            }
        }
    }
    for (key, value) in new {
        if !old.contains_key(key) {
            let path = format!("{base}/{}", escape(key));
            ops.push(json!({"op": "add", "path": path, "value": value}));
        }
    }
}

/// RFC 6901 escaping of one JSON-pointer segment.
pub(crate) fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(finalizers: Value, labels: Value) -> Value {
        json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7",
            "finalizers": finalizers, "labels": labels}, "spec": {"a": 1}})
    }

    #[test]
    fn removal_and_label_are_one_guarded_patch() {
        let current = pod(json!(["argo", "other"]), json!({"app": "x"}));
        let next = pod(json!(["other"]), json!({"app": "x", "done": "true"}));
        assert_eq!(
            guarded_patch(&current, &next),
            Some(json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/metadata/finalizers/0", "value": "argo"},
                {"op": "remove", "path": "/metadata/finalizers/0"},
                {"op": "add", "path": "/metadata/labels/done", "value": "true"},
            ]))
        );
    }

    #[test]
    fn several_removals_go_from_the_highest_index_down() {
        let current = pod(json!(["a", "b", "c"]), json!({}));
        let next = pod(json!(["b"]), json!({}));
        let ops = guarded_patch(&current, &next).unwrap();
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
    fn changed_labels_are_tested_before_replaced() {
        let current = pod(json!([]), json!({"example.com/a": "1"}));
        let next = pod(json!([]), json!({"example.com/a": "2"}));
        let ops = guarded_patch(&current, &next).unwrap();
        assert_eq!(
            ops[1],
            json!({"op": "test", "path": "/metadata/labels/example.com~1a", "value": "1"})
        );
        assert_eq!(ops[2]["op"], "replace");
    }

    #[test]
    fn what_a_guarded_patch_cannot_express_is_none() {
        let current = pod(json!([]), json!({}));
        let mut spec = current.clone();
        spec["spec"]["a"] = json!(2);
        assert_eq!(
            guarded_patch(&current, &spec),
            None,
            "outside metadata entries"
        );
        let mut bare = current.clone();
        bare["metadata"].as_object_mut().unwrap().remove("labels");
        let mut labelled = bare.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(guarded_patch(&bare, &labelled), None, "absent map");
        let reordered = pod(json!(["b", "a"]), json!({}));
        assert_eq!(
            guarded_patch(&pod(json!(["a", "b"]), json!({})), &reordered),
            None,
            "a reorder"
        );
    }
}
