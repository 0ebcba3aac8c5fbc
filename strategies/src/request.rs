//! How a strategy's request is built from the object it last saw and the
//! object with the mutation applied. Every strategy's wire format is here;
//! the loop that sends it is in `write_loop.rs`.

use serde_json::{Value, json};

use crate::change::{diff, json_patch};
use crate::guarded_patch::{escape, guarded_patch};
use crate::merge_patch::{merge_diff, set_metadata};
use crate::observed::meta;
use crate::{Error, Intent, ObjectKey};

/// A body ready to send.
#[derive(Debug, PartialEq)]
pub(crate) enum Body {
    /// A JSON merge patch.
    Merge(Value),
    /// A JSON patch (RFC 6902) as a list of operations.
    Json(Value),
    /// The whole object, for a `PUT`.
    Put(Value),
    /// A server-side apply configuration under its own field manager.
    Apply { config: Value, manager: String },
}

/// The request shapes of the strategies that compute a body from the
/// observed object.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Request<'a> {
    /// `lax`: the merge patch alone.
    Merge,
    /// `locked`: the merge patch guarded by the uid only.
    MergeWithUid,
    /// `strict`: the merge patch with `resourceVersion` and `uid`.
    MergeWithVersion,
    /// `update`: the whole object with `resourceVersion` and `uid` reset
    /// after the mutation, so a mutation cannot make the PUT unconditional.
    Put,
    /// `apply`'s fallback: `test` the uid and the entry, then `remove` it.
    GuardedRemoval(&'a Intent),
    /// `apply`'s one request for a mutation of several intents: a JSON
    /// patch guarding every entry it changes, or where that cannot express
    /// the change, the `strict` merge patch (see `guarded_patch.rs`).
    Guarded,
}

impl Request<'_> {
    /// The body turning `current` into `next`; `None` when there is
    /// nothing to send.
    pub(crate) fn build(
        self,
        key: &ObjectKey,
        current: &Value,
        mut next: Value,
    ) -> Result<Option<Body>, Error> {
        let version = || {
            meta(current, "resourceVersion").ok_or_else(|| Error::MissingField {
                object: key.clone(),
                field: "metadata.resourceVersion",
            })
        };
        Ok(match self {
            Request::Merge => match merge_diff(current, &next) {
                None => None,
                // A merge patch would replace the list whole, entries this
                // write did not change (and fields a typed copy lacks)
                // included: send exactly the changed entries instead,
                // each tested, so a concurrent change to them is refused
                // rather than overwritten.
                Some(patch) if replaces_object_list(&patch) => Some(Body::Json(Value::Array(
                    json_patch(&diff(current, &next), true),
                ))),
                Some(patch) => Some(Body::Merge(patch)),
            },
            Request::MergeWithUid => merge_diff(current, &next).map(|mut patch| {
                if let Some(uid) = meta(current, "uid") {
                    set_metadata(&mut patch, "uid", uid);
                }
                Body::Merge(patch)
            }),
            Request::MergeWithVersion => match merge_diff(current, &next) {
                None => None,
                Some(patch) if replaces_object_list(&patch) => {
                    // The same precondition in JSON-patch form: the
                    // patched object carries the observed version, so
                    // the server answers 409 if the object moved on.
                    let mut ops = Vec::new();
                    if let Some(uid) = meta(current, "uid") {
                        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
                    }
                    ops.push(json!({"op": "replace", "path": "/metadata/resourceVersion", "value": version()?}));
                    ops.extend(json_patch(&diff(current, &next), false));
                    Some(Body::Json(Value::Array(ops)))
                }
                Some(mut patch) => {
                    set_metadata(&mut patch, "resourceVersion", version()?);
                    if let Some(uid) = meta(current, "uid") {
                        set_metadata(&mut patch, "uid", uid);
                    }
                    Some(Body::Merge(patch))
                }
            },
            Request::Put => {
                set_metadata(&mut next, "resourceVersion", version()?);
                if let Some(uid) = meta(current, "uid") {
                    set_metadata(&mut next, "uid", uid);
                }
                Some(Body::Put(next))
            }
            Request::GuardedRemoval(intent) => guarded_removal(intent, current).map(Body::Json),
            Request::Guarded if *current == next => None,
            Request::Guarded => match guarded_patch(current, &next) {
                Some(ops) => Some(Body::Json(ops)),
                None => Request::MergeWithVersion.build(key, current, next)?,
            },
        })
    }

    /// Whether the request carries the observed uid, so that a `422` may
    /// mean the object was recreated.
    pub(crate) fn carries_uid(self) -> bool {
        !matches!(self, Request::Merge)
    }
}

impl Body {
    /// Whether a `422` to this body may mean a `test` tripped (retry on a
    /// fresh read) rather than a rejected body: every JSON patch concord
    /// sends is guarded.
    pub(crate) fn invalid_means_conflict(&self) -> bool {
        matches!(self, Body::Json(_))
    }
}

/// Whether a merge patch sets a list holding objects: it would replace the
/// list whole, with every entry's content taken from the observed copy.
fn replaces_object_list(patch: &Value) -> bool {
    match patch {
        Value::Array(entries) => entries.iter().any(Value::is_object),
        Value::Object(map) => map.values().any(replaces_object_list),
        _ => false,
    }
}

/// JSON patch ops removing `intent`'s entry from `object` only if the
/// object, and the entry at each place it is, are still what we saw: every
/// copy of a finalizer goes (the API server allows duplicates).
/// `None` if the entry is absent.
pub(crate) fn guarded_removal(intent: &Intent, object: &Value) -> Option<Value> {
    let metadata = object.get("metadata")?;
    let mut ops = Vec::new();
    if let Some(uid) = meta(object, "uid") {
        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
    }
    let mut remove = |path: String, value: Value| {
        ops.push(json!({"op": "test", "path": path, "value": value}));
        ops.push(json!({"op": "remove", "path": path}));
    };
    match intent {
        Intent::RemoveFinalizer(name) => {
            let list = metadata.get("finalizers")?.as_array()?;
            let copies: Vec<usize> = (0..list.len())
                .filter(|&i| list[i].as_str() == Some(name))
                .collect();
            if copies.is_empty() {
                return None;
            }
            for index in copies.into_iter().rev() {
                remove(format!("/metadata/finalizers/{index}"), json!(name));
            }
        }
        Intent::RemoveLabel(key) => {
            let value = metadata.get("labels")?.get(key)?;
            remove(format!("/metadata/labels/{}", escape(key)), value.clone());
        }
        Intent::RemoveAnnotation(key) => {
            let value = metadata.get("annotations")?.get(key)?;
            remove(
                format!("/metadata/annotations/{}", escape(key)),
                value.clone(),
            );
        }
        _ => return None,
    }
    Some(Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(finalizers: &[&str]) -> Value {
        json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7", "finalizers": finalizers}})
    }

    fn key() -> ObjectKey {
        ObjectKey::new("pods", Some("ns"), "p")
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
    fn guarded_removal_takes_out_every_copy() {
        let ops = guarded_removal(&Intent::remove_finalizer("b"), &pod(&["b", "a", "b"])).unwrap();
        let removed: Vec<&str> = ops
            .as_array()
            .unwrap()
            .iter()
            .filter(|op| op["op"] == "remove")
            .map(|op| op["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            removed,
            ["/metadata/finalizers/2", "/metadata/finalizers/0"]
        );
    }

    #[test]
    fn strict_sends_changed_list_entries_not_the_list() {
        let mut current = pod(&[]);
        current["status"] = json!({"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]});
        let mut next = current.clone();
        next["status"]["conditions"][0]["status"] = json!("True");
        let body = Request::MergeWithVersion
            .build(&key(), &current, next)
            .unwrap();
        assert_eq!(
            body,
            Some(Body::Json(json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "replace", "path": "/status/conditions/0/status", "value": "True"},
            ])))
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
    fn put_resets_version_and_uid_a_mutation_removed() {
        let current = pod(&[]);
        let mut next = current.clone();
        next["metadata"]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| k == "name");
        let body = Request::Put.build(&key(), &current, next).unwrap();
        let Some(Body::Put(body)) = body else {
            panic!("{body:?}")
        };
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        assert_eq!(body["metadata"]["uid"], "u1");
    }

    #[test]
    fn strict_patch_carries_version_and_uid() {
        let current = pod(&["a"]);
        let mut next = current.clone();
        next["metadata"]["finalizers"] = json!([]);
        let body = Request::MergeWithVersion
            .build(&key(), &current, next)
            .unwrap();
        assert_eq!(
            body,
            Some(Body::Merge(json!({"metadata": {
                "finalizers": [], "resourceVersion": "7", "uid": "u1"
            }})))
        );
    }
}
