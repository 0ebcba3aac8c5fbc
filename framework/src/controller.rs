use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use tokio::sync::watch;

use crate::cache::{Fairness, SharedCache};
use crate::metrics::ReconcileCounters;
use crate::runner::{Released, Runner};
use crate::sharding::hooks::{self as shard, Admission};
use crate::task::Task;
use crate::{Action, Context, Predicate, Reconciler, cache::Store, object::AnyObject};

/// Reconciles one controller runs at once unless its builder's
/// `with_concurrency(n)` says otherwise (0 for no limit). With no limit
/// (kube-runtime's default), an initial list of 10,000 objects starts
/// 10,000 reconciles, and their
/// writes, at once: `kueue-finalizer --serve` over 10,000 Pods peaked at
/// 478 MiB (VmHWM) that way and at 46 MiB with this bound, and held all
/// of them with its finalizer sooner (35 s against 41 s; one run each).
pub const DEFAULT_CONCURRENCY: u16 = 16;

/// Per-object counts of consecutive failures, from which the error policy
/// (by default the controller's [`Backoff`](crate::backoff::Backoff)) chooses each
/// requeue; a success resets an object's count.
///
/// An object deleted while it was failing is never reconciled again, so
/// nothing would remove its entry: once the map has doubled since it was
/// last swept, entries of objects the controller's store no longer holds
/// are dropped (amortised, so the map stays within twice the failing
/// objects that still exist).
#[derive(Debug)]
pub(crate) struct Attempts<K: AnyObject> {
    failures: Mutex<Failures<K>>,
    /// The store the controller reconciles from, set when it starts.
    store: OnceLock<Store<K>>,
}

#[derive(Debug)]
struct Failures<K: AnyObject> {
    counts: HashMap<ObjectRef<K>, u32>,
    /// The map's size after the last sweep.
    swept: usize,
}

impl<K: AnyObject> Default for Attempts<K> {
    fn default() -> Self {
        Attempts {
            failures: Mutex::new(Failures {
                counts: HashMap::new(),
                swept: 0,
            }),
            store: OnceLock::new(),
        }
    }
}

impl<K: AnyObject> Attempts<K> {
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

    /// Counts a failure of `key`: how many in a row it has now failed.
    pub(crate) fn failed(&self, key: ObjectRef<K>) -> u32 {
        let mut failures = self.lock();
        let n = failures.counts.entry(key).or_insert(0);
        *n = n.saturating_add(1);
        let attempts = *n;
        let len = failures.counts.len();
        if let Some(store) = self.store.get()
            && len >= Self::SWEEP_FROM
            && len >= 2 * failures.swept
        {
            failures.counts.retain(|key, _| store.contains(key));
            failures.swept = failures.counts.len();
        }
        attempts
    }

    /// Resets `object`'s count: a key is built only when some object is
    /// failing (a reconcile that succeeds where none fails allocates
    /// nothing here).
    pub(crate) fn succeeded(&self, object: &K, dyntype: &K::DynamicType) {
        let mut failures = self.lock();
        if !failures.counts.is_empty() {
            failures
                .counts
                .remove(&ObjectRef::from_obj_with(object, dyntype.clone()));
        }
    }

    /// How many objects have a failure count.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().counts.len()
    }
}

/// What chooses a failed object's requeue: the object, the error, how many
/// times in a row it has failed (1 the first time).
pub(crate) type Policy<K, E> = Box<dyn Fn(&K, &E, u32) -> Action + Send + Sync>;

pub(crate) struct Shared<K: AnyObject, R: Reconciler<K>> {
    pub(crate) reconciler: R,
    pub(crate) context: Context<K>,
    pub(crate) counters: Arc<ReconcileCounters>,
    pub(crate) attempts: Attempts<K>,
    pub(crate) policy: Policy<K, R::Error>,
    pub(crate) name: String,
    /// This controller's seat at the sharding gate, when the manager is sharded.
    pub(crate) shard: Option<shard::Seat>,
    /// Holds a reconcile back until the caches show the manager's own
    /// writes it depends on; `None` when turned off.
    pub(crate) fresh: Option<FreshGate>,
}

/// What a reconcile waits for before it starts: the manager's own last
/// writes of the object and of the children written while reconciling it,
/// in the caches (`own_writes.rs`).
pub(crate) struct FreshGate {
    pub(crate) own: Arc<crate::own_writes::OwnWrites>,
    pub(crate) caches: Arc<crate::cache::Caches>,
    /// The controller's resource, `plural.group`.
    pub(crate) resource: String,
    /// How long a reconcile waits before it is requeued.
    pub(crate) limit: std::time::Duration,
}

impl FreshGate {
    /// How long a reconcile waits for the caches before it is requeued.
    pub(crate) const LIMIT: std::time::Duration = std::time::Duration::from_secs(2);
    /// When a reconcile that gave up waiting runs again.
    const RETRY: std::time::Duration = std::time::Duration::from_millis(500);
}

/// `namespace/name` of an object, for log lines: written only when a
/// line is (a reconcile that logs nothing builds no string for it).
struct Named<'a, K>(&'a K);

impl<K: Resource> std::fmt::Display for Named<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let meta = self.0.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        match (&meta.name, &meta.generate_name) {
            (Some(name), _) => write!(f, "{namespace}/{name}"),
            (None, Some(prefix)) => write!(f, "{namespace}/{prefix}"),
            (None, None) => write!(f, "{namespace}/"),
        }
    }
}

/// Whether `object` must wait for the caches to show the manager's own
/// writes it depends on before it runs: the wait, counted, or `None`
/// when they show them (or the controller does not wait).
fn hold<K, R>(object: &K, shared: &Shared<K, R>) -> Option<BoxFuture<'static, Released>>
where
    K: AnyObject,
    R: Reconciler<K>,
{
    let gate = shared.fresh.as_ref()?;
    let meta = object.meta();
    let name = meta.name.as_ref().or(meta.generate_name.as_ref());
    let parts = (
        gate.resource.as_str(),
        meta.namespace.as_deref(),
        name.map_or("", String::as_str),
    );
    // Most objects have no write of the manager's pending: asked without
    // building a key.
    if !gate.own.has_pending(&parts) {
        return None;
    }
    let own_key = (gate.resource.clone(), object.namespace(), object.name_any());
    if !gate.own.behind(&own_key, |k| gate.caches.seen(k)) {
        return None;
    }
    let (own, caches, limit) = (gate.own.clone(), gate.caches.clone(), gate.limit);
    let counters = shared.counters.clone();
    let name = shared.name.clone();
    Some(Box::pin(async move {
        // Dropped unfinished when the manager stops (the watches stop with
        // it, so nothing could end the wait): counted `stopped`, and the
        // object does not run; the next start reconciles it from a fresh
        // list.
        let mut stopped = StopCount(Some(counters.clone()), &name, &own_key);
        let waited = own.wait_for(&own_key, limit, |k| caches.seen(k)).await;
        stopped.0 = None;
        drop(stopped);
        match waited {
            Ok(waited) => {
                counters.stale_waits.fetch_add(1, Relaxed);
                counters
                    .stale_micros
                    .fetch_add(micros(waited.unwrap_or_default()), Relaxed);
                Released::Now
            }
            Err(waited) => {
                counters.stale_requeues.fetch_add(1, Relaxed);
                counters.stale_micros.fetch_add(micros(waited), Relaxed);
                tracing::debug!(controller = %name, object = %Keyed(&own_key), "reconcile requeued: the cache does not show this manager's own last write yet");
                Released::After(FreshGate::RETRY)
            }
        }
    }))
}

/// Counts a wait dropped before it ended as `stopped` (unless disarmed).
struct StopCount<'a>(
    Option<Arc<ReconcileCounters>>,
    &'a str,
    &'a crate::own_writes::WriteKey,
);

impl Drop for StopCount<'_> {
    fn drop(&mut self) {
        if let Some(counters) = self.0.take() {
            counters.stale_stopped.fetch_add(1, Relaxed);
            tracing::debug!(controller = %self.1, object = %Keyed(self.2), "reconcile dropped: the manager stopped while it waited for the cache to show its own last write");
        }
    }
}

/// `namespace/name` of a write key, for log lines.
struct Keyed<'a>(&'a crate::own_writes::WriteKey);

impl std::fmt::Display for Keyed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (_, namespace, name) = self.0;
        write!(f, "{}/{name}", namespace.as_deref().unwrap_or_default())
    }
}

/// One reconcile of `object`, with its gates around it.
async fn reconcile<K, R>(object: Arc<K>, shared: Arc<Shared<K, R>>) -> Result<Action, R::Error>
where
    K: AnyObject,
    R: Reconciler<K>,
{
    // Only a sharded controller keys its gate: an unsharded reconcile
    // builds no key for it.
    let gate_key = shared
        .shard
        .as_ref()
        .map(|seat| (seat, shard::key_of(seat, object.as_ref())));
    let gated = gate_key.as_ref().map(|(seat, key)| (*seat, key.as_str()));
    let admission = shard::admit(gated);
    if let Admission::Refused = admission {
        return Ok(Action::await_change());
    }
    let own_key = (
        shared
            .fresh
            .as_ref()
            .map(|g| g.resource.clone())
            .unwrap_or_default(),
        object.namespace(),
        object.name_any(),
    );
    let start = Instant::now();
    shared.counters.in_flight.fetch_add(1, Relaxed);
    // A handle (not a copy) for the log lines and the failure count after.
    let reconciled = object.clone();
    let work = crate::own_writes::as_reconcile_of(
        own_key,
        shared.reconciler.reconcile(object, &shared.context),
    );
    let Some(result) = shard::fenced(shared.shard.as_ref(), work).await else {
        shared.counters.in_flight.fetch_sub(1, Relaxed);
        tracing::warn!(controller = %shared.name, object = %Named(reconciled.as_ref()), "reconcile cancelled: the shard membership lease was not renewed in time");
        return Ok(shard::cancelled(gated));
    };
    drop(admission);
    shared.counters.in_flight.fetch_sub(1, Relaxed);
    let micros = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    shared.counters.seconds_micros.fetch_add(micros, Relaxed);
    match &result {
        Ok(_) => {
            shared.counters.ok.fetch_add(1, Relaxed);
            shared
                .attempts
                .succeeded(reconciled.as_ref(), shared.context.dyntype());
        }
        Err(error) => {
            shared.counters.errors.fetch_add(1, Relaxed);
            let cause = crate::error::chain(error);
            if crate::error::is_conflict_requeue(error) {
                // The `requeue` conflict policy at work: reconciled again
                // on the fresh object, as configured.
                tracing::debug!(controller = %shared.name, object = %Named(reconciled.as_ref()), error = %cause, "reconcile requeued: the object changed while it was written");
            } else {
                tracing::warn!(controller = %shared.name, object = %Named(reconciled.as_ref()), error = %cause, "reconcile failed");
            }
        }
    }
    result
}

fn micros(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX)
}

fn error_policy<K, R>(object: Arc<K>, error: &R::Error, shared: Arc<Shared<K, R>>) -> Action
where
    K: AnyObject,
    R: Reconciler<K>,
{
    let key = ObjectRef::from_obj_with(object.as_ref(), shared.context.dyntype().clone());
    let attempts = shared.attempts.failed(key);
    (shared.policy)(object.as_ref(), error, attempts)
}

/// The objects of a controller's kind that another kind's watch events
/// map to (`ControllerBuilder::watches`).
pub(crate) type Trigger<K> = futures::stream::BoxStream<'static, ObjectRef<K>>;

pub(crate) fn pending<K, R>(
    cache: Arc<SharedCache<K>>,
    shared: Arc<Shared<K, R>>,
    predicate: Option<Predicate<K>>,
    concurrency: u16,
    triggers: Vec<Trigger<K>>,
) -> Task
where
    K: AnyObject,
    R: Reconciler<K>,
{
    // Subscribed now, before the manager starts the shared watch, so the
    // controller sees every object from the first list on. The queue
    // hands out no more objects at once than the concurrency.
    let objects = cache.subscribe(predicate, Fairness::with_slots(usize::from(concurrency)));
    Box::new(move |mut shutdown: watch::Receiver<bool>| {
        let api = cache.api().clone();
        shared.attempts.watch_store(cache.store());
        let sharded = shard::attach(shared.shard.as_ref(), &api, cache.dyntype(), cache.store());
        let triggers: Vec<Trigger<K>> = triggers.into_iter().chain(sharded).collect();
        let triggers =
            (!triggers.is_empty()).then(|| futures::stream::select_all(triggers).boxed());
        let runner = Runner {
            objects,
            triggers,
            hold: {
                let shared = shared.clone();
                move |object: &K| hold(object, &shared)
            },
            reconcile: move |object: Arc<K>| {
                let shared = shared.clone();
                async move {
                    match reconcile::<K, R>(object.clone(), shared.clone()).await {
                        Ok(action) => action,
                        Err(error) => error_policy(object, &error, shared),
                    }
                }
            },
        };
        Box::pin(async move {
            runner
                .run(async move {
                    let _ = shutdown.wait_for(|stop| *stop).await;
                })
                .await;
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::time::Duration;

    fn key(name: &str) -> ObjectRef<ConfigMap> {
        ObjectRef::new(name).within("default")
    }

    #[test]
    fn attempts_count_per_object_and_reset_on_success() {
        let attempts = Attempts::<ConfigMap>::default();
        assert_eq!(attempts.failed(key("a")), 1);
        assert_eq!(attempts.failed(key("a")), 2);
        assert_eq!(attempts.failed(key("b")), 1);
        let mut a = ConfigMap::default();
        a.metadata.name = Some("a".into());
        a.metadata.namespace = Some("default".into());
        attempts.succeeded(&a, &());
        assert_eq!(attempts.failed(key("a")), 1);
        let backoff = crate::backoff::Backoff::default();
        for _ in 0..40 {
            attempts.failed(key("c"));
        }
        assert_eq!(
            backoff.delay(attempts.failed(key("c"))),
            Duration::from_secs(1000)
        );
    }

    #[test]
    fn attempts_forget_objects_their_store_no_longer_holds() {
        let (store, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let attempts = Attempts::<ConfigMap>::default();
        attempts.watch_store(crate::cache::Store::new(
            crate::cache::Objects::Decoded(store),
            tokio::sync::watch::channel(crate::cache::Synced::Yes).1,
            "test".into(),
        ));
        let mut kept = ConfigMap::default();
        kept.metadata.name = Some("kept".into());
        kept.metadata.namespace = Some("default".into());
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(kept));
        attempts.failed(key("kept"));
        attempts.failed(key("kept"));
        // Failing objects deleted meanwhile: the store never held them.
        for i in 0..1000 {
            attempts.failed(key(&format!("gone-{i}")));
            assert!(
                attempts.len() <= 2 * Attempts::<ConfigMap>::SWEEP_FROM,
                "{}",
                attempts.len()
            );
        }
        assert_eq!(
            attempts.failed(key("kept")),
            3,
            "a live object keeps its count"
        );
    }
}
