//! The change a mutation made, as edits between two views of an object:
//! carried onto a third copy (`carry.rs`: the raw object a typed
//! closure's view was taken from) or sent as a JSON patch that touches
//! exactly those paths.
//!
//! Lists are compared entry by entry where that is unambiguous: equal
//! length (each entry in place), entries appended at the end, or entries
//! removed with the rest kept in order. Anything else (a reorder, an insert
//! in the middle) replaces the list, keeping each unchanged entry's stored
//! copy.

use serde_json::{Value, json};

/// One step of a path into an object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// One edit of a path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Edit {
    /// Set the value at `path`; `old` is what was there, if anything.
    Set {
        path: Vec<Step>,
        old: Option<Value>,
        new: Value,
    },
    /// Remove the value `old` at `path`.
    Remove { path: Vec<Step>, old: Value },
    /// Append `new` to the list at `path`.
    Append { path: Vec<Step>, new: Value },
}

/// What a copy holds of the maps it shows, which decides how a map the
/// change removes is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holds {
    /// Any map may lack keys the server stores (a typed object, a view):
    /// a removed map is removed key by key, never whole.
    Part,
    /// Every map whole (the raw object), except `metadata`'s: the trimmed
    /// cache leaves an annotation out, so those go key by key.
    Whole,
}

impl Holds {
    /// Whether the map at `path` is held whole.
    pub(crate) fn whole_at(self, path: &[Step]) -> bool {
        self == Holds::Whole && !matches!(path.first(), Some(Step::Key(k)) if k == "metadata")
    }
}

/// The edits turning `before` into `after`, in an order that can be
/// applied one after the other (list removals from the highest index down),
/// for a copy that may hold any map in part.
pub(crate) fn diff(before: &Value, after: &Value) -> Vec<Edit> {
    diff_holding(before, after, Holds::Part)
}

/// [`diff`] for a copy that holds its maps as `holds` says.
pub(crate) fn diff_holding(before: &Value, after: &Value, holds: Holds) -> Vec<Edit> {
    let mut edits = Vec::new();
    diff_at(&mut Vec::new(), before, after, holds, &mut edits);
    edits
}

fn diff_at(
    path: &mut Vec<Step>,
    before: &Value,
    after: &Value,
    holds: Holds,
    edits: &mut Vec<Edit>,
) {
    if before == after {
        return;
    }
    match (before, after) {
        (Value::Object(old), Value::Object(new)) => {
            for (key, value) in old {
                path.push(Step::Key(key.clone()));
                match (new.get(key), value) {
                    (Some(next), _) => diff_at(path, value, next, holds, edits),
                    // A map the copy may not hold whole: remove each key
                    // it held, never the map (and what the copy lacks).
                    (None, Value::Object(entries)) if !holds.whole_at(path) => {
                        for (entry, old) in entries {
                            let mut at = path.clone();
                            at.push(Step::Key(entry.clone()));
                            edits.push(Edit::Remove {
                                path: at,
                                old: old.clone(),
                            });
                        }
                    }
                    (None, _) => edits.push(Edit::Remove {
                        path: path.clone(),
                        old: value.clone(),
                    }),
                }
                path.pop();
            }
            for (key, value) in new {
                if !old.contains_key(key) {
                    let mut at = path.clone();
                    at.push(Step::Key(key.clone()));
                    edits.push(Edit::Set {
                        path: at,
                        old: None,
                        new: value.clone(),
                    });
                }
            }
        }
        (Value::Array(old), Value::Array(new)) => list_diff(path, old, new, holds, edits),
        _ => edits.push(Edit::Set {
            path: path.clone(),
            old: Some(before.clone()),
            new: after.clone(),
        }),
    }
}

fn list_diff(
    path: &mut Vec<Step>,
    old: &[Value],
    new: &[Value],
    holds: Holds,
    edits: &mut Vec<Edit>,
) {
    if old.is_empty() {
        // An empty list in a view may be a type's default for a list the
        // server does not store: set it (which creates or replaces it)
        // rather than append to a path that may not exist.
        edits.push(Edit::Set {
            path: path.clone(),
            old: Some(Value::Array(Vec::new())),
            new: Value::Array(new.to_vec()),
        });
        return;
    }
    // A reorder (entries that moved, or renamed in place) is no edit of
    // entries by index: the entry at an index would take fields it does
    // not have (from a copy that lacks them) or be tested by an identity
    // the patch changed. The list is set whole; `apply_change` then keeps
    // each entry's stored copy.
    if old.len() == new.len() && !reorders(old, new) {
        for (index, (a, b)) in old.iter().zip(new).enumerate() {
            path.push(Step::Index(index));
            diff_at(path, a, b, holds, edits);
            path.pop();
        }
        return;
    }
    if new.len() > old.len() && new.starts_with(old) {
        for entry in &new[old.len()..] {
            edits.push(Edit::Append {
                path: path.clone(),
                new: entry.clone(),
            });
        }
        return;
    }
    if let Some(removed) = removed_indices(old, new) {
        for index in removed.into_iter().rev() {
            let mut at = path.clone();
            at.push(Step::Index(index));
            edits.push(Edit::Remove {
                path: at,
                old: old[index].clone(),
            });
        }
        return;
    }
    edits.push(Edit::Set {
        path: path.clone(),
        old: Some(Value::Array(old.to_vec())),
        new: Value::Array(new.to_vec()),
    });
}

/// Whether `new`, as long as `old`, puts other entries at some index: an
/// entry whose `name`, `type` or `key` differs from the one it replaces,
/// or the same entries in another order.
fn reorders(old: &[Value], new: &[Value]) -> bool {
    let renamed = old.iter().zip(new).any(|(a, b)| {
        ["name", "type", "key"].iter().any(|k| {
            matches!((a.get(k), b.get(k)), (Some(x @ Value::String(_)), Some(y @ Value::String(_))) if x != y)
        })
    });
    renamed || (old != new && is_permutation(old, new))
}

/// Whether `new` holds exactly the entries of `old`, in any order.
fn is_permutation(old: &[Value], new: &[Value]) -> bool {
    let mut unmatched: Vec<&Value> = old.iter().collect();
    new.iter()
        .all(|entry| match unmatched.iter().position(|o| *o == entry) {
            Some(at) => {
                unmatched.swap_remove(at);
                true
            }
            None => false,
        })
}

/// The indices of `old` whose removal leaves `new`, if `new` is `old` with
/// some entries taken out and the rest in order.
fn removed_indices(old: &[Value], new: &[Value]) -> Option<Vec<usize>> {
    let (removed, kept) = split_kept(old, new);
    (kept == new.len()).then_some(removed)
}

/// `old` read against `new`: the indices of the entries that are not the
/// next of `new` in order (removed), and how many of `new` were matched
/// (kept, a prefix of `new`; what follows it was appended).
fn split_kept(old: &[Value], new: &[Value]) -> (Vec<usize>, usize) {
    let mut kept = 0;
    let mut removed = Vec::new();
    for (index, entry) in old.iter().enumerate() {
        if new.get(kept) == Some(entry) {
            kept += 1;
        } else {
            removed.push(index);
        }
    }
    (removed, kept)
}

/// A JSON pointer (RFC 6901) to `path`.
pub(crate) fn pointer(path: &[Step]) -> String {
    path.iter()
        .map(|step| match step {
            Step::Key(key) => format!("/{}", escape(key)),
            Step::Index(index) => format!("/{index}"),
        })
        .collect()
}

/// `edits` as JSON patch operations. Guarded by the copy `edits` were
/// computed from, every value replaced or removed is `test`ed first, and
/// each list appended to is tested whole before its first append, so the
/// patch applies only where those values are still what the edits were
/// computed from (and a retried append can never duplicate).
pub(crate) fn json_patch(edits: &[Edit], guard_by: Option<&Value>) -> Vec<Value> {
    let guard = guard_by.is_some();
    let mut ops = Vec::new();
    let mut appended_to: Vec<&[Step]> = Vec::new();
    for edit in edits {
        match edit {
            // An add replaces a member that exists: from a partial copy
            // (a view without `status`) the member may exist on the
            // server, so its absence is tested first.
            Edit::Set {
                path,
                old: None,
                new,
            } => {
                ops.push(json!({"op": "test", "path": pointer(path), "value": null}));
                ops.push(json!({"op": "add", "path": pointer(path), "value": new}));
            }
            Edit::Set {
                path,
                old: Some(old),
                new,
            } => {
                if guard {
                    ops.push(json!({"op": "test", "path": pointer(path), "value": old}));
                }
                // Unguarded, a member is added, which creates or replaces
                // it: a view may show a member (a type's default) that the
                // server does not store. An index is replaced in place.
                let op = match (guard, path.last()) {
                    (false, Some(Step::Key(_))) => "add",
                    _ => "replace",
                };
                ops.push(json!({"op": op, "path": pointer(path), "value": new}));
            }
            Edit::Remove { path, old } => {
                if guard {
                    ops.push(json!({"op": "test", "path": pointer(path), "value": old}));
                }
                ops.push(json!({"op": "remove", "path": pointer(path)}));
            }
            Edit::Append { path, new } => {
                if let Some(current) = guard_by
                    && !appended_to.contains(&path.as_slice())
                {
                    let list = value_at(current, path).cloned().unwrap_or(Value::Null);
                    ops.push(json!({"op": "test", "path": pointer(path), "value": list}));
                    appended_to.push(path);
                }
                ops.push(
                    json!({"op": "add", "path": format!("{}/-", pointer(path)), "value": new}),
                );
            }
        }
    }
    ops
}

/// The value at `path` in `object`, if any.
pub(crate) fn value_at<'a>(object: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, step| match step {
        Step::Key(key) => value.get(key),
        Step::Index(index) => value.get(index),
    })
}

/// RFC 6901 escaping of one JSON-pointer segment.
pub(crate) fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_json_patch_tests_what_it_replaces_or_removes() {
        let before =
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}, "x": 1});
        let after =
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "y": 2});
        let ops = json_patch(&diff(&before, &after), Some(&before));
        assert_eq!(
            ops,
            [
                json!({"op": "test", "path": "/status/conditions/0/status", "value": "False"}),
                json!({"op": "replace", "path": "/status/conditions/0/status", "value": "True"}),
                json!({"op": "test", "path": "/x", "value": 1}),
                json!({"op": "remove", "path": "/x"}),
                json!({"op": "test", "path": "/y", "value": null}),
                json!({"op": "add", "path": "/y", "value": 2}),
            ]
        );
        let unguarded = json_patch(&diff(&before, &after), None);
        assert_eq!(
            unguarded[0],
            json!({"op": "add", "path": "/status/conditions/0/status", "value": "True"})
        );
        assert_eq!(unguarded.len(), 4, "an add tests the member absent");
    }

    #[test]
    fn a_guarded_append_tests_the_list_once_so_a_retry_cannot_duplicate() {
        let before = json!({"spec": {"ports": [{"port": 80}]}});
        let after = json!({"spec": {"ports": [{"port": 80}, {"port": 81}, {"port": 82}]}});
        let ops = json_patch(&diff(&before, &after), Some(&before));
        assert_eq!(
            ops,
            [
                json!({"op": "test", "path": "/spec/ports", "value": [{"port": 80}]}),
                json!({"op": "add", "path": "/spec/ports/-", "value": {"port": 81}}),
                json!({"op": "add", "path": "/spec/ports/-", "value": {"port": 82}}),
            ]
        );
    }

    #[test]
    fn an_entry_renamed_in_place_is_set_with_its_list() {
        let before = json!({"l": [{"name": "a", "v": 1}]});
        let after = json!({"l": [{"name": "z", "v": 2}]});
        assert_eq!(
            diff(&before, &after),
            [Edit::Set {
                path: vec![Step::Key("l".into())],
                old: Some(json!([{"name": "a", "v": 1}])),
                new: json!([{"name": "z", "v": 2}]),
            }]
        );
    }
}
