use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tokio::sync::watch;

use crate::cache::SharedCache;
use crate::metrics::ReconcileCounters;
use crate::sharding::hooks::{self as shard, Admission};
use crate::task::Task;
use crate::{Context, Object, Reconciler};

/// Per-object exponential requeue backoff after failures, as
/// controller-runtime's default rate limiter: 5 ms doubling to 1,000 s.
///
/// An object deleted while it was failing is never reconciled again, so
/// nothing would remove its entry: once the map has doubled since it was
/// last swept, entries of objects the controller's store no longer holds
/// are dropped (amortised, so the map stays within twice the failing
/// objects that still exist).
#[derive(Debug)]
pub(crate) struct Backoff<K: Object> {
    failures: Mutex<Failures<K>>,
    /// The store the controller reconciles from, set when it starts.
    store: OnceLock<Store<K>>,
}

#[derive(Debug)]
struct Failures<K: Object> {
    counts: HashMap<ObjectRef<K>, u32>,
    /// The map's size after the last sweep.
    swept: usize,
}

impl<K: Object> Default for Backoff<K> {
    fn default() -> Self {
        Backoff {
            failures: Mutex::new(Failures {
                counts: HashMap::new(),
                swept: 0,
            }),
            store: OnceLock::new(),
        }
    }
}

impl<K: Object> Backoff<K> {
    const BASE: Duration = Duration::from_millis(5);
    const MAX: Duration = Duration::from_secs(1000);
    /// No sweep below this many entries.
    const SWEEP_FROM: usize = 64;

    fn lock(&self) -> std::sync::MutexGuard<'_, Failures<K>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sweeps against `store` from now on.
    pub(crate) fn watch_store(&self, store: Store<K>) {
        let _ = self.store.set(store);
    }

    pub(crate) fn failed(&self, key: ObjectRef<K>) -> Duration {
        let mut failures = self.lock();
        let n = failures.counts.entry(key).or_insert(0);
        let delay = Self::BASE
            .saturating_mul(1u32 << (*n).min(20))
            .min(Self::MAX);
        *n += 1;
        let len = failures.counts.len();
        if let Some(store) = self.store.get()
            && len >= Self::SWEEP_FROM
            && len >= 2 * failures.swept
        {
            failures.counts.retain(|key, _| store.get(key).is_some());
            failures.swept = failures.counts.len();
        }
        delay
    }

    pub(crate) fn succeeded(&self, key: &ObjectRef<K>) {
        self.lock().counts.remove(key);
    }

    /// How many objects have a failure count.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().counts.len()
    }
}

pub(crate) struct Shared<K: Object, R> {
    pub(crate) reconciler: R,
    pub(crate) context: Context<K>,
    pub(crate) counters: Arc<ReconcileCounters>,
    pub(crate) backoff: Backoff<K>,
    pub(crate) name: String,
    /// The sharding gate, when the manager is sharded.
    pub(crate) shard: Option<Arc<crate::sharding::hooks::Gate>>,
}

fn key_of<K: Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

async fn reconcile<K, R>(object: Arc<K>, shared: Arc<Shared<K, R>>) -> Result<Action, R::Error>
where
    K: Object,
    R: Reconciler<K>,
{
    let key = key_of(object.as_ref());
    let object_ref = ObjectRef::from_obj(object.as_ref());
    let admission = shard::admit(shared.shard.as_ref(), &key);
    if let Admission::Refused = admission {
        return Ok(Action::await_change());
    }
    let start = Instant::now();
    shared.counters.in_flight.fetch_add(1, Relaxed);
    let work = shared.reconciler.reconcile(object, &shared.context);
    let Some(result) = shard::fenced(shared.shard.as_ref(), work).await else {
        shared.counters.in_flight.fetch_sub(1, Relaxed);
        tracing::warn!(controller = %shared.name, object = %key, "reconcile cancelled: the shard membership lease was not renewed in time");
        return Ok(Action::await_change());
    };
    drop(admission);
    shared.counters.in_flight.fetch_sub(1, Relaxed);
    let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    shared.counters.seconds_micros.fetch_add(micros, Relaxed);
    match &result {
        Ok(_) => {
            shared.counters.ok.fetch_add(1, Relaxed);
            shared.backoff.succeeded(&object_ref);
        }
        Err(error) => {
            shared.counters.errors.fetch_add(1, Relaxed);
            let cause = crate::error::chain(error);
            if crate::error::is_conflict_requeue(error) {
                // The `requeue` conflict policy at work: reconciled again
                // on the fresh object, as configured.
                tracing::debug!(controller = %shared.name, object = %key, error = %cause, "reconcile requeued: the object changed while it was written");
            } else {
                tracing::warn!(controller = %shared.name, object = %key, error = %cause, "reconcile failed");
            }
        }
    }
    result
}

fn error_policy<K, R>(object: Arc<K>, _error: &R::Error, shared: Arc<Shared<K, R>>) -> Action
where
    K: Object,
    R: Reconciler<K>,
{
    Action::requeue(shared.backoff.failed(ObjectRef::from_obj(object.as_ref())))
}

pub(crate) fn pending<K, R, F>(
    cache: Arc<SharedCache<K>>,
    shared: Arc<Shared<K, R>>,
    customize: F,
) -> Task
where
    K: Object,
    R: Reconciler<K>,
    F: FnOnce(Controller<K>) -> Controller<K> + Send + 'static,
{
    // Subscribed now, before the manager starts the shared watch, so the
    // controller sees every object from the first list on.
    let objects = cache.subscribe();
    Box::new(move |mut shutdown: watch::Receiver<bool>| {
        let controller = Controller::for_shared_stream(objects, cache.reader());
        let api = cache.api().clone();
        shared.backoff.watch_store(controller.store());
        let controller = customize(controller);
        let controller = shard::attach(shared.shard.as_ref(), &api, controller);
        let name = shared.name.clone();
        Box::pin(async move {
            let stop = async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
            };
            controller
                .graceful_shutdown_on(stop)
                .run(reconcile::<K, R>, error_policy::<K, R>, shared)
                .for_each(|result| {
                    if let Err(error) = result {
                        let error = crate::error::chain(&error);
                        tracing::debug!(controller = %name, %error, "controller event");
                    }
                    futures::future::ready(())
                })
                .await;
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn key(name: &str) -> ObjectRef<ConfigMap> {
        ObjectRef::new(name).within("default")
    }

    #[test]
    fn backoff_doubles_per_object_and_resets_on_success() {
        let backoff = Backoff::<ConfigMap>::default();
        assert_eq!(backoff.failed(key("a")), Duration::from_millis(5));
        assert_eq!(backoff.failed(key("a")), Duration::from_millis(10));
        assert_eq!(backoff.failed(key("b")), Duration::from_millis(5));
        backoff.succeeded(&key("a"));
        assert_eq!(backoff.failed(key("a")), Duration::from_millis(5));
        for _ in 0..40 {
            backoff.failed(key("c"));
        }
        assert_eq!(backoff.failed(key("c")), Duration::from_secs(1000));
    }

    #[test]
    fn backoff_forgets_objects_its_store_no_longer_holds() {
        let (store, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let backoff = Backoff::<ConfigMap>::default();
        backoff.watch_store(store);
        let mut kept = ConfigMap::default();
        kept.metadata.name = Some("kept".into());
        kept.metadata.namespace = Some("default".into());
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(kept));
        backoff.failed(key("kept"));
        backoff.failed(key("kept"));
        // Failing objects deleted meanwhile: the store never held them.
        for i in 0..1000 {
            backoff.failed(key(&format!("gone-{i}")));
            assert!(
                backoff.len() <= 2 * Backoff::<ConfigMap>::SWEEP_FROM,
                "{}",
                backoff.len()
            );
        }
        assert_eq!(
            backoff.failed(key("kept")),
            Duration::from_millis(20),
            "a live object keeps its count"
        );
    }
}
