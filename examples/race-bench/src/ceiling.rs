//! The `ceiling` contender: the API server's own capacity on this machine.
//! The same logical changes as bare strategic-merge PATCHes — no cache
//! read, no precondition, no retry, no bookkeeping beyond a counter.

use concord::strategies::Verb;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value, json};

use crate::failure::Failure;
use crate::scenarios::Change;
use crate::tally::Tally;

/// One PATCH making `change` on the pod called `name`. The server removes
/// the finalizer by value (`$deleteFromPrimitiveList`), so no read is
/// needed; a gone pod counts as done for a removal.
pub(crate) async fn write(
    api: &Api<Pod>,
    params: &PatchParams,
    name: &str,
    change: &Change,
    tally: &Tally,
) -> Result<(), Failure> {
    tally.request(Verb::Patch);
    match api
        .patch(name, params, &Patch::Strategic(patch(change)))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 && change.set_label.is_none() => Ok(()),
        Err(err) => Err(Failure::from_kube(&err)),
    }
}

// ANCHOR: ceiling_patch
/// The strategic merge patch for `change`.
fn patch(change: &Change) -> Value {
    let mut md = Map::new();
    if let Some(finalizer) = change.remove_finalizer {
        md.insert(
            "$deleteFromPrimitiveList/finalizers".into(),
            json!([finalizer]),
        );
    }
    if let Some((key, value)) = &change.set_label {
        md.insert("labels".into(), json!({ key: value }));
    }
    json!({ "metadata": md })
}
// ANCHOR_END: ceiling_patch

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_removes_by_value_and_sets_the_label() {
        let change = Change {
            remove_finalizer: Some("f"),
            set_label: Some(("k".into(), "v".into())),
        };
        assert_eq!(
            patch(&change),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["f"], "labels": {"k": "v"}}})
        );
    }
}
