//! Carrying a typed mutation's change onto the stored object.
//!
//! A round trip through a Rust type is a lossy copy: `from_value` then
//! `to_value` drops every field the type lacks. So a typed mutation never
//! replaces the object with its typed result; its change — the difference
//! between the type's view before and after (`change.rs`) — is applied to
//! the raw object, and a field the type does not know is never touched.

use serde_json::{Map, Value};

use crate::model::align::{Entries, View, misaligned_list, same_identity};
use crate::model::change::value_at;
use crate::model::change::{Edit, Step, diff};

/// Apply the change from `before` to `after` (two views of `raw` through
/// a type, `view` being how that type sees any raw object) to `raw`,
/// leaving everything else in `raw` as it is.
///
/// `before` is `raw` as the type sees it, so the two line up by
/// construction; where a list's entries differ in bytes (`1` stored, `1.0`
/// shown) each stored entry is seen through the type before it is judged
/// another entry.
pub(crate) fn apply_change(raw: &mut Value, before: &Value, after: &Value, view: View<'_>) {
    // Lists are judged as the object was before this change: an entry the
    // change already edited must not look like another entry.
    let original = raw.clone();
    let mut aligned: Vec<Vec<Step>> = Vec::new();
    let mut whole: Vec<Vec<Step>> = Vec::new();
    for edit in diff(before, after) {
        // Edits of a list address its entries by index in the view. Where
        // the view's list is not the stored one entry for entry (a type
        // that sorts or deduplicates it), an index names another stored
        // entry: the list is set whole instead, each entry keeping its
        // stored copy where the view shows one.
        match misaligned_list(&original, before, edit_path(&edit), view, &mut aligned) {
            Some(list) if whole.contains(&list) => {}
            Some(list) => {
                let old = value_at(before, &list).cloned();
                let new = value_at(after, &list).cloned().unwrap_or(Value::Null);
                apply_edit(
                    raw,
                    &original,
                    view,
                    Edit::Set {
                        path: list.clone(),
                        old,
                        new,
                    },
                );
                whole.push(list);
            }
            None => apply_edit(raw, &original, view, edit),
        }
    }
}

fn edit_path(edit: &Edit) -> &[Step] {
    match edit {
        Edit::Set { path, .. } | Edit::Remove { path, .. } | Edit::Append { path, .. } => path,
    }
}

/// Apply `edit` to `raw`; `original` is `raw` before the change began,
/// where a list set whole finds its stored entries to see through `view`.
fn apply_edit(raw: &mut Value, original: &Value, view: View<'_>, edit: Edit) {
    match edit {
        Edit::Set { path, old, new } => {
            let entries = Entries::new(original, &path, view);
            let Some((last, parent)) = path.split_last() else {
                *raw = keep_stored_entries(raw, old.as_ref(), new, entries.as_ref());
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
                        entries.as_ref(),
                    );
                    map.insert(key.clone(), value);
                }
                (Value::Array(list), Step::Index(index)) if *index < list.len() => {
                    list[*index] =
                        keep_stored_entries(&list[*index], old.as_ref(), new, entries.as_ref());
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
/// the view keeps its stored copy (with the fields the view lacks and the
/// values as stored). Each entry of the `old` view is paired with the
/// stored entry it was decoded from (the one at its index where the lists
/// line up, else the one it shows in the type's terms); an entry of `new`
/// equal to an `old` one takes its stored copy, one of the same identity
/// (`name`, `type` or `key`) that changed takes the stored copy with the
/// change applied, and one a stored entry shows takes that entry.
fn keep_stored_entries(
    stored: &Value,
    old: Option<&Value>,
    new: Value,
    entries: Option<&Entries<'_>>,
) -> Value {
    let (Value::Array(stored), Value::Array(list)) = (stored, &new) else {
        return new;
    };
    let old = match old {
        Some(Value::Array(old)) => old.as_slice(),
        _ => &[],
    };
    // The list as the change began holds these very entries (a list set
    // whole is edited by nothing else): only then may the type see them.
    let entries = entries.filter(|e| e.stored() == stored.as_slice());
    let shows = |seen: &Value, index: usize| match entries {
        Some(entries) => entries.shows(seen, index),
        None => crate::model::align::covers(seen, &stored[index]),
    };
    let pairs = pair(old, stored.len(), &shows);
    let mut used = vec![false; stored.len()];
    let mut used_old = vec![false; old.len()];
    let no_type = |_: &Value| None;
    let through_type = |entry: &Value| entries.and_then(|e| e.view_of(entry));
    let nested: View<'_> = if entries.is_some() {
        &through_type
    } else {
        &no_type
    };
    let entries = list
        .iter()
        .map(|entry| {
            let paired = |k: usize, used: &[bool], used_old: &[bool]| {
                !used_old[k] && pairs[k].is_some_and(|j| !used[j])
            };
            if let Some(k) =
                (0..old.len()).find(|&k| paired(k, &used, &used_old) && old[k] == *entry)
                && let Some(j) = pairs[k]
            {
                (used[j], used_old[k]) = (true, true);
                return stored[j].clone();
            }
            if let Some(k) = (0..old.len())
                .find(|&k| paired(k, &used, &used_old) && same_identity(&old[k], entry))
                && let Some(j) = pairs[k]
            {
                (used[j], used_old[k]) = (true, true);
                let mut copy = stored[j].clone();
                apply_change(&mut copy, &old[k], entry, nested);
                return copy;
            }
            match (0..stored.len()).find(|&j| !used[j] && shows(entry, j)) {
                Some(j) => {
                    used[j] = true;
                    stored[j].clone()
                }
                None => entry.clone(),
            }
        })
        .collect();
    Value::Array(entries)
}

/// The stored entry (of `stored` many) each entry of the view `old` was
/// decoded from: the one at its index where every entry shows the stored
/// one there, else the first unpaired stored entry it shows.
fn pair(old: &[Value], stored: usize, shows: &dyn Fn(&Value, usize) -> bool) -> Vec<Option<usize>> {
    if old.len() == stored && old.iter().enumerate().all(|(i, seen)| shows(seen, i)) {
        return (0..stored).map(Some).collect();
    }
    let mut taken = vec![false; stored];
    old.iter()
        .map(|seen| {
            let j = (0..stored).find(|&j| !taken[j] && shows(seen, j))?;
            taken[j] = true;
            Some(j)
        })
        .collect()
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
    use crate::model::change::json_patch;

    /// No type: entries compare by their bytes alone.
    fn no_type(_: &Value) -> Option<Value> {
        None
    }

    #[test]
    fn a_change_keeps_what_the_view_lacks() {
        let mut raw = json!({"spec": {"size": 1, "color": "red"}});
        let before = json!({"spec": {"size": 1}});
        let after = json!({"spec": {"size": 2}});
        apply_change(&mut raw, &before, &after, &no_type);
        assert_eq!(raw, json!({"spec": {"size": 2, "color": "red"}}));
    }

    #[test]
    fn list_entries_change_in_place_with_their_unknown_fields() {
        let mut raw =
            json!({"c": [{"name": "a", "image": "x", "extra": 1}, {"name": "b", "extra": 2}]});
        let before = json!({"c": [{"name": "a", "image": "x"}, {"name": "b"}]});
        let after = json!({"c": [{"name": "a", "image": "y"}, {"name": "b"}]});
        apply_change(&mut raw, &before, &after, &no_type);
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
            apply_change(&mut changed, &before, &after, &no_type);
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
            &no_type,
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
            &no_type,
        );
        assert_eq!(
            raw,
            json!({"status": {"phase": "Running", "conditions": [{"type": "A"}]}})
        );
    }

    #[test]
    fn a_removed_key_is_removed_and_nothing_else() {
        let mut raw = json!({"a": 1, "b": 2, "unknown": 3});
        apply_change(
            &mut raw,
            &json!({"a": 1, "b": 2}),
            &json!({"a": 1}),
            &no_type,
        );
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
        apply_change(&mut raw, &before, &after, &no_type);
        assert_eq!(
            raw,
            json!({"items": [
                {"name": "c", "value": "ctl", "extra": "url"},
                {"name": "b", "value": "", "extra": "tab"},
            ]})
        );
    }

    /// A type that writes every number as a float and lacks `owner`.
    fn floats_without_owner(raw: &Value) -> Option<Value> {
        Some(match raw {
            Value::Number(n) => json!(n.as_f64()?),
            Value::Array(list) => {
                Value::Array(list.iter().filter_map(floats_without_owner).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, _)| *k != "owner")
                    .filter_map(|(k, v)| Some((k.clone(), floats_without_owner(v)?)))
                    .collect(),
            ),
            other => other.clone(),
        })
    }

    #[test]
    fn a_nested_list_is_judged_in_the_type_terms_at_every_depth() {
        let raw = json!({"groups": [
            {"name": "g", "owner": "o", "items": [{"n": 1, "owner": "x"}, {"n": 2, "owner": "y"}]},
        ]});
        let before = floats_without_owner(&raw).unwrap();
        let mut after = before.clone();
        after["groups"][0]["items"][1]["n"] = json!(2.5);
        let mut changed = raw.clone();
        apply_change(&mut changed, &before, &after, &floats_without_owner);
        let mut expected = raw;
        expected["groups"][0]["items"][1]["n"] = json!(2.5);
        assert_eq!(changed, expected);
    }
}
