//! Creating a round's pods, resetting them between its contenders and
//! stripping their finalizers after it, all untimed.

use futures::{StreamExt, TryStreamExt, stream};
use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::scenarios::{Spec, manifest, name};

/// Requests in flight while creating or stripping pods.
const CONCURRENCY: usize = 32;

/// Create the pods of `specs`.
///
/// # Errors
///
/// When a pod cannot be created.
pub(crate) async fn create(
    api: &Api<Pod>,
    specs: &[Spec],
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    stream::iter(specs.iter().enumerate())
        .map(|(i, spec)| async move {
            let index = u32::try_from(i)?;
            let pod: Pod = serde_json::from_value(manifest(index, spec))?;
            api.create(&PostParams::default(), &pod).await?;
            bar.inc(1);
            anyhow::Ok(())
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Put every pod of `specs` back in the state it was created in: its
/// finalizers, and its labels with any label a write set removed. One merge
/// patch per pod, instead of deleting the pods and creating them again for
/// the next contender (three requests, and a namespace to wait for).
///
/// # Errors
///
/// When a pod cannot be patched, gone included: nothing else deletes them.
pub(crate) async fn reset(api: &Api<Pod>, specs: &[Spec], bar: &ProgressBar) -> anyhow::Result<()> {
    let params = PatchParams::default();
    stream::iter(specs.iter().enumerate())
        .map(|(i, spec)| {
            let params = &params;
            async move {
                let index = u32::try_from(i)?;
                api.patch(&name(index), params, &Patch::Merge(reset_patch(spec)))
                    .await?;
                bar.inc(1);
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// The merge patch that takes a pod of `spec` back to its creation state.
fn reset_patch(spec: &Spec) -> Value {
    let mut labels = serde_json::Map::new();
    for (key, _) in &spec.final_labels {
        labels.insert(key.clone(), Value::Null);
    }
    for (key, value) in &spec.labels {
        labels.insert((*key).to_owned(), json!(value));
    }
    json!({"metadata": {"finalizers": spec.finalizers, "labels": labels}})
}

/// Remove every finalizer from the pods called `names`, so that deleting
/// them is immediate.
///
/// # Errors
///
/// When a patch fails for a reason other than the pod being gone.
pub(crate) async fn strip_finalizers(api: &Api<Pod>, names: &[String]) -> anyhow::Result<()> {
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let params = PatchParams::default();
    stream::iter(names)
        .map(|name| {
            let (patch, params) = (&patch, &params);
            async move {
                match api.patch(name, params, patch).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(err) => Err(anyhow::Error::from(err)),
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_restores_creation_finalizers_and_drops_labels_the_writes_set() {
        let spec = Spec {
            finalizers: vec!["a", "b"],
            labels: vec![("kept", "1")],
            final_finalizers: vec!["b"],
            final_labels: vec![("set".into(), "true".into())],
        };
        assert_eq!(
            reset_patch(&spec),
            json!({"metadata": {
                "finalizers": ["a", "b"],
                "labels": {"kept": "1", "set": null},
            }})
        );
    }
}
