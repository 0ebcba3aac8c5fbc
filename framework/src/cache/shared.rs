//! One shared watch cache: its store, its subscribers' queues and what
//! waits on it (see the module docs of `cache`).

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use concord_strategies::is_newer;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef};
use tokio::sync::Notify;

use super::compact::{CompactObjects, CompactWriter};
use super::queue::{Announced, Fairness};
use super::queue::{Announcer, Lane, Lazy, queue_with};
use super::store::Writer;
use super::{CacheLayout, CacheTrim, Indexes, Objects, Selection, Store, Synced, lock, object_ref};
use crate::object::AnyObject;
use crate::predicate::Predicate;

/// What [`SharedCache::listen`] calls with each object the watch applied
/// or deleted (`true`: deleted).
pub(crate) type Listener<K> = Box<dyn Fn(&K, bool) + Send + Sync>;

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
    pub(super) dyntype: K::DynamicType,
    /// The first of `apis`.
    pub(super) api: Api<K>,
    /// One per namespace watched (one for all namespaces or one).
    pub(super) apis: Vec<Api<K>>,
    pub(super) selection: Selection,
    pub(super) trim: CacheTrim,
    pub(super) objects: Objects<K>,
    /// Taken by the task that drives the watch when the manager runs.
    pub(super) writer: Mutex<Option<Writer<K>>>,
    /// One queue per subscriber.
    pub(super) subscribers: Mutex<Vec<Announcer<K>>>,
    /// Woken after every watch event the store applied.
    pub(super) changed: Arc<Notify>,
    /// Set once the store holds the first complete list.
    pub(super) synced: Arc<AtomicBool>,
    /// The indexes the watch keeps beside the store.
    pub(super) indexes: Arc<Indexes<K>>,
    /// Told of every object the watch applied or deleted, after the store.
    pub(super) listeners: Mutex<Vec<Listener<K>>>,
    /// The same, for the waiters of [`Store::wait_until_ready`]; also says
    /// when the watch stopped before.
    pub(super) sync: tokio::sync::watch::Sender<Synced>,
    /// Set while the list of a watch restarted for a new shard selection
    /// comes in: an object listed unchanged is not announced again (it
    /// stayed this replica's), only those it gained.
    pub(super) quiet: std::sync::atomic::AtomicBool,
}

impl<K: AnyObject> SharedCache<K> {
    pub(super) fn new(
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
            subscribers: Mutex::new(Vec::new()),
            changed: Arc::new(Notify::new()),
            synced: Arc::default(),
            indexes: Arc::default(),
            listeners: Mutex::new(Vec::new()),
            sync: tokio::sync::watch::Sender::new(Synced::Listing),
            quiet: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the store holds `object` as it is (same uid and
    /// resourceVersion), during the list of a restarted sharded watch.
    pub(super) fn listed_unchanged(&self, object: &K) -> bool {
        self.quiet.load(std::sync::atomic::Ordering::Acquire)
            && self.objects.get(&self.key(object)).is_some_and(|stored| {
                stored.resource_version() == object.resource_version()
                    && stored.uid() == object.uid()
            })
    }

    /// The cache's indexes, kept by its watch.
    pub(crate) fn indexes(&self) -> &Arc<Indexes<K>> {
        &self.indexes
    }

    /// Calls `listener` with every object the watch applies or deletes,
    /// on the watch's task, once the store holds the change (a relist's
    /// objects as they come).
    pub(crate) fn listen(&self, listener: Listener<K>) {
        lock(&self.listeners).push(listener);
    }

    pub(super) fn tell(&self, object: &K, deleted: bool) {
        for listener in lock(&self.listeners).iter() {
            listener(object, deleted);
        }
    }

    /// Marks the store synced: readiness checks and waiters.
    pub(super) fn mark_synced(&self) {
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
        .with_indexes(self.indexes.clone(), self.dyntype.clone())
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
    pub(super) fn key(&self, object: &K) -> ObjectRef<K> {
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
        // The queue holds keys: an object is looked up when its turn
        // comes, so it is handed out as the newest copy the cache holds
        // then, and not at all once deleted. A compact cache decodes it
        // then (or hands out the watch's copy of a change it kept); a
        // decoded one hands out its own copy.
        let lazy = match &self.objects {
            Objects::Decoded(store) => {
                let (loaded, held, dyntype) = (store.clone(), store.clone(), self.dyntype.clone());
                let known = dyntype.clone();
                Lazy {
                    load: Box::new(move |namespace, name| {
                        loaded.get(&object_ref(namespace, name, &dyntype))
                    }),
                    holds: Box::new(move |namespace, name| {
                        held.get(&object_ref(namespace, name, &known)).is_some()
                    }),
                    keep: 0,
                }
            }
            Objects::Compact(objects) => {
                let (loaded, held) = (objects.clone(), objects.clone());
                Lazy {
                    load: Box::new(move |namespace, name| {
                        loaded.decoded(namespace, name).map(Arc::new)
                    }),
                    holds: Box::new(move |namespace, name| held.holds(namespace, name)),
                    keep: Lazy::<K>::KEEP_PER_SLOT
                        * if fairness.slots == 0 {
                            16
                        } else {
                            fairness.slots
                        },
                }
            }
        };
        let (announcer, announced) = queue_with(predicate, fairness, Some(lazy));
        lock(&self.subscribers).push(announcer);
        announced
    }

    /// The copy `object` replaces, for the subscribers' predicates: a
    /// compact cache decodes it only when one has a predicate.
    pub(super) fn old(&self, object: &K) -> Option<Arc<K>> {
        if matches!(self.objects, Objects::Compact(_))
            && !lock(&self.subscribers).iter().any(Announcer::judges)
        {
            return None;
        }
        self.objects.get(&self.key(object))
    }

    /// Announces `object` (which replaced `old`) in every subscriber's
    /// `lane`. The queues keep its key only, and look the object up when
    /// its turn comes; the copy here is for their predicates.
    pub(super) fn announce(&self, old: Option<&K>, object: K, lane: Lane) {
        let object = Arc::new(object);
        // A stopped subscriber has dropped its queue.
        lock(&self.subscribers).retain(|s| s.announce(old, object.clone(), lane));
    }

    /// Whether the store holds `namespace`/`name`.
    pub(super) fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.objects
            .contains(&object_ref(namespace, name, &self.dyntype))
    }

    /// A copy newer than `than`, waiting up to `wait` for the watch.
    pub(super) async fn newer(
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
