//! One shared watch cache (a kube-runtime reflector store) per resource
//! type, scope and watch configuration: every controller of that type reads
//! it, [`Context::cached`](crate::Context::cached) reads it, and a write's
//! re-read after a conflict is served from it when it has caught up.
//!
//! The manager opens one watch per cache and namespace, not per
//! controller: controllers added for the same `Api<K>` scope (or namespace
//! set: one watch per namespace, one store), label and field selectors (the
//! sharding gate's label selector included) and trim subscribe to the same
//! stream.
//!
//! The first list comes as a streaming list (`sendInitialEvents`) where
//! the API server serves one, and in pages of 500 otherwise
//! (`streaming.rs`).
//!
//! Objects are stored trimmed ([`CacheTrim`], `trim.rs`), typed or as
//! compact JSON ([`CacheLayout`], `compact.rs`), and each
//! subscriber takes them from a queue that holds each object once and
//! only what the subscriber's predicate passes, judged against the copy
//! the store held before (`queue.rs`). The cache knows nothing of controllers: it hands out
//! queues and the task that drives the watch.

mod compact;
mod copies;
mod projection;
mod queue;
mod registry;
mod selection;
mod sizes;
mod store;
mod streaming;
mod trim;

pub use compact::CacheLayout;
pub(crate) use copies::CachedCopies;
pub(crate) use queue::{Announced, Fairness, Slots};
pub(crate) use registry::Caches;
pub(crate) use selection::Selection;
pub(crate) use sizes::CacheSizes;
pub(crate) use store::{Objects, Synced};
pub use store::{Store, StoreStopped};
pub use trim::{CacheTrim, LAST_APPLIED};

use std::collections::HashSet;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use concord_strategies::is_newer;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, watch as signal};

use self::compact::{CompactObjects, CompactWriter, Hot, Key};
use self::queue::{Announcer, Lane, Lazy, queue_with};
use crate::task::Task;
use crate::{AnyObject, Predicate};

/// The shared cache of one resource type, scope and watch configuration.
///
/// The watch feeds the store (each object trimmed first) and announces each
/// applied object to every subscriber's queue, as the object itself: a
/// controller never looks an announced object up in the store (where a
/// deletion in between would swallow the announcement), and a slow
/// controller never holds the watch back — nor makes the queue grow past
/// one entry per object.
pub(crate) struct SharedCache<K: AnyObject> {
    /// The dynamic type of `K` (`()` for a static type).
    dyntype: K::DynamicType,
    /// The first of `apis`.
    api: Api<K>,
    /// One per namespace watched (one for all namespaces or one).
    apis: Vec<Api<K>>,
    selection: Selection,
    trim: CacheTrim,
    objects: Objects<K>,
    /// Taken by the task that drives the watch when the manager runs.
    writer: Mutex<Option<Writer<K>>>,
    /// A compact cache's controllers' stores of the objects they are
    /// reconciling, kept fresh by the watch.
    hot: Mutex<Vec<Weak<Hot<K>>>>,
    /// One queue per subscriber.
    subscribers: Mutex<Vec<Announcer<K>>>,
    /// Woken after every watch event the store applied.
    changed: Arc<Notify>,
    /// Set once the store holds the first complete list.
    synced: Arc<AtomicBool>,
    /// The same, for the waiters of [`Store::wait_until_ready`]; also says
    /// when the watch stopped before.
    sync: tokio::sync::watch::Sender<Synced>,
}

impl<K: AnyObject> SharedCache<K> {
    fn new(
        api: Api<K>,
        apis: Vec<Api<K>>,
        selection: Selection,
        trim: CacheTrim,
        layout: CacheLayout,
        dyntype: K::DynamicType,
    ) -> Self {
        let (objects, writer) = match layout {
            CacheLayout::Decoded => {
                let writer = reflector::store::Writer::<K>::new(dyntype.clone());
                (
                    Objects::Decoded(writer.as_reader()),
                    Writer::Decoded(writer),
                )
            }
            CacheLayout::Compact => {
                let objects = CompactObjects::new();
                let writer = CompactWriter::new(objects.clone());
                (Objects::Compact(objects), Writer::Compact(writer))
            }
        };
        SharedCache {
            dyntype,
            api,
            apis,
            selection,
            trim,
            objects,
            writer: Mutex::new(Some(writer)),
            hot: Mutex::new(Vec::new()),
            subscribers: Mutex::new(Vec::new()),
            changed: Arc::new(Notify::new()),
            synced: Arc::default(),
            sync: tokio::sync::watch::Sender::new(Synced::Listing),
        }
    }

    /// Marks the store synced: readiness checks and waiters.
    fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
        self.sync.send_replace(Synced::Yes);
    }

    /// The store as reconcilers read it.
    pub(crate) fn store(&self) -> Store<K> {
        Store::new(
            self.objects.clone(),
            self.sync.subscribe(),
            self.check_name(),
        )
    }

    /// Turns on once the store holds the first complete list (and stays
    /// on through later re-lists, as an informer's `HasSynced` does).
    pub(crate) fn synced(&self) -> Arc<AtomicBool> {
        self.synced.clone()
    }

    /// The readiness check's name: `cache:` and the resource
    /// (`configmaps`, `deployments.apps`), with `/namespace` for a
    /// namespaced watch.
    pub(crate) fn check_name(&self) -> String {
        let resource = ApiResource::erase::<K>(&self.dyntype);
        let mut name = format!("cache:{}", resource.plural);
        if !resource.group.is_empty() {
            name = format!("{name}.{}", resource.group);
        }
        if let Some(namespace) = self.api.namespace() {
            name = format!("{name}/{namespace}");
        }
        name
    }

    /// The objects, as the cache holds them.
    pub(crate) fn objects(&self) -> &Objects<K> {
        &self.objects
    }

    /// The dynamic type of the cached objects (`()` for a static type).
    pub(crate) fn dyntype(&self) -> &K::DynamicType {
        &self.dyntype
    }

    /// The key of `object` in the store.
    fn key(&self, object: &K) -> ObjectRef<K> {
        ObjectRef::from_obj_with(object, self.dyntype.clone())
    }

    /// The `Api` the cache lists and watches through.
    pub(crate) fn api(&self) -> &Api<K> {
        &self.api
    }

    /// A stream of the objects the watch applies, for one subscriber
    /// (subscribed before the manager starts the watch, so it sees every
    /// object from the first list on).
    /// Only objects `predicate` passes are queued; `fairness` says how
    /// many are handed out at once and how the lanes share them.
    ///
    /// With the queue comes the store kube-runtime's controller looks
    /// the handed-out objects up in: the cache's own (decoded layout), or
    /// the subscriber's store of the objects it is reconciling (compact).
    pub(crate) fn subscribe(
        &self,
        predicate: Option<Predicate<K>>,
        fairness: Fairness,
    ) -> (Announced<K>, reflector::Store<K>) {
        let (lazy, lookups) = match &self.objects {
            Objects::Decoded(store) => (None, store.clone()),
            Objects::Compact(objects) => {
                let hot = Hot::new(self.dyntype.clone());
                lock(&self.hot).push(Arc::downgrade(&hot));
                let lookups = hot.reader();
                let (loaded, held) = (objects.clone(), objects.clone());
                let evicted = hot.clone();
                let lazy = Lazy {
                    load: Box::new(move |namespace, name| {
                        hot.insert(loaded.decoded(namespace, name)?)
                    }),
                    evict: Box::new(move |namespace, name| evicted.remove(namespace, name)),
                    holds: Box::new(move |namespace, name| held.holds(namespace, name)),
                };
                (Some(lazy), lookups)
            }
        };
        let (announcer, announced) = queue_with(predicate, fairness, lazy);
        lock(&self.subscribers).push(announcer);
        (announced, lookups)
    }

    /// Keeps the copies in the compact cache's controllers' stores as
    /// fresh as the cache: `object` replaced or deleted its copy.
    fn refresh_hot(&self, object: &K, deleted: bool) {
        if matches!(self.objects, Objects::Decoded(_)) {
            return;
        }
        if deleted {
            return self.evict_hot(object.namespace().as_deref(), &object.name_any());
        }
        lock(&self.hot).retain(|hot| {
            let Some(hot) = hot.upgrade() else {
                return false;
            };
            hot.refresh(object);
            true
        });
    }

    /// Takes a deleted object out of the compact cache's controllers'
    /// stores.
    fn evict_hot(&self, namespace: Option<&str>, name: &str) {
        lock(&self.hot).retain(|hot| {
            let Some(hot) = hot.upgrade() else {
                return false;
            };
            hot.remove(namespace, name);
            true
        });
    }

    /// The task driving the shared watch until shutdown.
    fn driver(self: Arc<Self>) -> Task {
        Box::new(move |mut shutdown: signal::Receiver<bool>| {
            Box::pin(async move {
                let writer = lock(&self.writer).take();
                let Some(mut writer) = writer else {
                    return;
                };
                let trim = self.trim;
                let run = async {
                    let mut config = self.selection.resolve();
                    if streaming::serves_streaming_lists(&self.api).await {
                        config = config.streaming_lists();
                    }
                    let streams = self.apis.iter().enumerate().map(|(i, api)| {
                        watcher(api.clone(), config.clone())
                            .default_backoff()
                            .modify(move |object: &mut K| trim.apply(object))
                            .map(move |event| (i, event))
                            .boxed()
                    });
                    let mut events = futures::stream::select_all(streams);
                    let mut relists = Relists::new(self.apis.len());
                    while let Some((i, event)) = events.next().await {
                        match event {
                            Ok(event) => self.apply(&mut writer, &mut relists, i, event),
                            Err(error) => tracing::debug!(%error, "shared watch"),
                        }
                        self.changed.notify_waiters();
                    }
                };
                tokio::select! {
                    () = run => {}
                    _ = shutdown.wait_for(|stop| *stop) => {}
                }
                self.sync.send_if_modified(|sync| {
                    let listing = *sync == Synced::Listing;
                    if listing {
                        *sync = Synced::Stopped;
                    }
                    listing
                });
            })
        })
    }

    /// Applies `event` of the `i`th watch to the store and announces what
    /// it applied. One watch's events go to the store as they come; with
    /// several (one per namespace), a watch's relist must not replace the
    /// others' objects, so its listed objects are applied one by one and,
    /// when its list is complete, the objects of its namespace it no longer
    /// listed are deleted.
    fn apply(
        &self,
        writer: &mut Writer<K>,
        relists: &mut Relists<K>,
        i: usize,
        event: watcher::Event<K>,
    ) {
        if self.apis.len() == 1 {
            let old = match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    self.old(object)
                }
                _ => None,
            };
            writer.apply_watcher_event(&event);
            let first_list = !self.synced.load(Ordering::Acquire);
            match event {
                watcher::Event::Apply(object) => {
                    self.refresh_hot(&object, false);
                    self.announce(old.as_deref(), object, Lane::Changed);
                }
                // The store buffers its own copy until the list is in: the
                // queues take that one then, not a second one now.
                watcher::Event::InitApply(object) if first_list => {
                    lock(&self.subscribers).retain(|s| s.announce_first_listed(&object));
                }
                watcher::Event::InitApply(object) => {
                    self.refresh_hot(&object, false);
                    self.announce(old.as_deref(), object, Lane::Listed);
                }
                watcher::Event::Delete(object) => self.refresh_hot(&object, true),
                // The store holds the list now.
                watcher::Event::InitDone => {
                    if first_list {
                        for subscriber in lock(&self.subscribers).iter() {
                            subscriber.fill(|namespace, name| {
                                self.objects
                                    .get(&object_ref(namespace, name, &self.dyntype))
                            });
                        }
                    }
                    self.mark_synced();
                }
                watcher::Event::Init => {}
            }
            return;
        }
        match event {
            watcher::Event::Init => {
                if let Some(relist) = relists.listing.get_mut(i) {
                    *relist = Some(HashSet::new());
                }
            }
            watcher::Event::InitApply(object) | watcher::Event::Apply(object) => {
                let lane = match relists.listing.get(i) {
                    Some(Some(_)) => Lane::Listed,
                    _ => Lane::Changed,
                };
                let key = self.key(&object);
                if let Some(Some(listed)) = relists.listing.get_mut(i) {
                    listed.insert(key.clone());
                }
                let old = self.old(&object);
                writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
                self.refresh_hot(&object, false);
                self.announce(old.as_deref(), object, lane);
            }
            watcher::Event::Delete(object) => {
                self.refresh_hot(&object, true);
                writer.apply_watcher_event(&watcher::Event::Delete(object));
            }
            watcher::Event::InitDone => {
                let Some(Some(listed)) = relists.listing.get_mut(i).map(Option::take) else {
                    return;
                };
                let namespace = self.apis.get(i).and_then(|api| api.namespace());
                for stale in self.objects.keys().into_iter().filter(|(ns, name)| {
                    ns.as_deref() == namespace
                        && !listed.contains(&object_ref(ns.as_deref(), name, &self.dyntype))
                }) {
                    self.delete(writer, &stale);
                }
                if let Some(listed_once) = relists.listed_once.get_mut(i) {
                    *listed_once = true;
                }
                if !relists.ready && relists.listed_once.iter().all(|l| *l) {
                    // Every namespace is listed: the store is complete.
                    relists.ready = true;
                    if let Writer::Decoded(writer) = writer {
                        // A relist of what kube-runtime's store holds marks
                        // it ready (its controllers start reconciling once
                        // it is) without changing it. A compact cache's
                        // controllers' stores are ready from the start.
                        writer.apply_watcher_event(&watcher::Event::Init);
                        for object in self.objects.state() {
                            writer.apply_watcher_event(&watcher::Event::InitApply(
                                object.as_ref().clone(),
                            ));
                        }
                        writer.apply_watcher_event(&watcher::Event::InitDone);
                    }
                    self.mark_synced();
                }
            }
        }
    }

    /// The copy `object` replaces, for the subscribers' predicates: a
    /// compact cache decodes it only when one has a predicate.
    fn old(&self, object: &K) -> Option<Arc<K>> {
        if matches!(self.objects, Objects::Compact(_))
            && !lock(&self.subscribers).iter().any(Announcer::judges)
        {
            return None;
        }
        self.objects.get(&self.key(object))
    }

    /// Deletes `stale` from the store (a relist no longer listed it).
    fn delete(&self, writer: &mut Writer<K>, stale: &Key) {
        let key = object_ref(stale.0.as_deref(), &stale.1, &self.dyntype);
        match writer {
            Writer::Decoded(writer) => {
                if let Some(object) = self.objects.get(&key) {
                    writer.apply_watcher_event(&watcher::Event::Delete(object.as_ref().clone()));
                }
            }
            Writer::Compact(writer) => {
                writer.remove(stale);
                self.evict_hot(stale.0.as_deref(), &stale.1);
            }
        }
    }

    /// Hands `object` (which replaced `old`) to every subscriber's `lane`: the
    /// store's own copy, so that a queued announcement costs no second
    /// copy. During a (re)list the store may still hold the old state: the
    /// event's copy goes instead.
    /// (A compact cache's queues keep no copy.)
    fn announce(&self, old: Option<&K>, object: K, lane: Lane) {
        let stored = match &self.objects {
            Objects::Decoded(store) => store.get(&self.key(&object)).filter(|stored| {
                stored.resource_version() == object.resource_version()
                    && stored.uid() == object.uid()
            }),
            Objects::Compact(_) => None,
        };
        let object = stored.unwrap_or_else(|| Arc::new(object));
        // A stopped subscriber has dropped its queue.
        lock(&self.subscribers).retain(|s| s.announce(old, object.clone(), lane));
    }

    /// Whether the store holds `namespace`/`name`.
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.objects
            .contains(&object_ref(namespace, name, &self.dyntype))
    }

    /// A copy newer than `than`, waiting up to `wait` for the watch.
    async fn newer(
        &self,
        namespace: Option<&str>,
        name: &str,
        than: &str,
        wait: Duration,
    ) -> Option<Arc<K>> {
        let key = object_ref::<K>(namespace, name, &self.dyntype);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the look, so no change slips between them.
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            let cached = self.objects.get(&key)?;
            match is_newer(cached.resource_version().as_deref().unwrap_or(""), than) {
                Some(true) => return Some(cached),
                Some(false) => {}
                None => return None,
            }
            tokio::time::timeout_at(deadline, notified).await.ok()?;
        }
    }
}

/// The watch's end of a cache's store, in either layout.
enum Writer<K: AnyObject> {
    Decoded(reflector::store::Writer<K>),
    Compact(CompactWriter<K>),
}

impl<K: AnyObject> Writer<K> {
    fn apply_watcher_event(&mut self, event: &watcher::Event<K>) {
        match self {
            Writer::Decoded(writer) => writer.apply_watcher_event(event),
            Writer::Compact(writer) => writer.apply_watcher_event(event),
        }
    }
}

/// Where each of a multi-namespace cache's watches is in its lists.
struct Relists<K: AnyObject> {
    /// The objects its current list has delivered, while it lists.
    listing: Vec<Option<HashSet<ObjectRef<K>>>>,
    /// Whether its first list is complete.
    listed_once: Vec<bool>,
    /// Whether the store was marked ready.
    ready: bool,
}

impl<K: AnyObject> Relists<K> {
    fn new(watches: usize) -> Self {
        Relists {
            listing: (0..watches).map(|_| None).collect(),
            listed_once: vec![false; watches],
            ready: false,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The store key of `namespace`/`name`.
pub(crate) fn object_ref<K: AnyObject>(
    namespace: Option<&str>,
    name: &str,
    dyntype: &K::DynamicType,
) -> ObjectRef<K> {
    let key = ObjectRef::new_with(name, dyntype.clone());
    match namespace {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

#[cfg(test)]
mod tests;
