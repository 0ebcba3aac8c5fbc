//! The shared cache as a reconciler reads it: kube-runtime's store, with a
//! readiness that wakes every waiter.
//!
//! kube-runtime's `Store::wait_until_ready` keeps one waker: when several
//! tasks wait (each controller of the type waits too), only the last to
//! register is woken when the first list is in, and the others wait until
//! something else polls them — forever, for a task that only waits. This
//! store's [`wait_until_ready`](Store::wait_until_ready) waits on a channel
//! that wakes them all.
//!
//! The objects are kube-runtime's store (the decoded layout) or a compact
//! cache's JSON (`compact.rs`), read through the same methods.

use std::fmt;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::{self, ObjectRef};
use tokio::sync::watch;

use kube::runtime::watcher;

use super::compact::{CompactObjects, CompactWriter};
use super::key::Key;
use super::{CacheError, Indexes};
use crate::object::AnyObject;

/// A shared cache's objects, in either layout.
pub(crate) enum Objects<K: AnyObject> {
    Decoded(reflector::Store<K>),
    Compact(Arc<CompactObjects<K>>),
}

impl<K: AnyObject> Clone for Objects<K> {
    fn clone(&self) -> Self {
        match self {
            Objects::Decoded(store) => Objects::Decoded(store.clone()),
            Objects::Compact(objects) => Objects::Compact(objects.clone()),
        }
    }
}

impl<K: AnyObject> Objects<K> {
    pub(crate) fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        match self {
            Objects::Decoded(store) => store.get(key),
            Objects::Compact(objects) => objects.get(key.namespace.as_deref(), &key.name),
        }
    }

    pub(crate) fn contains(&self, key: &ObjectRef<K>) -> bool {
        match self {
            Objects::Decoded(store) => store.get(key).is_some(),
            Objects::Compact(objects) => objects.holds(key.namespace.as_deref(), &key.name),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Objects::Decoded(store) => store.len(),
            Objects::Compact(objects) => objects.len(),
        }
    }

    /// Every object's namespace and name.
    pub(crate) fn keys(&self) -> Vec<Key> {
        match self {
            Objects::Decoded(store) => store
                .state()
                .iter()
                .map(|o| (o.namespace(), o.name_any()))
                .collect(),
            Objects::Compact(objects) => objects.keys(),
        }
    }

    pub(crate) fn state(&self) -> Vec<Arc<K>> {
        match self {
            Objects::Decoded(store) => store.state(),
            Objects::Compact(objects) => objects.state(),
        }
    }

    /// Every object's namespace, name and uid; a compact cache keeps each
    /// uid beside the object's JSON (`packed.rs`) and decodes no object.
    pub(crate) fn identities(&self) -> Vec<(Key, String)> {
        match self {
            Objects::Decoded(store) => store
                .state()
                .iter()
                .map(|o| {
                    let uid = o.meta().uid.clone().unwrap_or_default();
                    ((o.namespace(), o.name_any()), uid)
                })
                .collect(),
            Objects::Compact(objects) => objects.identities(),
        }
    }
}

/// Where a shared cache is in its first list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Synced {
    /// The first list is not complete yet.
    Listing,
    /// The store held the complete list once (and stays synced through
    /// later re-lists, as an informer's `HasSynced` does).
    Yes,
    /// The watch stopped before its first list was complete.
    Stopped,
}

/// The shared watch cache of `K` that [`Context::store`](crate::Context::store)
/// hands out: every controller of the same type, scope and selection reads
/// it, and so do the re-reads of writes after a conflict.
///
/// It reads as kube-runtime's [`Store`](kube::runtime::reflector::Store)
/// does (`get`, `state`, `len`, `find`) in either
/// [`CacheLayout`](crate::cache::CacheLayout). In the decoded layout each read
/// hands out the stored copy; in the compact one each read decodes a copy
/// of its own (`state` and `find` decode every object they pass), and
/// [`into_inner`](Self::into_inner), kube-runtime's store, is `None`.
/// [`wait_until_ready`](Self::wait_until_ready) is this type's own.
pub struct Store<K: AnyObject> {
    inner: Objects<K>,
    sync: watch::Receiver<Synced>,
    name: String,
    indexes: Arc<Indexes<K>>,
    /// `K`'s dynamic type, to name indexed objects; `None` for a store
    /// made without one (it has no index).
    dyntype: Option<K::DynamicType>,
}

impl<K: AnyObject> Clone for Store<K> {
    fn clone(&self) -> Self {
        Store {
            inner: self.inner.clone(),
            sync: self.sync.clone(),
            name: self.name.clone(),
            indexes: self.indexes.clone(),
            dyntype: self.dyntype.clone(),
        }
    }
}

impl<K: AnyObject> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("cache", &self.name)
            .field("objects", &self.inner.len())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl<K: AnyObject> Store<K> {
    pub(crate) fn new(inner: Objects<K>, sync: watch::Receiver<Synced>, name: String) -> Self {
        Store {
            inner,
            sync,
            name,
            indexes: Arc::default(),
            dyntype: None,
        }
    }

    /// Reads `indexes`, naming objects with `dyntype`.
    pub(crate) fn with_indexes(
        mut self,
        indexes: Arc<Indexes<K>>,
        dyntype: K::DynamicType,
    ) -> Self {
        self.indexes = indexes;
        self.dyntype = Some(dyntype);
        self
    }

    /// The cache's name, as its readiness check says it (`cache:configmaps`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cached copy of `name` (in `namespace`, `None` for a
    /// cluster-scoped object).
    pub fn named(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let dyntype = self.dyntype.clone()?;
        self.inner
            .get(&super::object_ref(namespace, name, &dyntype))
    }

    /// Every cached object in `namespace` (every namespace for `None`)
    /// whose labels `labels` selects (every object for `None`), as
    /// `kubectl get -l` would select them (`app=web,tier!=db`,
    /// `env in (a,b)`, `!legacy`). A compact cache decodes only the
    /// objects of the namespace asked for.
    ///
    /// # Errors
    ///
    /// [`CacheError::Selector`] when `labels` does not parse.
    pub fn list(
        &self,
        namespace: Option<&str>,
        labels: Option<&str>,
    ) -> Result<Vec<Arc<K>>, CacheError> {
        let matcher = labels
            .map(|text| {
                crate::selector::LabelMatcher::parse(text).map_err(|why| CacheError::Selector {
                    selector: text.to_owned(),
                    why,
                })
            })
            .transpose()?;
        let Some(dyntype) = self.dyntype.clone() else {
            return Ok(Vec::new());
        };
        Ok(self
            .keys()
            .into_iter()
            .filter(|(ns, _)| namespace.is_none() || ns.as_deref() == namespace)
            .filter_map(|(ns, name)| {
                self.inner
                    .get(&super::object_ref(ns.as_deref(), &name, &dyntype))
            })
            .filter(|object| matcher.as_ref().is_none_or(|m| m.matches(object.labels())))
            .collect())
    }

    /// The objects index `index` files under `key`, by reference: nothing
    /// is decoded. See [`Manager::index`](crate::Manager::index).
    ///
    /// # Errors
    ///
    /// [`CacheError::UnknownIndex`] when the cache has no index of that name.
    pub fn indexed(&self, index: &str, key: &str) -> Result<Vec<ObjectRef<K>>, CacheError> {
        let found = self
            .indexes
            .get(index)
            .ok_or_else(|| CacheError::UnknownIndex {
                cache: self.name.clone(),
                index: index.to_owned(),
                known: self.indexes.names(),
            })?;
        let Some(dyntype) = &self.dyntype else {
            return Ok(Vec::new());
        };
        Ok(found
            .lookup(key)
            .into_iter()
            .map(|(namespace, name)| super::object_ref(namespace.as_deref(), &name, dyntype))
            .collect())
    }

    /// The cached copies of what [`indexed`](Self::indexed) names (each
    /// decoded, in a compact cache).
    ///
    /// # Errors
    ///
    /// As [`indexed`](Self::indexed).
    pub fn by_index(&self, index: &str, key: &str) -> Result<Vec<Arc<K>>, CacheError> {
        Ok(self
            .indexed(index, key)?
            .iter()
            .filter_map(|object| self.inner.get(object))
            .collect())
    }

    /// Returns once the cache holds the watch's first complete list (the
    /// moment the manager's `/readyz` check of this cache passes); at once
    /// when it already did. Every waiter is woken.
    ///
    /// # Errors
    ///
    /// [`StoreStopped`] when the manager stopped (or was dropped) before
    /// the first list was complete.
    pub async fn wait_until_ready(&self) -> Result<(), StoreStopped> {
        let mut sync = self.sync.clone();
        match sync.wait_for(|s| *s != Synced::Listing).await.map(|s| *s) {
            Ok(Synced::Yes) => Ok(()),
            Ok(_) | Err(_) => Err(StoreStopped {
                cache: self.name.clone(),
            }),
        }
    }

    /// Whether the cache has held a complete list.
    pub fn is_ready(&self) -> bool {
        *self.sync.borrow() == Synced::Yes
    }

    /// The cached copy of `key`.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.inner.get(key)
    }

    /// Whether the cache holds `key` (decoding nothing).
    pub fn contains(&self, key: &ObjectRef<K>) -> bool {
        self.inner.contains(key)
    }

    /// A copy of every cached object.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.inner.state()
    }

    /// The first cached object `predicate` passes.
    pub fn find<P: Fn(&K) -> bool>(&self, predicate: P) -> Option<Arc<K>> {
        match &self.inner {
            Objects::Decoded(store) => store.find(predicate),
            Objects::Compact(objects) => objects.find(predicate),
        }
    }

    /// How many objects the cache holds.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// How many copies a compact cache has decoded for its readers (the
    /// controllers it hands objects to, [`get`](Self::get), re-reads after
    /// a conflict) and how long that took, since it started; zero for a
    /// decoded cache. The same figures as the metrics
    /// `concord_cache_decodes` and `concord_cache_decode_seconds`.
    pub fn decoding(&self) -> (u64, std::time::Duration) {
        match &self.inner {
            Objects::Decoded(_) => (0, std::time::Duration::ZERO),
            Objects::Compact(objects) => {
                let (copies, seconds) = objects.decoding();
                (copies, std::time::Duration::from_secs_f64(seconds))
            }
        }
    }

    /// The namespace and name of every cached object (decoding nothing).
    pub(crate) fn keys(&self) -> Vec<Key> {
        self.inner.keys()
    }

    /// The namespace, name and uid of every cached object (decoding
    /// nothing).
    pub(crate) fn identities(&self) -> Vec<(Key, String)> {
        self.inner.identities()
    }

    /// The uid of the cached `key` (decoding nothing); `None` when the
    /// cache does not hold it.
    pub(crate) fn uid(&self, key: &ObjectRef<K>) -> Option<String> {
        match &self.inner {
            Objects::Decoded(store) => Some(store.get(key)?.meta().uid.clone().unwrap_or_default()),
            Objects::Compact(objects) => objects.uid(key.namespace.as_deref(), &key.name),
        }
    }

    /// kube-runtime's store underneath, for APIs that take one; `None`
    /// for a compact cache, which has none.
    pub fn into_inner(self) -> Option<reflector::Store<K>> {
        match self.inner {
            Objects::Decoded(store) => Some(store),
            Objects::Compact(_) => None,
        }
    }
}

/// [`Store::wait_until_ready`] gave up: the manager stopped before the
/// cache's first list was complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the manager stopped before the cache {cache} synced")]
pub struct StoreStopped {
    /// The cache, as its readiness check names it (`cache:pods/default`).
    pub cache: String,
}
/// The watch's end of a cache's store, in either layout.
pub(super) enum Writer<K: AnyObject> {
    Decoded(reflector::store::Writer<K>),
    Compact(CompactWriter<K>),
}

impl<K: AnyObject> Writer<K> {
    pub(super) fn apply_watcher_event(&mut self, event: &watcher::Event<K>) {
        match self {
            Writer::Decoded(writer) => writer.apply_watcher_event(event),
            Writer::Compact(writer) => writer.apply_watcher_event(event),
        }
    }
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
