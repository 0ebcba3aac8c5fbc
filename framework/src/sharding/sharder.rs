//! `label` mode's sharder: on the replica holding the sharder Lease, a
//! metadata-only watch of every object labels each with its owner's member
//! id, at creation and whenever the ring changes, so each replica's own
//! watch (a label selector) caches only its shard.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
#[allow(deprecated)]
// its replacement needs the scope of `K` statically; `api` may be namespaced or not
use kube::runtime::metadata_watcher;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::gate::ShardGate;
use crate::Object;

/// A sharder for one resource type, started when this replica becomes the sharder.
pub(crate) type Labeller = Box<dyn FnOnce(Arc<ShardGate>) -> BoxFuture<'static, ()> + Send>;

/// The sharder for the objects `api` lists, labelling with `label`.
pub(crate) fn labeller<K: Object>(api: Api<K>, label: String) -> Labeller {
    Box::new(move |gate: Arc<ShardGate>| {
        Box::pin(async move {
            let client: Client = api.clone().into_client();
            let (store, writer) = reflector::store::<PartialObjectMeta<K>>();
            // The sharder needs names, uids and labels only: dropping the
            // annotations and managed fields before they are cached keeps
            // its extra memory to a small fraction of a full cache.
            #[allow(deprecated)]
            let watch = metadata_watcher(api, watcher::Config::default()).modify(
                |object: &mut PartialObjectMeta<K>| {
                    object.metadata.annotations = None;
                    object.metadata.managed_fields = None;
                },
            );
            let events = reflector::reflector(writer, watch)
                .default_backoff()
                .applied_objects();
            let mut events = std::pin::pin!(events);
            let mut wakes = std::pin::pin!(gate.wakes());
            loop {
                tokio::select! {
                    event = events.try_next() => match event {
                        Ok(Some(object)) => label_one(&client, &gate, &label, &object).await,
                        Ok(None) => return,
                        Err(error) => tracing::warn!(%error, "the sharder's watch failed"),
                    },
                    wake = wakes.next() => {
                        if wake.is_none() {
                            return;
                        }
                        relabel_all(&client, &gate, &label, &store).await;
                    }
                }
            }
        })
    })
}

async fn relabel_all<K: Object>(
    client: &Client,
    gate: &ShardGate,
    label: &str,
    store: &Store<PartialObjectMeta<K>>,
) {
    for object in store.state() {
        label_one(client, gate, label, &object).await;
    }
}

/// Sets `label` on `object` to its owner in the observed view, if it differs.
async fn label_one<K: Object>(
    client: &Client,
    gate: &ShardGate,
    label: &str,
    object: &PartialObjectMeta<K>,
) {
    let namespace = object.namespace();
    let key = format!(
        "{}/{}",
        namespace.clone().unwrap_or_default(),
        object.name_any()
    );
    let view = gate.target();
    let Some(owner) = view.owner(&key) else {
        return;
    };
    if object.labels().get(label).map(String::as_str) == Some(owner) {
        return;
    }
    let resource = ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    // A map key alone in a merge patch: concurrent writers' other labels
    // and finalizers are untouched; the uid keeps it off a recreated object.
    let patch = json!({"metadata": {"uid": object.uid(), "labels": {label: owner}}});
    match api
        .patch(
            &object.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => gate
            .stats
            .relabels
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        Err(error) => {
            tracing::debug!(%error, object = %key, "labelling an object with its shard failed");
            0
        }
    };
}
