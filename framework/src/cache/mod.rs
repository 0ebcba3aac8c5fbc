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
//! Objects are stored trimmed ([`CacheTrim`], `trim.rs`), and each
//! subscriber takes them from a queue that holds each object once and
//! only what the subscriber's predicate passes, judged against the copy
//! the store held before (`queue.rs`). The cache knows nothing of controllers: it hands out
//! queues and the task that drives the watch.

mod copies;
mod projection;
mod queue;
mod registry;
mod selection;
mod sizes;
mod store;
mod streaming;
mod trim;

pub(crate) use copies::CachedCopies;
pub(crate) use queue::{Announced, Fairness, Slots};
pub(crate) use registry::Caches;
pub(crate) use selection::Selection;
pub(crate) use sizes::CacheSizes;
use store::Synced;
pub use store::{Store, StoreStopped};
pub use trim::{CacheTrim, LAST_APPLIED};

use std::collections::HashSet;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use concord_strategies::is_newer;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, watch as signal};

use self::queue::{Announcer, Lane, queue};
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
    reader: reflector::Store<K>,
    /// Taken by the task that drives the watch when the manager runs.
    writer: Mutex<Option<reflector::store::Writer<K>>>,
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
        dyntype: K::DynamicType,
    ) -> Self {
        let writer = reflector::store::Writer::<K>::new(dyntype.clone());
        SharedCache {
            dyntype,
            api,
            apis,
            selection,
            trim,
            reader: writer.as_reader(),
            writer: Mutex::new(Some(writer)),
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
            self.reader.clone(),
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

    /// The read side of the store.
    pub(crate) fn reader(&self) -> reflector::Store<K> {
        self.reader.clone()
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
    pub(crate) fn subscribe(
        &self,
        predicate: Option<Predicate<K>>,
        fairness: Fairness,
    ) -> Announced<K> {
        let (announcer, announced) = queue(predicate, fairness);
        lock(&self.subscribers).push(announcer);
        announced
    }

    /// The task driving the shared watch until shutdown.
    fn driver(self: Arc<Self>) -> Task {
        Box::new(move |mut shutdown: signal::Receiver<bool>| {
            Box::pin(async move {
                let writer = self
                    .writer
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
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
        writer: &mut reflector::store::Writer<K>,
        relists: &mut Relists<K>,
        i: usize,
        event: watcher::Event<K>,
    ) {
        if self.apis.len() == 1 {
            let old = match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    self.reader.get(&self.key(object))
                }
                _ => None,
            };
            writer.apply_watcher_event(&event);
            let first_list = !self.synced.load(Ordering::Acquire);
            match event {
                watcher::Event::Apply(object) => {
                    self.announce(old.as_deref(), object, Lane::Changed);
                }
                // The store buffers its own copy until the list is in: the
                // queues take that one then, not a second one now.
                watcher::Event::InitApply(object) if first_list => {
                    lock(&self.subscribers).retain(|s| s.announce_first_listed(&object));
                }
                watcher::Event::InitApply(object) => {
                    self.announce(old.as_deref(), object, Lane::Listed);
                }
                // The store holds the list now.
                watcher::Event::InitDone => {
                    if first_list {
                        for subscriber in lock(&self.subscribers).iter() {
                            subscriber.fill(|namespace, name| {
                                self.reader.get(&object_ref(namespace, name, &self.dyntype))
                            });
                        }
                    }
                    self.mark_synced();
                }
                _ => {}
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
                let old = self.reader.get(&key);
                writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
                self.announce(old.as_deref(), object, lane);
            }
            watcher::Event::Delete(object) => {
                writer.apply_watcher_event(&watcher::Event::Delete(object));
            }
            watcher::Event::InitDone => {
                let Some(Some(listed)) = relists.listing.get_mut(i).map(Option::take) else {
                    return;
                };
                let namespace = self.apis.get(i).and_then(|api| api.namespace());
                for stale in self.reader.state().iter().filter(|object| {
                    object.namespace().as_deref() == namespace
                        && !listed.contains(&self.key(object.as_ref()))
                }) {
                    writer.apply_watcher_event(&watcher::Event::Delete(stale.as_ref().clone()));
                }
                if let Some(listed_once) = relists.listed_once.get_mut(i) {
                    *listed_once = true;
                }
                if !relists.ready && relists.listed_once.iter().all(|l| *l) {
                    // Every namespace is listed: the store is complete. A
                    // relist of what it holds marks it ready (controllers
                    // start reconciling once it is) without changing it.
                    relists.ready = true;
                    writer.apply_watcher_event(&watcher::Event::Init);
                    for object in self.reader.state() {
                        writer.apply_watcher_event(&watcher::Event::InitApply(
                            object.as_ref().clone(),
                        ));
                    }
                    writer.apply_watcher_event(&watcher::Event::InitDone);
                    self.mark_synced();
                }
            }
        }
    }

    /// Hands `object` (which replaced `old`) to every subscriber's `lane`: the
    /// store's own copy, so that a queued announcement costs no second
    /// copy. During a (re)list the store may still hold the old state: the
    /// event's copy goes instead.
    fn announce(&self, old: Option<&K>, object: K, lane: Lane) {
        let object = self
            .reader
            .get(&self.key(&object))
            .filter(|stored| {
                stored.resource_version() == object.resource_version()
                    && stored.uid() == object.uid()
            })
            .unwrap_or_else(|| Arc::new(object));
        // A stopped subscriber has dropped its queue.
        lock(&self.subscribers).retain(|s| s.announce(old, object.clone(), lane));
    }

    /// Whether the store holds `namespace`/`name`.
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.reader
            .get(&object_ref(namespace, name, &self.dyntype))
            .is_some()
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
            let cached = self.reader.get(&key)?;
            match is_newer(cached.resource_version().as_deref().unwrap_or(""), than) {
                Some(true) => return Some(cached),
                Some(false) => {}
                None => return None,
            }
            tokio::time::timeout_at(deadline, notified).await.ok()?;
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
