//! JSON merge patch (RFC 7386) computed as the difference of two objects.

use serde_json::{Map, Value};

use crate::model::change::{Holds, Step};

/// The merge patch that turns `old` into `new`, `None` when they are equal,
/// for a copy holding its maps as `holds` says.
///
/// Arrays are replaced whole — that is what a merge patch can express, and
/// why a merge patch without a precondition loses concurrent list changes.
pub(crate) fn merge_diff(old: &Value, new: &Value, holds: Holds) -> Option<Value> {
    merge_at(&mut Vec::new(), old, new, holds)
}

fn merge_at(path: &mut Vec<Step>, old: &Value, new: &Value, holds: Holds) -> Option<Value> {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, old_value) in old {
                path.push(Step::Key(key.clone()));
                match (new.get(key), old_value) {
                    // A map the copy may not hold whole (the trimmed
                    // cache leaves an annotation out, a view a key): `null`
                    // would delete every key on the server, so each key
                    // the copy held is deleted instead.
                    (None, Value::Object(entries)) if !holds.whole_at(path) => {
                        if !entries.is_empty() {
                            let nulls = entries.keys().map(|k| (k.clone(), Value::Null));
                            patch.insert(key.clone(), Value::Object(nulls.collect()));
                        }
                    }
                    (None, _) => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    (Some(new_value), _) => {
                        if let Some(d) = merge_at(path, old_value, new_value, holds) {
                            patch.insert(key.clone(), d);
                        }
                    }
                }
                path.pop();
            }
            for (key, new_value) in new {
                if !old.contains_key(key) {
                    patch.insert(key.clone(), new_value.clone());
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (old, new) if old == new => None,
        (_, new) => Some(new.clone()),
    }
}

/// Whether `new` holds a `null` that `old` does not hold at the same
/// place. A merge patch cannot carry it: its `null` deletes the key, and
/// the server drops the nulls inside a value it adds or replaces whole. A
/// `nullable` field set to `null` must go as a JSON patch.
pub(crate) fn sets_null(old: &Value, new: &Value) -> bool {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            new.iter().any(|(key, value)| match old.get(key) {
                Some(was) => sets_null(was, value),
                None => holds_null(value),
            })
        }
        (old, new) if old == new => false,
        (_, new) => holds_null(new),
    }
}

/// Whether `value` is or holds a `null`.
fn holds_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(entries) => entries.iter().any(holds_null),
        Value::Object(map) => map.values().any(holds_null),
        _ => false,
    }
}

/// Set `metadata.<field>` in a merge patch body.
pub(crate) fn set_metadata(patch: &mut Value, field: &str, value: &str) {
    if let Value::Object(root) = patch {
        let meta = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(field.to_owned(), Value::String(value.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_replaces_whole_lists() {
        let old = json!({"metadata": {"finalizers": ["a", "b"], "name": "x"}});
        let new = json!({"metadata": {"finalizers": ["b"], "name": "x"}});
        assert_eq!(
            merge_diff(&old, &new, Holds::Part),
            Some(json!({"metadata": {"finalizers": ["b"]}}))
        );
    }

    #[test]
    fn diff_nulls_removed_keys_and_applies_back() {
        let old = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "status": {"x": 1}});
        let new = json!({"metadata": {"labels": {"b": "3"}}});
        let patch = merge_diff(&old, &new, Holds::Part).unwrap();
        let mut applied = old.clone();
        json_patch::merge(&mut applied, &patch);
        assert_eq!(
            applied,
            json!({"metadata": {"labels": {"b": "3"}}, "status": {}})
        );
    }

    #[test]
    fn a_removed_map_deletes_only_the_keys_the_copy_held() {
        let old = json!({"metadata": {"annotations": {"mine": "1"}}});
        let new = json!({"metadata": {}});
        let patch = merge_diff(&old, &new, Holds::Part).unwrap();
        assert_eq!(patch, json!({"metadata": {"annotations": {"mine": null}}}));
        let mut stored = json!({"metadata": {"annotations": {"mine": "1", "left-out": "2"}}});
        json_patch::merge(&mut stored, &patch);
        assert_eq!(
            stored,
            json!({"metadata": {"annotations": {"left-out": "2"}}})
        );
        assert_eq!(merge_diff(&json!({"a": {}}), &json!({}), Holds::Part), None);
    }

    #[test]
    fn a_copy_holding_its_maps_whole_removes_a_map_whole_outside_metadata() {
        let old =
            json!({"metadata": {"annotations": {"mine": "1"}}, "spec": {"m": {"deep": {"x": 1}}}});
        let new = json!({"metadata": {}, "spec": {"m": {}}});
        assert_eq!(
            merge_diff(&old, &new, Holds::Whole),
            Some(
                json!({"metadata": {"annotations": {"mine": null}}, "spec": {"m": {"deep": null}}})
            )
        );
    }

    #[test]
    fn diff_of_equal_objects_is_none() {
        let obj = json!({"a": [1, 2], "b": {"c": null}});
        assert_eq!(merge_diff(&obj, &obj, Holds::Whole), None);
    }

    #[test]
    fn a_null_the_new_object_sets_is_found_at_any_depth() {
        let old = json!({"spec": {"note": "x", "kept": null, "list": [{"a": 1}]}});
        assert!(!sets_null(&old, &old));
        assert!(sets_null(
            &old,
            &json!({"spec": {"note": null, "kept": null, "list": [{"a": 1}]}})
        ));
        assert!(sets_null(
            &old,
            &json!({"spec": {"note": "x", "kept": null, "list": [{"a": null}]}})
        ));
        assert!(sets_null(
            &old,
            &json!({"spec": {"note": "x", "kept": null, "list": [{"a": 1}], "new": {"b": null}}})
        ));
        assert!(
            !sets_null(&old, &json!({"spec": {"list": [{"a": 2}]}})),
            "a removal is no null"
        );
    }

    #[test]
    fn set_metadata_adds_precondition_fields() {
        let mut patch = json!({"metadata": {"labels": {"a": "1"}}});
        set_metadata(&mut patch, "resourceVersion", "42");
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
    }
}
