//! The controller's view of the pods: a cache fed by a watch, as every
//! kube-runtime controller keeps one.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use concord::strategies::{FreshCopies, Observed, is_newer};
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::scenarios::index;

/// A watch-fed cache of the benchmark pods of one namespace. The controller
/// writes from what it finds here, never from a fresh GET, so a change
/// another writer made a moment ago may not be in it yet: the window `lax`
/// loses writes in.
///
/// # Caveats
///
/// Objects are kept as compact JSON (without `managedFields`, as
/// controller-runtime's default transform drops them) and decoded on every
/// read: a `DynamicObject` holds a pod in roughly 10 KiB of small maps,
/// which at 10,000 pods alone would take most of the 128 MiB budget. Every
/// contender pays the same decode.
pub(crate) struct Cache {
    slots: Arc<Slots>,
    /// Woken on every event stored, for re-reads waiting on the watch.
    changed: Arc<Notify>,
    namespace: String,
    task: JoinHandle<()>,
}

/// One slot per object number: its JSON as last observed, if any.
type Slots = RwLock<Vec<Option<Arc<[u8]>>>>;

impl Cache {
    /// Start watching the pods of `namespace`, numbered `0..objects`.
    pub(crate) fn start(client: Client, namespace: &str, objects: usize) -> Self {
        let resource = ApiResource::erase::<Pod>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &resource);
        let slots = Arc::new(RwLock::new(vec![None; objects]));
        let changed = Arc::new(Notify::new());
        let (feed, wake) = (slots.clone(), changed.clone());
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .for_each(move |event| {
                match event {
                    Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                        store(&feed, obj, true);
                        wake.notify_waiters();
                    }
                    Ok(watcher::Event::Delete(obj)) => {
                        store(&feed, obj, false);
                        wake.notify_waiters();
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                    Err(err) => tracing::warn!(error = %err, "pod watch failed; retrying"),
                }
                futures::future::ready(())
            });
        Cache {
            slots,
            changed,
            namespace: namespace.to_owned(),
            task: tokio::spawn(stream),
        }
    }

    /// Object number `object` as last observed.
    pub(crate) fn get(&self, object: u32) -> Option<DynamicObject> {
        let bytes = {
            let slots = self.slots.read().ok()?;
            slots.get(object as usize)?.clone()?
        };
        serde_json::from_slice(&bytes).ok()
    }

    /// Objects cached.
    fn len(&self) -> usize {
        self.slots
            .read()
            .map(|s| s.iter().filter(|o| o.is_some()).count())
            .unwrap_or(0)
    }

    /// Wait until `count` objects are cached, at most `timeout`.
    ///
    /// # Errors
    ///
    /// When they are not there in time.
    pub(crate) async fn wait_for(&self, count: usize, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.len() >= count {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!(
            "the pod cache of {} holds {} of {count} pods after {timeout:?}",
            self.namespace,
            self.len()
        )
    }
}

/// Keep `obj` (or forget it) in its slot.
fn store(slots: &Slots, mut obj: DynamicObject, present: bool) {
    let Some(i) = obj.metadata.name.as_deref().and_then(index) else {
        return;
    };
    obj.metadata.managed_fields = None;
    let value = if present {
        match serde_json::to_vec(&obj) {
            Ok(bytes) => Some(Arc::from(bytes)),
            Err(_) => return,
        }
    } else {
        None
    };
    if let Ok(mut slots) = slots.write()
        && let Some(slot) = slots.get_mut(i as usize)
    {
        *slot = value;
    }
}

/// The cache as the strategies' re-read source after a conflict, as a
/// controller-runtime client reads its informer cache: a copy newer than
/// the one that conflicted, waiting for the watch at most `wait`.
impl FreshCopies for Cache {
    fn newer<'a>(
        &'a self,
        _namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>> {
        Box::pin(async move {
            let object = index(name)?;
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                // Register before looking, so an event stored in between
                // still wakes this wait.
                let changed = self.changed.notified();
                if let Some(copy) = self.get(object) {
                    let version = copy
                        .metadata
                        .resource_version
                        .as_deref()
                        .unwrap_or_default();
                    if is_newer(version, than) == Some(true) {
                        return Some(Observed::complete(serde_json::to_value(copy).ok()?));
                    }
                }
                if tokio::time::timeout_at(deadline, changed).await.is_err() {
                    return None;
                }
            }
        })
    }
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.task.abort();
    }
}
