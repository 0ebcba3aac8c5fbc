//! One shared watch cache (a kube-runtime reflector store) per resource
//! type, scope and watch configuration: every controller of that type reads
//! it, [`Context::cached`](crate::Context::cached) reads it, and a write's
//! re-read after a conflict is served from it when it has caught up.
//!
//! The manager opens one watch per cache, not per controller: controllers
//! added for the same `Api<K>` scope and watch configuration (the sharding
//! gate's label selector included) subscribe to the same stream.
//!
//! Objects are stored trimmed ([`CacheTrim`], `trim.rs`), and each
//! subscriber takes them from a queue that holds each object once
//! (`queue.rs`). The cache knows nothing of controllers: it hands out
//! queues and the task that drives the watch.

mod queue;
mod trim;

pub(crate) use queue::Announced;
pub use trim::{CacheTrim, LAST_APPLIED};

use std::any::{Any, TypeId};
use std::fmt;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use concord_strategies::{FreshCopies, Observed, cached_copy, is_newer};
use futures::StreamExt;
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, watch as signal};

use self::queue::{Announcer, queue};
use crate::Object;
use crate::task::Task;

/// The shared cache of one resource type, scope and watch configuration.
///
/// The watch feeds the store (each object trimmed first) and announces each
/// applied object to every subscriber's queue, as the object itself: a
/// controller never looks an announced object up in the store (where a
/// deletion in between would swallow the announcement), and a slow
/// controller never holds the watch back — nor makes the queue grow past
/// one entry per object.
pub(crate) struct SharedCache<K: Object> {
    api: Api<K>,
    selection: Selection,
    trim: CacheTrim,
    reader: Store<K>,
    /// Taken by the task that drives the watch when the manager runs.
    writer: Mutex<Option<reflector::store::Writer<K>>>,
    /// One queue per subscriber.
    subscribers: Mutex<Vec<Announcer<K>>>,
    /// Woken after every watch event the store applied.
    changed: Arc<Notify>,
    /// Set once the store holds the first complete list.
    synced: Arc<AtomicBool>,
}

impl<K: Object> SharedCache<K> {
    fn new(api: Api<K>, selection: Selection, trim: CacheTrim) -> Self {
        let writer = reflector::store::Writer::<K>::default();
        SharedCache {
            api,
            selection,
            trim,
            reader: writer.as_reader(),
            writer: Mutex::new(Some(writer)),
            subscribers: Mutex::new(Vec::new()),
            changed: Arc::new(Notify::new()),
            synced: Arc::default(),
        }
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
        let resource = ApiResource::erase::<K>(&());
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
    pub(crate) fn reader(&self) -> Store<K> {
        self.reader.clone()
    }

    /// The `Api` the cache lists and watches through.
    pub(crate) fn api(&self) -> &Api<K> {
        &self.api
    }

    /// A stream of the objects the watch applies, for one subscriber
    /// (subscribed before the manager starts the watch, so it sees every
    /// object from the first list on).
    pub(crate) fn subscribe(&self) -> Announced<K> {
        let (announcer, announced) = queue();
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
                let Some(writer) = writer else {
                    return;
                };
                let trim = self.trim;
                let events = watcher(self.api.clone(), self.selection.resolve())
                    .default_backoff()
                    .modify(move |object: &mut K| trim.apply(object))
                    .reflect(writer)
                    .for_each(|event| {
                        match event {
                            Ok(
                                watcher::Event::Apply(object) | watcher::Event::InitApply(object),
                            ) => {
                                // The store's own copy, so that a queued
                                // announcement costs no second copy. During
                                // a (re)list the store still holds the old
                                // state: the event's copy goes instead.
                                let object = self
                                    .reader
                                    .get(&ObjectRef::from_obj(&object))
                                    .filter(|stored| {
                                        stored.resource_version() == object.resource_version()
                                            && stored.uid() == object.uid()
                                    })
                                    .unwrap_or_else(|| Arc::new(object));
                                // A stopped subscriber has dropped its queue.
                                lock(&self.subscribers).retain(|s| s.announce(object.clone()));
                            }
                            // `reflect` has applied the list to the store.
                            Ok(watcher::Event::InitDone) => {
                                self.synced.store(true, Ordering::Release);
                            }
                            Ok(_) => {}
                            Err(error) => tracing::debug!(%error, "shared watch"),
                        }
                        self.changed.notify_waiters();
                        futures::future::ready(())
                    });
                tokio::select! {
                    () = events => {}
                    _ = shutdown.wait_for(|stop| *stop) => {}
                }
            })
        })
    }

    /// Whether the store holds `namespace`/`name`.
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.reader.get(&object_ref(namespace, name)).is_some()
    }

    /// A copy newer than `than`, waiting up to `wait` for the watch.
    async fn newer(
        &self,
        namespace: Option<&str>,
        name: &str,
        than: &str,
        wait: Duration,
    ) -> Option<Observed> {
        let key = object_ref::<K>(namespace, name);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the look, so no change slips between them.
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            let cached = self.reader.get(&key)?;
            match is_newer(cached.resource_version().as_deref().unwrap_or(""), than) {
                Some(true) => return observed(cached.as_ref()),
                Some(false) => {}
                None => return None,
            }
            tokio::time::timeout_at(deadline, notified).await.ok()?;
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn object_ref<K: Object>(namespace: Option<&str>, name: &str) -> ObjectRef<K> {
    let key = ObjectRef::new(name);
    match namespace {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

/// `object` as JSON, complete or not by the rule the strategies' `Writer`
/// applies ([`cached_copy`]).
fn observed<K: Object>(object: &K) -> Option<Observed> {
    let json = serde_json::to_value(object).ok()?;
    Some(cached_copy::<K>(json, &ApiResource::erase::<K>(&())))
}

/// Which objects a cache watches.
#[derive(Clone)]
pub(crate) enum Selection {
    /// Those this configuration selects.
    Fixed(watcher::Config),
    /// Those the configuration `resolve` returns when the watch starts:
    /// a sharded replica learns its selector only once it has joined its
    /// ring, after its controllers were added. Caches of the same `name`
    /// are one.
    Deferred {
        name: &'static str,
        resolve: Arc<dyn Fn() -> watcher::Config + Send + Sync>,
    },
}

impl Selection {
    fn resolve(&self) -> watcher::Config {
        match self {
            Selection::Fixed(config) => config.clone(),
            Selection::Deferred { resolve, .. } => resolve(),
        }
    }
}

impl PartialEq for Selection {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Selection::Fixed(a), Selection::Fixed(b)) => a == b,
            (Selection::Deferred { name: a, .. }, Selection::Deferred { name: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl fmt::Debug for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selection::Fixed(config) => write!(f, "{:?}", config.label_selector),
            Selection::Deferred { name, .. } => write!(f, "{name}"),
        }
    }
}

/// The shared caches of one manager.
#[derive(Default)]
pub(crate) struct Caches {
    entries: Mutex<Vec<Entry>>,
}

struct Entry {
    type_id: TypeId,
    resource: ApiResource,
    url: String,
    selection: Selection,
    trim: CacheTrim,
    cache: Arc<dyn Any + Send + Sync>,
    copies: Arc<dyn Lookup>,
}

impl fmt::Debug for Caches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_list()
            .entries(entries.iter().map(|e| (&e.url, &e.selection)))
            .finish()
    }
}

impl Caches {
    /// The cache of `api`'s scope watched as `selection` says and stored
    /// trimmed by `trim`, and, when it is new, the task that drives its
    /// watch.
    pub(crate) fn shared<K: Object>(
        &self,
        api: &Api<K>,
        selection: Selection,
        trim: CacheTrim,
    ) -> (Arc<SharedCache<K>>, Option<Task>) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let url = api.resource_url().to_owned();
        let found = entries.iter().find(|e| {
            e.type_id == TypeId::of::<K>()
                && e.url == url
                && e.selection == selection
                && e.trim == trim
        });
        if let Some(cache) = found.and_then(|e| e.cache.clone().downcast::<SharedCache<K>>().ok()) {
            return (cache, None);
        }
        let cache = Arc::new(SharedCache::new(api.clone(), selection.clone(), trim));
        entries.push(Entry {
            type_id: TypeId::of::<K>(),
            resource: ApiResource::erase::<K>(&()),
            url,
            selection,
            trim,
            cache: cache.clone(),
            copies: cache.clone(),
        });
        (cache.clone(), Some(cache.driver()))
    }

    /// The store of the first cache of `K`, if a controller of `K` was added.
    pub(crate) fn first_store<K: Object>(&self) -> Option<Store<K>> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .iter()
            .filter(|e| e.type_id == TypeId::of::<K>())
            .find_map(|e| e.cache.clone().downcast::<SharedCache<K>>().ok())
            .map(|cache| cache.reader())
    }

    /// The caches that may serve a writer of `type_id` for `resource`:
    /// those of the very same Rust type. A cache of another type of the
    /// same resource (metadata only, `PartialObjectMeta<K>`, or a view
    /// with fewer fields) holds copies the writer's mutation could read
    /// missing fields from; it starts from its own type's copy or a `GET`.
    fn lookups(&self, resource: &ApiResource, type_id: TypeId) -> Vec<Arc<dyn Lookup>> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        entries
            .iter()
            .filter(|e| e.type_id == type_id && same_resource(&e.resource, resource))
            .map(|e| e.copies.clone())
            .collect()
    }
}

fn same_resource(a: &ApiResource, b: &ApiResource) -> bool {
    (&a.group, &a.version, &a.plural) == (&b.group, &b.version, &b.plural)
}

/// A [`SharedCache`] with its type erased.
trait Lookup: Send + Sync {
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool;
    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>>;
}

impl<K: Object> Lookup for SharedCache<K> {
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        SharedCache::holds(self, namespace, name)
    }

    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>> {
        Box::pin(SharedCache::newer(self, namespace, name, than, wait))
    }
}

/// The fresh copies a writer of one resource and Rust type re-reads from:
/// whichever of the manager's caches of that resource and type holds the
/// object (looked up at the
/// time of the re-read, so controllers added after the writer count).
pub(crate) struct CachedCopies {
    caches: Arc<Caches>,
    resource: ApiResource,
    /// The Rust type the writer writes.
    type_id: TypeId,
}

impl CachedCopies {
    /// The copies a writer of `K` for `resource` re-reads from.
    pub(crate) fn new<K: 'static>(caches: Arc<Caches>, resource: ApiResource) -> Self {
        CachedCopies {
            caches,
            resource,
            type_id: TypeId::of::<K>(),
        }
    }
}

impl fmt::Debug for CachedCopies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedCopies")
            .field("resource", &self.resource.plural)
            .finish_non_exhaustive()
    }
}

impl FreshCopies for CachedCopies {
    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>> {
        Box::pin(async move {
            let lookup = self
                .caches
                .lookups(&self.resource, self.type_id)
                .into_iter()
                .find(|l| l.holds(namespace, name))?;
            lookup.newer(namespace, name, than, wait).await
        })
    }
}
