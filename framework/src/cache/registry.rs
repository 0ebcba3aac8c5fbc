//! The registry of a manager's shared caches: one per Rust type, scope,
//! selection and trim, found again by every controller that asks for the
//! same, and looked up by resource for the sizes gauge and for re-reads
//! after a conflict.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;

use kube::api::Api;
use kube::core::ApiResource;

use super::projection::{Projection, WriterType};
use super::{CacheLayout, CacheTrim, Index, KeyFn, Selection, SharedCache, Store, lock, size};
use crate::object::AnyObject;
use crate::own_writes::{Seen, WriteKey};
use crate::task::Task;

/// A [`SharedCache`] with its type erased.
pub(super) trait Lookup: Send + Sync {
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool;
    /// The cached object's `resourceVersion` and uid, if it is held.
    fn version(&self, namespace: Option<&str>, name: &str) -> Option<(String, Option<String>)>;
    /// How many objects the store holds.
    fn objects(&self) -> usize;
    /// The size of the store's objects encoded as compact JSON.
    fn json_bytes(&self) -> u64;
    /// How many copies a compact cache decoded, and in how many seconds
    /// (none for a decoded cache).
    fn decoding(&self) -> (u64, f64);
    /// A copy newer than `than`, waiting up to `wait` for the watch, as
    /// JSON: the whole object, or its `metadata` alone for
    /// [`Projection::Metadata`].
    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
        projection: Projection,
    ) -> BoxFuture<'a, Option<Value>>;
}

/// The shared caches of one manager.
#[derive(Default)]
pub(crate) struct Caches {
    entries: Mutex<Vec<Entry>>,
    /// The indexes every cache of a type gets: a `(String, KeyFn<K>)`
    /// under `K`'s type id.
    indexers: Mutex<Vec<Indexer>>,
}

/// An index every cache of one type gets: the type, the index's name and
/// its `KeyFn<K>`, type-erased.
type Indexer = (TypeId, String, Arc<dyn Any + Send + Sync>);

struct Entry {
    type_id: TypeId,
    type_name: &'static str,
    /// The namespaces watched, comma-separated; empty for all.
    namespaces: String,
    resource: ApiResource,
    url: String,
    selection: Selection,
    trim: CacheTrim,
    layout: CacheLayout,
    cache: Arc<dyn Any + Send + Sync>,
    copies: Arc<dyn Lookup>,
}

impl fmt::Debug for Caches {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = lock(&self.entries);
        f.debug_list()
            .entries(entries.iter().map(|e| (&e.url, &e.selection)))
            .finish()
    }
}

impl Caches {
    /// The cache of `api`'s scope (and those of `more`: one watch each,
    /// one store) watched as `selection` says and stored trimmed by
    /// `trim`, and, when it is new, the task that drives its watch.
    pub(crate) fn shared<K: AnyObject>(
        &self,
        api: &Api<K>,
        more: Vec<Api<K>>,
        selection: Selection,
        trim: CacheTrim,
        layout: CacheLayout,
        dyntype: &K::DynamicType,
    ) -> (Arc<SharedCache<K>>, Option<Task>) {
        let mut entries = lock(&self.entries);
        let apis: Vec<Api<K>> = std::iter::once(api.clone()).chain(more).collect();
        let url = apis
            .iter()
            .map(Api::resource_url)
            .collect::<Vec<_>>()
            .join(" ");
        let found = entries.iter().find(|e| {
            e.type_id == TypeId::of::<K>()
                && e.url == url
                && e.selection == selection
                && e.trim == trim
                && e.layout == layout
        });
        if let Some(cache) = found.and_then(|e| e.cache.clone().downcast::<SharedCache<K>>().ok()) {
            return (cache, None);
        }
        let cache = Arc::new(SharedCache::new(
            api.clone(),
            apis,
            selection.clone(),
            trim,
            layout,
            dyntype.clone(),
        ));
        for (_, name, keys) in lock(&self.indexers)
            .iter()
            .filter(|(type_id, _, _)| *type_id == TypeId::of::<K>())
        {
            if let Some(keys) = keys.downcast_ref::<KeyFn<K>>() {
                cache
                    .indexes()
                    .add(Arc::new(Index::new(name.clone(), keys.clone())));
            }
        }
        entries.push(Entry {
            type_id: TypeId::of::<K>(),
            type_name: std::any::type_name::<K>(),
            namespaces: cache
                .apis
                .iter()
                .filter_map(|api| api.namespace())
                .collect::<Vec<_>>()
                .join(","),
            resource: ApiResource::erase::<K>(dyntype),
            url,
            selection,
            trim,
            layout,
            cache: cache.clone(),
            copies: cache.clone(),
        });
        (cache.clone(), Some(cache.driver()))
    }

    /// Indexes every cache of `K`, those to come included, by `keys`
    /// under `name`; `false` when `K` already has an index of that name.
    pub(crate) fn index<K: AnyObject>(&self, name: &str, keys: KeyFn<K>) -> bool {
        let mut indexers = lock(&self.indexers);
        if indexers
            .iter()
            .any(|(type_id, known, _)| *type_id == TypeId::of::<K>() && known == name)
        {
            return false;
        }
        indexers.push((TypeId::of::<K>(), name.to_owned(), Arc::new(keys.clone())));
        // Never both locks in this order: `shared` takes `entries` first.
        drop(indexers);
        for entry in lock(&self.entries)
            .iter()
            .filter(|e| e.type_id == TypeId::of::<K>())
        {
            if let Ok(cache) = entry.cache.clone().downcast::<SharedCache<K>>() {
                cache
                    .indexes()
                    .add(Arc::new(Index::new(name.to_owned(), keys.clone())));
            }
        }
        true
    }

    /// Whether a cache of `resource` (`plural.group`) selects every object
    /// of `namespace` (no label, field or shard selector, and a scope that
    /// holds the namespace): one that will show any write to it.
    pub(crate) fn covers(&self, resource: &str, namespace: Option<&str>) -> bool {
        lock(&self.entries).iter().any(|e| {
            label_of(&e.resource) == resource
                && e.selection.is_everything()
                && (e.namespaces.is_empty()
                    || namespace.is_some_and(|ns| e.namespaces.split(',').any(|n| n == ns)))
        })
    }

    /// What the caches that [`covers`](Self::covers) `key`'s namespace
    /// show of it: [`Seen::Uncached`] when none does.
    pub(crate) fn seen(&self, key: &WriteKey) -> Seen {
        let (resource, namespace, name) = key;
        let entries = lock(&self.entries);
        let covering = entries.iter().filter(|e| {
            is_label_of(&e.resource, resource)
                && e.selection.is_everything()
                && (e.namespaces.is_empty()
                    || namespace
                        .as_deref()
                        .is_some_and(|ns| e.namespaces.split(',').any(|n| n == ns)))
        });
        let mut seen = Seen::Uncached;
        for entry in covering {
            match entry.copies.version(namespace.as_deref(), name) {
                Some((version, uid)) => return Seen::Held { version, uid },
                None => seen = Seen::Absent,
            }
        }
        seen
    }

    /// Each cache's labels and size, for [`CacheSizes`].
    pub(super) fn sizes(&self) -> Vec<size::Size> {
        let entries = lock(&self.entries);
        entries
            .iter()
            .map(|e| size::Size {
                resource: if e.resource.group.is_empty() {
                    e.resource.plural.clone()
                } else {
                    format!("{}.{}", e.resource.plural, e.resource.group)
                },
                namespaces: e.namespaces.clone(),
                type_name: size::short_type_name(e.type_name),
                selector: e.selection.describe(),
                objects: e.copies.objects(),
                json_bytes: e.copies.json_bytes(),
                decoding: e.copies.decoding(),
            })
            .collect()
    }

    /// The store of the first cache of `K` for `resource`, if a controller
    /// of it was added.
    pub(crate) fn first_store<K: AnyObject>(&self, resource: &ApiResource) -> Option<Store<K>> {
        let entries = lock(&self.entries);
        entries
            .iter()
            .filter(|e| e.type_id == TypeId::of::<K>() && same_resource(&e.resource, resource))
            .find_map(|e| e.cache.clone().downcast::<SharedCache<K>>().ok())
            .map(|cache| cache.store())
    }

    /// The caches of `resource` that may serve a re-read of `writer`, each
    /// with what it hands over (the table in `projection.rs`): those of the
    /// writer's own Rust type first, then a metadata-only writer's every
    /// other cache (each holds the whole `metadata`) or another writer's
    /// `DynamicObject` caches (each holds every field the server sent).
    ///
    /// A view (or any typed writer) never re-reads from a typed cache of
    /// another type, such as a `k8s-openapi` `Pod` cache: that struct may
    /// lack a field the view declares (a server newer than the Rust type),
    /// and a copy without a field the mutation reads can lose data. It
    /// starts from its own type's copy or a `GET`.
    pub(super) fn lookups(
        &self,
        resource: &ApiResource,
        writer: &WriterType,
    ) -> Vec<(Arc<dyn Lookup>, Projection)> {
        let entries = lock(&self.entries);
        let mut found: Vec<_> = entries
            .iter()
            .filter(|e| same_resource(&e.resource, resource))
            .filter_map(|e| {
                let projection = writer.projection(e.type_id)?;
                Some((writer.is_own(e.type_id), e.copies.clone(), projection))
            })
            .collect();
        // Stable: the order the caches were added in, within each group.
        found.sort_by_key(|(own, _, _)| !own);
        found
            .into_iter()
            .map(|(_, lookup, projection)| (lookup, projection))
            .collect()
    }
}

fn same_resource(a: &ApiResource, b: &ApiResource) -> bool {
    (&a.group, &a.version, &a.plural) == (&b.group, &b.version, &b.plural)
}

/// A resource as the strategy table and the write ledger name it:
/// `plural` or `plural.group`.
/// Whether `label` is [`label_of`] `resource`, without building it.
fn is_label_of(resource: &ApiResource, label: &str) -> bool {
    match label.strip_prefix(resource.plural.as_str()) {
        Some("") => resource.group.is_empty(),
        Some(rest) => {
            !resource.group.is_empty() && rest.strip_prefix('.') == Some(resource.group.as_str())
        }
        None => false,
    }
}

pub(crate) fn label_of(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_matches_its_resource_only() {
        let pods = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let leases = ApiResource::erase::<k8s_openapi::api::coordination::v1::Lease>(&());
        for resource in [&pods, &leases] {
            assert!(is_label_of(resource, &label_of(resource)));
        }
        for label in [
            "pods.",
            "pod",
            "podsx",
            "leases",
            "leases.coordination",
            "leases.coordination.k8s.iox",
        ] {
            assert!(!is_label_of(&pods, label), "{label}");
            assert!(!is_label_of(&leases, label), "{label}");
        }
    }
}
