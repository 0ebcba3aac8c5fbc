//! The `raw` contender: `strict`'s requests written with bare kube-rs calls
//! and no concord type, to price the framework's own overhead.

use std::time::Duration;

use concord::strategies::Verb;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{DynamicObject, ObjectMeta};
use serde_json::{Map, Value, json};

use crate::failure::Failure;
use crate::scenarios::Change;
use crate::tally::Tally;

/// Attempts in all, as client-go's `retry.DefaultRetry`.
const STEPS: u32 = 5;
/// The wait before each retry, as client-go's `retry.DefaultRetry`.
const BACKOFF: Duration = Duration::from_millis(10);

/// A merge patch with the observed resourceVersion and uid; on 409, GET and
/// try again, at most [`STEPS`] attempts.
pub(crate) async fn write(
    api: &Api<Pod>,
    params: &PatchParams,
    observed: &DynamicObject,
    change: &Change,
    tally: &Tally,
) -> Result<(), Failure> {
    let name = observed.metadata.name.as_deref().unwrap_or_default();
    let mut fresh: Option<Pod> = None;
    for attempt in 1..=STEPS {
        let meta = fresh.as_ref().map_or(&observed.metadata, |p| &p.metadata);
        let Some(patch) = merge_patch(meta, change) else {
            return Ok(());
        };
        tally.request(Verb::Patch);
        match api.patch(name, params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => tally.conflict(),
            Err(kube::Error::Api(s)) if s.code == 404 && change.set_label.is_none() => {
                return Ok(());
            }
            Err(err) => return Err(Failure::from_kube(&err)),
        }
        if attempt == STEPS {
            break;
        }
        tally.retry();
        tokio::time::sleep(BACKOFF).await;
        tally.request(Verb::Get);
        match api.get(name).await {
            Ok(pod) => fresh = Some(pod),
            Err(err) => return Err(Failure::from_kube(&err)),
        }
    }
    Err(Failure { retryable: true })
}

// ANCHOR: raw_patch
/// The merge patch that makes `change` on an object whose metadata is
/// `meta`, locked to that version; `None` if nothing needs changing.
fn merge_patch(meta: &ObjectMeta, change: &Change) -> Option<Value> {
    let mut md = Map::new();
    if let Some(finalizer) = change.remove_finalizer {
        let list = meta.finalizers.as_deref().unwrap_or_default();
        if list.iter().any(|f| f == finalizer) {
            let rest: Vec<&String> = list.iter().filter(|f| *f != finalizer).collect();
            let rest = if rest.is_empty() {
                Value::Null
            } else {
                json!(rest)
            };
            md.insert("finalizers".into(), rest);
        }
    }
    if let Some((key, value)) = &change.set_label
        && meta.labels.as_ref().and_then(|l| l.get(key)) != Some(value)
    {
        md.insert("labels".into(), json!({ key: value }));
    }
    if md.is_empty() {
        return None;
    }
    md.insert("resourceVersion".into(), json!(meta.resource_version));
    if let Some(uid) = &meta.uid {
        md.insert("uid".into(), json!(uid));
    }
    Some(json!({ "metadata": md }))
}
// ANCHOR_END: raw_patch

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_keeps_other_finalizers_and_locks_the_version() {
        let meta = ObjectMeta {
            finalizers: Some(vec!["a".into(), "b".into()]),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        };
        let change = Change {
            remove_finalizer: Some("a"),
            set_label: None,
        };
        assert_eq!(
            merge_patch(&meta, &change),
            Some(json!({"metadata": {"finalizers": ["b"], "resourceVersion": "7"}}))
        );
    }

    #[test]
    fn nothing_to_change_sends_nothing() {
        let change = Change {
            remove_finalizer: Some("a"),
            set_label: None,
        };
        assert_eq!(merge_patch(&ObjectMeta::default(), &change), None);
    }
}
