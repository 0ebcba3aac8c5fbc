//! The controller's view of the pods: a reflector fed by a watch, as every
//! kube-runtime controller keeps one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;

/// A watch-fed cache of the pods of one namespace. The controller writes
/// from what it finds here, never from a fresh GET, so a change another
/// writer made a moment ago may not be in it yet: the window `lax` loses
/// writes in.
///
/// `managedFields` are dropped on the way in, as controller-runtime's
/// default transform does, to keep 10,000 pods well inside the memory
/// budget.
pub(crate) struct Cache {
    store: Store<DynamicObject>,
    resource: ApiResource,
    namespace: String,
    task: JoinHandle<()>,
}

impl Cache {
    /// Start watching the pods of `namespace`.
    pub(crate) fn start(client: Client, namespace: &str) -> Self {
        let resource = ApiResource::erase::<Pod>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &resource);
        let writer = reflector::store::Writer::<DynamicObject>::new(resource.clone());
        let store = writer.as_reader();
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|obj: &mut DynamicObject| obj.metadata.managed_fields = None)
            .reflect(writer)
            .for_each(|_| async {});
        Cache {
            store,
            resource,
            namespace: namespace.to_owned(),
            task: tokio::spawn(stream),
        }
    }

    /// The object called `name` as last observed.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<DynamicObject>> {
        let key = ObjectRef::new_with(name, self.resource.clone()).within(&self.namespace);
        self.store.get(&key)
    }

    /// Wait until `count` objects are cached, at most `timeout`.
    ///
    /// # Errors
    ///
    /// When they are not there in time.
    pub(crate) async fn wait_for(&self, count: usize, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.store.len() >= count {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!(
            "the pod cache of {} holds {} of {count} pods after {timeout:?}",
            self.namespace,
            self.store.len()
        )
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.task.abort();
    }
}
