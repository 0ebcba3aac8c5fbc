//! The `json-index` contender: Argo Workflows' original code, kept as the
//! baseline that reproduces its failures.

use concord::strategies::Verb;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{DynamicObject, ObjectMeta};
use serde_json::{Value, json};

use crate::failure::Failure;
use crate::scenarios::Change;
use crate::tally::Tally;

/// A JSON patch `remove /metadata/finalizers/<i>` (plus the label), `i`
/// taken from the observed object: no lock, no precondition, no retry. A
/// `422` is final, as it was for Argo ("non-transient error").
pub(crate) async fn write(
    api: &Api<Pod>,
    params: &PatchParams,
    observed: &DynamicObject,
    change: &Change,
    tally: &Tally,
) -> Result<(), Failure> {
    let ops = ops(&observed.metadata, change);
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(|_| Failure { retryable: false })?;
    let name = observed.metadata.name.as_deref().unwrap_or_default();
    tally.request(Verb::Patch);
    match api.patch(name, params, &Patch::Json::<()>(patch)).await {
        Ok(_) => Ok(()),
        Err(err) => Err(Failure::from_kube(&err)),
    }
}

/// The operations Argo computed from the object it had read.
fn ops(meta: &ObjectMeta, change: &Change) -> Vec<Value> {
    let mut ops = Vec::with_capacity(2);
    if let Some(finalizer) = change.remove_finalizer {
        let list = meta.finalizers.as_deref().unwrap_or_default();
        if let Some(i) = list.iter().position(|f| f == finalizer) {
            ops.push(json!({"op": "remove", "path": format!("/metadata/finalizers/{i}")}));
        }
    }
    if let Some((key, value)) = &change.set_label {
        let current = meta.labels.as_ref().and_then(|l| l.get(key));
        if current != Some(value) {
            let op = if current.is_some() { "replace" } else { "add" };
            let path = format!(
                "/metadata/labels/{}",
                key.replace('~', "~0").replace('/', "~1")
            );
            ops.push(json!({"op": op, "path": path, "value": value}));
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_use_the_observed_index_and_replace_the_label() {
        let meta = ObjectMeta {
            finalizers: Some(vec!["x".into(), "argo".into()]),
            labels: Some([("a/done".to_owned(), "false".to_owned())].into()),
            ..ObjectMeta::default()
        };
        let change = Change {
            remove_finalizer: Some("argo"),
            set_label: Some(("a/done".into(), "true".into())),
        };
        assert_eq!(
            ops(&meta, &change),
            [
                json!({"op": "remove", "path": "/metadata/finalizers/1"}),
                json!({"op": "replace", "path": "/metadata/labels/a~1done", "value": "true"}),
            ]
        );
    }
}
