//! How a strategy's request is built from the object it last saw and the
//! object with the mutation applied. Every strategy's wire format is here;
//! the loop that sends it is in `runner/write_loop.rs`.

use serde_json::{Value, json};

use crate::body::guarded_patch::{GuardedBody, guarded};
use crate::body::merge_patch::{merge_diff, set_metadata, sets_null};
use crate::model::change::{Holds, diff_holding, json_patch};
use crate::model::observed::meta;
use crate::{Error, ObjectKey};

/// The most operations kube-apiserver accepts in one JSON patch (more
/// answer `413 RequestEntityTooLarge`).
pub(crate) const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// A body ready to send.
#[derive(Debug, PartialEq)]
pub(crate) enum Body {
    /// A JSON merge patch.
    Merge(Value),
    /// A JSON patch (RFC 6902) as a list of operations.
    Json(Value),
    /// A strategic merge patch (built-in types only).
    Strategic(Value),
    /// The whole object, for a `PUT`.
    Put(Value),
    /// A server-side apply configuration under its own field manager.
    Apply { config: Value, manager: String },
    /// A new object, for a `POST`.
    Create(Value),
    /// A `DELETE` with these preconditions.
    Delete {
        uid: Option<String>,
        resource_version: Option<String>,
    },
}

/// The request shapes of the strategies that compute a body from the
/// observed object.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Request {
    /// `lax`: the merge patch alone.
    Merge,
    /// `locked`: the merge patch guarded by the uid only.
    MergeWithUid,
    /// `strict`: the merge patch with `resourceVersion` and `uid`.
    MergeWithVersion,
    /// `update`: the whole object with `resourceVersion` and `uid` reset
    /// after the mutation, so a mutation cannot make the PUT unconditional.
    Put,
    /// `guarded`, and `apply`'s one request for a mutation of several
    /// intents: preconditions on exactly what it writes (see
    /// `guarded_patch.rs`).
    Guarded,
}

/// What a request is built for: the object, and what the write knows of
/// how the server treats it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Writing<'a> {
    /// The object written.
    pub(crate) key: &'a ObjectKey,
    /// Whether the server strategic-merges the resource (a built-in type).
    pub(crate) strategic: bool,
    /// Paths (JSON pointers) the mutation depends on besides those it writes.
    pub(crate) depends: &'a [String],
    /// What the copy holds of the maps it shows (a raw object holds them
    /// whole, a typed object or a view may not).
    pub(crate) holds: Holds,
    /// Whether the write goes to the status subresource, which keeps the
    /// stored metadata: a uid in a merge patch is not checked there.
    pub(crate) status: bool,
}

impl Request {
    /// The body turning `current` into `next`; `None` when there is
    /// nothing to send.
    pub(crate) fn build(
        self,
        writing: &Writing<'_>,
        current: &Value,
        mut next: Value,
    ) -> Result<Option<Body>, Error> {
        let key = writing.key;
        let version = || {
            meta(current, "resourceVersion").ok_or_else(|| Error::MissingField {
                object: key.clone(),
                field: "metadata.resourceVersion",
            })
        };
        Ok(match self {
            Request::Merge => match merge_diff(current, &next, writing.holds) {
                None => None,
                // A merge patch would replace the list whole, entries this
                // write did not change (and fields a typed copy lacks)
                // included, or delete a key the mutation set to `null`:
                // send exactly the changed entries instead, each tested,
                // so a concurrent change to them is refused rather than
                // overwritten.
                Some(patch) if needs_json_patch(&patch, current, &next) => {
                    Some(Body::Json(Value::Array(json_patch(
                        &diff_holding(current, &next, writing.holds),
                        Some(current),
                    ))))
                }
                Some(patch) => Some(Body::Merge(patch)),
            },
            // On the status subresource the uid is `test`ed instead.
            Request::MergeWithUid if writing.status => match meta(current, "uid") {
                Some(uid) if merge_diff(current, &next, writing.holds).is_some() => {
                    let mut ops =
                        vec![json!({"op": "test", "path": "/metadata/uid", "value": uid})];
                    ops.extend(json_patch(
                        &diff_holding(current, &next, writing.holds),
                        None,
                    ));
                    Some(Body::Json(Value::Array(ops)))
                }
                _ => merge_diff(current, &next, writing.holds).map(Body::Merge),
            },
            Request::MergeWithUid => match merge_diff(current, &next, writing.holds) {
                None => None,
                // A `null` the mutation set: the same write as a JSON
                // patch, the uid `test`ed, and each value it changes too:
                // an index from the fresh read must not reach another
                // entry should another process change the list meanwhile.
                Some(_) if sets_null(current, &next) => {
                    let mut ops = Vec::new();
                    if let Some(uid) = meta(current, "uid") {
                        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
                    }
                    ops.extend(json_patch(
                        &diff_holding(current, &next, writing.holds),
                        Some(current),
                    ));
                    Some(Body::Json(Value::Array(ops)))
                }
                Some(mut patch) => {
                    if let Some(uid) = meta(current, "uid") {
                        set_metadata(&mut patch, "uid", uid);
                    }
                    Some(Body::Merge(patch))
                }
            },
            Request::MergeWithVersion => match merge_diff(current, &next, writing.holds) {
                None => None,
                Some(patch) if needs_json_patch(&patch, current, &next) => {
                    // The same precondition in JSON-patch form: the
                    // patched object carries the observed version, so
                    // the server answers 409 if the object moved on.
                    let mut ops = Vec::new();
                    if let Some(uid) = meta(current, "uid") {
                        ops.push(json!({"op": "test", "path": "/metadata/uid", "value": uid}));
                    }
                    ops.push(json!({"op": "replace", "path": "/metadata/resourceVersion", "value": version()?}));
                    ops.extend(json_patch(
                        &diff_holding(current, &next, writing.holds),
                        None,
                    ));
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
            Request::Guarded => match guarded(
                current,
                &next,
                writing.strategic,
                writing.depends,
                writing.holds,
            ) {
                None => None,
                Some(GuardedBody::Strategic(patch)) => Some(Body::Strategic(patch)),
                Some(GuardedBody::Json(ops)) => Some(Body::Json(ops)),
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
    /// Whether the body sets a list of objects whole (a merge patch's
    /// list, a JSON patch's `add` or `replace` of a list): each entry goes
    /// as the copy held it, fields it lacks included.
    pub(crate) fn sets_a_list_whole(&self) -> bool {
        match self {
            Body::Merge(patch) => replaces_object_list(patch),
            Body::Json(ops) => ops.as_array().is_some_and(|ops| {
                ops.iter().any(|op| {
                    matches!(op["op"].as_str(), Some("add" | "replace"))
                        && !op["path"].as_str().is_some_and(|p| p.ends_with("/-"))
                        && replaces_object_list(&op["value"])
                })
            }),
            Body::Strategic(_)
            | Body::Put(_)
            | Body::Apply { .. }
            | Body::Create(_)
            | Body::Delete { .. } => false,
        }
    }

    /// Whether the server would refuse this body for its number of JSON
    /// patch operations.
    pub(crate) fn exceeds_operation_limit(&self) -> bool {
        matches!(self, Body::Json(Value::Array(ops)) if ops.len() > MAX_JSON_PATCH_OPERATIONS)
    }

    /// Whether a `422` to this body may mean a `test` tripped (retry on a
    /// fresh read) rather than a rejected body: every JSON patch concord
    /// sends is guarded.
    pub(crate) fn invalid_means_conflict(&self) -> bool {
        matches!(self, Body::Json(_))
    }
}

/// Whether the write from `current` to `next` must go as a JSON patch
/// rather than as the merge patch `patch`: the merge patch would replace a
/// list of objects whole, or could not carry a `null` the mutation set.
fn needs_json_patch(patch: &Value, current: &Value, next: &Value) -> bool {
    replaces_object_list(patch) || sets_null(current, next)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(finalizers: &[&str]) -> Value {
        json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7", "finalizers": finalizers}})
    }

    fn key() -> ObjectKey {
        ObjectKey::new("pods", Some("ns"), "p")
    }

    fn writing(key: &ObjectKey) -> Writing<'_> {
        Writing {
            holds: Holds::Whole,
            key,
            strategic: false,
            depends: &[],
            status: false,
        }
    }

    #[test]
    fn strict_sends_changed_list_entries_not_the_list() {
        let mut current = pod(&[]);
        current["status"] = json!({"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]});
        let mut next = current.clone();
        next["status"]["conditions"][0]["status"] = json!("True");
        let body = Request::MergeWithVersion
            .build(&writing(&key()), &current, next)
            .unwrap();
        assert_eq!(
            body,
            Some(Body::Json(json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/status/conditions/0/status", "value": "True"},
            ])))
        );
    }

    #[test]
    fn a_null_the_mutation_sets_goes_as_a_json_patch() {
        let mut current = pod(&[]);
        current["spec"] = json!({"note": "x", "size": 1});
        let mut next = current.clone();
        next["spec"]["note"] = Value::Null;
        next["spec"]["hint"] = Value::Null;
        let body = Request::MergeWithVersion
            .build(&writing(&key()), &current, next.clone())
            .unwrap();
        assert_eq!(
            body,
            Some(Body::Json(json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": "7"},
                {"op": "add", "path": "/spec/note", "value": null},
                {"op": "test", "path": "/spec/hint", "value": null},
                {"op": "add", "path": "/spec/hint", "value": null},
            ])))
        );
        let body = Request::MergeWithUid
            .build(&writing(&key()), &current, next)
            .unwrap();
        let Some(Body::Json(ops)) = body else {
            panic!("{body:?}")
        };
        assert_eq!(
            ops[0],
            json!({"op": "test", "path": "/metadata/uid", "value": "u1"})
        );
        assert_eq!(
            ops.as_array().unwrap()[1..3],
            [
                json!({"op": "test", "path": "/spec/note", "value": "x"}),
                json!({"op": "replace", "path": "/spec/note", "value": null}),
            ]
        );
    }

    #[test]
    fn put_resets_version_and_uid_a_mutation_removed() {
        let current = pod(&[]);
        let mut next = current.clone();
        next["metadata"]
            .as_object_mut()
            .unwrap()
            .retain(|k, _| k == "name");
        let body = Request::Put
            .build(&writing(&key()), &current, next)
            .unwrap();
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
            .build(&writing(&key()), &current, next)
            .unwrap();
        assert_eq!(
            body,
            Some(Body::Merge(json!({"metadata": {
                "finalizers": [], "resourceVersion": "7", "uid": "u1"
            }})))
        );
    }
}
