//! Creating a contender's pods before its run and stripping their
//! finalizers after it, both untimed.

use futures::{StreamExt, TryStreamExt, stream};
use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::scenarios::{Spec, manifest};

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
