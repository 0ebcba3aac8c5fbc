//! Carrying a typed mutation's change onto the stored object.
//!
//! A round trip through a Rust type is a lossy copy: `from_value` then
//! `to_value` drops every field the type lacks. So a typed mutation never
//! replaces the object with its typed result; its change — the difference
//! between the type's view before and after (`change.rs`) — is applied to
//! the raw object, and a field the type does not know is never touched.

use serde_json::{Map, Value};

use crate::align::{covers, misaligned_list, same_identity, value_at};
use crate::change::{Edit, Step, diff};

/// Apply the change from `before` to `after` (two views of `raw`, e.g. a
/// Rust type's) to `raw`, leaving everything else in `raw` as it is.
pub(crate) fn apply_change(raw: &mut Value, before: &Value, after: &Value) {
    let mut whole: Vec<Vec<Step>> = Vec::new();
    for edit in diff(before, after) {
        // Edits of a list address its entries by index in the view. Where
        // the view's list is not the stored one entry for entry (a type
        // that sorts or deduplicates it), an index names another stored
        // entry: the list is set whole instead, each entry keeping its
        // stored copy where the view shows one.
        match misaligned_list(raw, before, edit_path(&edit)) {
            Some(list) if whole.contains(&list) => {}
            Some(list) => {
                let old = value_at(before, &list).cloned();
                let new = value_at(after, &list).cloned().unwrap_or(Value::Null);
                apply_edit(
                    raw,
                    Edit::Set {
                        path: list.clone(),
                        old,
                        new,
                    },
                );
                whole.push(list);
            }
            None => apply_edit(raw, edit),
        }
    }
}

fn edit_path(edit: &Edit) -> &[Step] {
    match edit {
        Edit::Set { path, .. } | Edit::Remove { path, .. } | Edit::Append { path, .. } => path,
    }
}

fn apply_edit(raw: &mut Value, edit: Edit) {
    match edit {
        Edit::Set { path, old, new } => {
            let Some((last, parent)) = path.split_last() else {
                *raw = keep_stored_entries(raw, old.as_ref(), new);
                return;
            };
            let Some(slot) = container(raw, parent) else {
                return;
            };
            if slot.is_null() && matches!(last, Step::Key(_)) {
                *slot = Value::Object(Map::new());
            }
            match (slot, last) {
                (Value::Object(map), Step::Key(key)) => {
                    let value = keep_stored_entries(
                        map.get(key).unwrap_or(&Value::Null),
                        old.as_ref(),
                        new,
                    );
                    map.insert(key.clone(), value);
                }
                (Value::Array(list), Step::Index(index)) if *index < list.len() => {
                    list[*index] = keep_stored_entries(&list[*index], old.as_ref(), new);
                }
                (Value::Array(list), Step::Index(index)) if *index == list.len() => list.push(new),
                _ => {}
            }
        }
        Edit::Remove { path, .. } => {
            let Some((last, parent)) = path.split_last() else {
                return;
            };
            match (container(raw, parent), last) {
                (Some(Value::Object(map)), Step::Key(key)) => {
                    map.remove(key);
                }
                (Some(Value::Array(list)), Step::Index(index)) if *index < list.len() => {
                    list.remove(*index);
                }
                _ => {}
            }
        }
        Edit::Append { path, new } => {
            if let Some(slot) = container(raw, &path) {
                match slot {
                    Value::Array(list) => list.push(new),
                    other => *other = Value::Array(vec![new]),
                }
            }
        }
    }
}

/// `new` in place of `stored`; when a list is replaced whole, an entry of
/// the view keeps its stored copy (with the fields the view lacks): one
/// equal to an entry of the `old` view takes that entry's stored copy,
/// one of the same identity (`name`, `type` or `key`) that changed takes
/// the stored copy with the change applied, and an entry the stored list
/// holds a covering copy of takes that copy.
fn keep_stored_entries(stored: &Value, old: Option<&Value>, new: Value) -> Value {
    let (Value::Array(stored), Value::Array(entries)) = (stored, &new) else {
        return new;
    };
    let old = match old {
        Some(Value::Array(old)) => old.as_slice(),
        _ => &[],
    };
    let aligned = stored.len() == old.len() && old.iter().zip(stored).all(|(v, s)| covers(v, s));
    let mut used = vec![false; stored.len()];
    let take = |i: usize, used: &mut Vec<bool>| {
        used[i] = true;
        stored[i].clone()
    };
    let entries = entries
        .iter()
        .map(|entry| {
            if aligned {
                if let Some(i) = (0..old.len()).find(|&i| !used[i] && old[i] == *entry) {
                    return take(i, &mut used);
                }
                if let Some(i) = (0..old.len()).find(|&i| !used[i] && same_identity(&old[i], entry))
                {
                    let (before, mut copy) = (old[i].clone(), take(i, &mut used));
                    apply_change(&mut copy, &before, entry);
                    return copy;
                }
            }
            match (0..stored.len()).find(|&i| !used[i] && covers(entry, &stored[i])) {
                Some(i) => take(i, &mut used),
                None => entry.clone(),
            }
        })
        .collect();
    Value::Array(entries)
}

/// The value at `path` in `raw`, creating missing objects on the way (a
/// view may hold a default the raw object lacks); `None` where the path
/// runs through something that is not a container or past a list's end.
fn container<'a>(raw: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    let mut current = raw;
    for (at, step) in path.iter().enumerate() {
        current = match step {
            Step::Key(key) => {
                if current.is_null() {
                    *current = Value::Object(Map::new());
                }
                let map = current.as_object_mut()?;
                // Only objects are created: a missing list has no entries
                // to edit.
                if !map.contains_key(key) && matches!(path.get(at + 1), Some(Step::Index(_))) {
                    return None;
                }
                map.entry(key.clone()).or_insert(Value::Null)
            }
            Step::Index(index) => current.as_array_mut()?.get_mut(*index)?,
        };
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::change::json_patch;

    #[test]
    fn a_change_keeps_what_the_view_lacks() {
        let mut raw = json!({"spec": {"size": 1, "color": "red"}});
        let before = json!({"spec": {"size": 1}});
        let after = json!({"spec": {"size": 2}});
        apply_change(&mut raw, &before, &after);
        assert_eq!(raw, json!({"spec": {"size": 2, "color": "red"}}));
    }

    #[test]
    fn list_entries_change_in_place_with_their_unknown_fields() {
        let mut raw =
            json!({"c": [{"name": "a", "image": "x", "extra": 1}, {"name": "b", "extra": 2}]});
        let before = json!({"c": [{"name": "a", "image": "x"}, {"name": "b"}]});
        let after = json!({"c": [{"name": "a", "image": "y"}, {"name": "b"}]});
        apply_change(&mut raw, &before, &after);
        assert_eq!(
            raw,
            json!({"c": [{"name": "a", "image": "y", "extra": 1}, {"name": "b", "extra": 2}]})
        );
    }

    #[test]
    fn appends_removals_and_reorders_keep_stored_entries() {
        let raw = json!({"c": [{"n": 1, "x": 1}, {"n": 2, "x": 2}, {"n": 3, "x": 3}]});
        let before = json!({"c": [{"n": 1}, {"n": 2}, {"n": 3}]});
        let cases = [
            (
                json!({"c": [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]}),
                json!({"c": [{"n": 1, "x": 1}, {"n": 2, "x": 2}, {"n": 3, "x": 3}, {"n": 4}]}),
            ),
            (
                json!({"c": [{"n": 1}, {"n": 3}]}),
                json!({"c": [{"n": 1, "x": 1}, {"n": 3, "x": 3}]}),
            ),
            (
                json!({"c": [{"n": 3}, {"n": 1}]}),
                json!({"c": [{"n": 3, "x": 3}, {"n": 1, "x": 1}]}),
            ),
        ];
        for (after, expected) in cases {
            let mut changed = raw.clone();
            apply_change(&mut changed, &before, &after);
            assert_eq!(changed, expected, "{after}");
        }
    }

    #[test]
    fn a_view_default_the_raw_object_lacks_is_created() {
        let mut raw = json!({"metadata": {"name": "x"}});
        apply_change(
            &mut raw,
            &json!({"spec": {"size": 0}}),
            &json!({"spec": {"size": 3}}),
        );
        assert_eq!(raw, json!({"metadata": {"name": "x"}, "spec": {"size": 3}}));
    }

    #[test]
    fn a_list_empty_in_the_view_is_set_not_appended_to() {
        let edits = diff(
            &json!({"status": {"conditions": []}}),
            &json!({"status": {"conditions": [{"type": "A"}]}}),
        );
        assert_eq!(
            json_patch(&edits, None),
            [json!({"op": "add", "path": "/status/conditions", "value": [{"type": "A"}]})]
        );
        let mut raw = json!({"status": {"phase": "Running"}});
        apply_change(
            &mut raw,
            &json!({"status": {"conditions": []}}),
            &json!({"status": {"conditions": [{"type": "A"}]}}),
        );
        assert_eq!(
            raw,
            json!({"status": {"phase": "Running", "conditions": [{"type": "A"}]}})
        );
    }

    #[test]
    fn a_removed_key_is_removed_and_nothing_else() {
        let mut raw = json!({"a": 1, "b": 2, "unknown": 3});
        apply_change(&mut raw, &json!({"a": 1, "b": 2}), &json!({"a": 1}));
        assert_eq!(raw, json!({"a": 1, "unknown": 3}));
    }

    #[test]
    fn a_reorder_from_a_copy_lacking_a_field_keeps_it_on_its_entry() {
        let mut raw = json!({"items": [
            {"name": "b", "value": "", "extra": "tab"},
            {"name": "c", "value": "ctl", "extra": "url"},
        ]});
        let before = json!({"items": [{"name": "b", "value": ""}, {"name": "c", "value": "ctl"}]});
        let after = json!({"items": [{"name": "c", "value": "ctl"}, {"name": "b", "value": ""}]});
        apply_change(&mut raw, &before, &after);
        assert_eq!(
            raw,
            json!({"items": [
                {"name": "c", "value": "ctl", "extra": "url"},
                {"name": "b", "value": "", "extra": "tab"},
            ]})
        );
    }
}
