//! The compact layout of a shared cache: each object kept as the compact
//! JSON of its trimmed copy, decoded when it is read.
//!
//! A typed object in memory is several times its JSON: a small
//! `k8s-openapi` Pod is about 11 KiB as a struct (every `Option` of every
//! nested struct has its room) and 1–3 KiB as JSON. A compact cache keeps
//! the JSON only, and every read ([`Store::get`](super::Store::get),
//! [`Context::cached`](crate::Context::cached), a re-read after a `409`)
//! decodes a fresh copy.
//!
//! A controller is handed a decoded copy when the queue gives it the
//! object (`queue.rs`, [`Lazy`](super::queue::Lazy)) and holds it for its
//! reconcile only; a requeue, an owned object's change or a shard
//! handover goes through the queue as a key, decoded when its turn
//! comes. So a controller holds typed copies of at most the objects it is
//! reconciling, whatever the cache holds.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use super::key::{Key, lookup};
use super::packed::{PackedUid, PackedVersion};
use crate::object::AnyObject;

/// How a manager's shared caches hold their objects, set with
/// [`ManagerBuilder::with_cache_layout`](crate::manager::ManagerBuilder::with_cache_layout).
///
/// A benchmark or an operator may take it on its command line
/// (`clap::ValueEnum`) or in a report (`serde`), as the words
/// [`as_str`](CacheLayout::as_str) gives: `compact`, `decoded`.
///
/// ```
/// use concord::cache::CacheLayout;
/// assert_eq!(CacheLayout::default(), CacheLayout::Compact);
/// assert_eq!(CacheLayout::Decoded.to_string(), "decoded");
/// ```
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CacheLayout {
    /// Typed objects, as kube-runtime's store holds them: a read hands out
    /// the stored copy itself (an `Arc`), at no cost.
    Decoded,
    /// Each object as the compact JSON of its trimmed copy: a fraction of
    /// the memory, and every read decodes a copy of its own. The type's
    /// `Serialize` and `Deserialize` must round-trip its objects, as those
    /// of `k8s-openapi`, kube's derive, views and `DynamicObject` do.
    #[default]
    Compact,
}

impl CacheLayout {
    /// The word a command line and a report use for it.
    pub const fn as_str(self) -> &'static str {
        match self {
            CacheLayout::Decoded => "decoded",
            CacheLayout::Compact => "compact",
        }
    }
}

impl std::fmt::Display for CacheLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn key_of<K: Resource>(object: &K) -> Key {
    (object.namespace(), object.name_any())
}

/// One object of a compact cache: its JSON, and its uid and
/// `resourceVersion` packed beside it (`packed.rs`).
struct Entry {
    json: Box<[u8]>,
    uid: PackedUid,
    version: PackedVersion,
}

/// The objects of a compact cache, as JSON, and what decoding them cost.
pub(crate) struct CompactObjects<K> {
    objects: RwLock<HashMap<Key, Entry>>,
    decodes: AtomicU64,
    decode_nanos: AtomicU64,
    kind: PhantomData<fn() -> K>,
}

impl<K: AnyObject> CompactObjects<K> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(CompactObjects {
            objects: RwLock::default(),
            decodes: AtomicU64::new(0),
            decode_nanos: AtomicU64::new(0),
            kind: PhantomData,
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Key, Entry>> {
        self.objects
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Key, Entry>> {
        self.objects
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A decoded copy of `namespace`/`name`.
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.decoded(namespace, name).map(Arc::new)
    }

    /// A decoded copy of `namespace`/`name`, owned.
    pub(crate) fn decoded(&self, namespace: Option<&str>, name: &str) -> Option<K> {
        let objects = self.read();
        let entry = objects.get(lookup(&(namespace, name)))?;
        self.decode(&entry.json)
    }

    fn decode(&self, bytes: &[u8]) -> Option<K> {
        let started = Instant::now();
        let decoded = serde_json::from_slice::<K>(bytes);
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.decodes.fetch_add(1, Relaxed);
        self.decode_nanos.fetch_add(nanos, Relaxed);
        match decoded {
            Ok(object) => Some(object),
            Err(error) => {
                // It was encoded from the same type: a type whose serde does
                // not round-trip (see `CacheLayout::Compact`).
                tracing::warn!(%error, kind = std::any::type_name::<K>(), "a compact cache's object does not decode");
                None
            }
        }
    }

    /// The `resourceVersion` and uid of `namespace`/`name`, as kept beside
    /// its JSON or read from it, without decoding the object.
    pub(crate) fn version(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<(String, Option<String>)> {
        #[derive(serde::Deserialize)]
        struct Only {
            metadata: Meta,
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            resource_version: Option<String>,
            uid: Option<String>,
        }
        let objects = self.read();
        let entry = objects.get(lookup(&(namespace, name)))?;
        if let (Some(version), Some(uid)) = (entry.version.text(), entry.uid.text()) {
            return Some((version, Some(uid)));
        }
        let only: Only = serde_json::from_slice(&entry.json).ok()?;
        Some((only.metadata.resource_version?, only.metadata.uid))
    }

    /// The uid of `namespace`/`name` (empty when it has none), kept beside
    /// its JSON or read from it, without decoding the object; `None` when
    /// it is not held.
    pub(crate) fn uid(&self, namespace: Option<&str>, name: &str) -> Option<String> {
        let objects = self.read();
        objects.get(lookup(&(namespace, name))).map(uid_of)
    }

    /// The namespace, name and uid of every object (empty when it has
    /// none), read under one lock, decoding no object.
    pub(crate) fn identities(&self) -> Vec<(Key, String)> {
        let objects = self.read();
        objects
            .iter()
            .map(|(key, entry)| (key.clone(), uid_of(entry)))
            .collect()
    }

    pub(crate) fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.read().contains_key(lookup(&(namespace, name)))
    }

    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }

    pub(crate) fn keys(&self) -> Vec<Key> {
        self.read().keys().cloned().collect()
    }

    /// Decoded copies of every object.
    pub(crate) fn state(&self) -> Vec<Arc<K>> {
        let objects = self.read();
        objects
            .values()
            .filter_map(|e| self.decode(&e.json))
            .map(Arc::new)
            .collect()
    }

    /// The first object `predicate` passes, decoding one after another
    /// (the lock is not held while `predicate` runs: it may read the
    /// cache).
    pub(crate) fn find(&self, predicate: impl Fn(&K) -> bool) -> Option<Arc<K>> {
        self.keys()
            .into_iter()
            .filter_map(|(namespace, name)| self.decoded(namespace.as_deref(), &name))
            .find(|object| predicate(object))
            .map(Arc::new)
    }

    /// The JSON the cache holds, in bytes: its objects' size in memory,
    /// less the map's own.
    pub(crate) fn json_bytes(&self) -> u64 {
        self.read().values().map(|e| e.json.len() as u64).sum()
    }

    /// How many copies were decoded, and in how many seconds.
    pub(crate) fn decoding(&self) -> (u64, f64) {
        let nanos = self.decode_nanos.load(Relaxed);
        (self.decodes.load(Relaxed), nanos as f64 / 1e9)
    }
}

/// The uid `entry` holds, packed or in its JSON (empty when it has none).
fn uid_of(entry: &Entry) -> String {
    #[derive(serde::Deserialize)]
    struct Only {
        metadata: Meta,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        uid: Option<String>,
    }
    entry.uid.text().unwrap_or_else(|| {
        serde_json::from_slice::<Only>(&entry.json)
            .ok()
            .and_then(|o| o.metadata.uid)
            .unwrap_or_default()
    })
}

/// How much of the scratch buffer's room a writer keeps between objects:
/// enough for any usual object, so encoding allocates only the entry.
const SCRATCH_KEPT: usize = 64 * 1024;

/// `object` as a cache entry. It is encoded into `scratch` (the writer's
/// buffer, reused) and the entry copied out at its exact size: one
/// allocation per object, not the doublings of a growing buffer, and no
/// shrinking reallocation that would leave the buffer's unused tail as a
/// small free block beside every cached object.
fn encode<K: AnyObject>(object: &K, scratch: &mut Vec<u8>) -> Option<Entry> {
    scratch.clear();
    let encoded = serde_json::to_writer(&mut *scratch, object);
    let entry = match encoded {
        Ok(()) => Some(Entry {
            json: Box::from(scratch.as_slice()),
            uid: PackedUid::of(object.meta().uid.as_deref()),
            version: PackedVersion::of(object.meta().resource_version.as_deref()),
        }),
        Err(error) => {
            tracing::warn!(%error, object = %object.name_any(), "an object does not encode for the compact cache: it is not cached");
            None
        }
    };
    if scratch.capacity() > SCRATCH_KEPT {
        *scratch = Vec::new();
    }
    entry
}

/// The watch's end of a compact cache. Its first list is buffered and
/// swapped in when complete, as kube-runtime's store writer does (the
/// store is empty until then). A relist is not: each listed object is
/// stored at once and only its key remembered, and when the list is
/// complete what it no longer held is dropped. So a relist never holds a
/// second copy of the objects, and an object a relist brings is in the
/// cache by the time the queue hands it out (which it does during a
/// relist, unlike during the first list).
pub(crate) struct CompactWriter<K> {
    objects: Arc<CompactObjects<K>>,
    first: Option<HashMap<Key, Entry>>,
    listed: Option<HashSet<Key>>,
    /// Whether a list has completed.
    listed_once: bool,
    /// The buffer each object is encoded into before it is stored.
    scratch: Vec<u8>,
}

impl<K: AnyObject> CompactWriter<K> {
    pub(crate) fn new(objects: Arc<CompactObjects<K>>) -> Self {
        CompactWriter {
            objects,
            first: None,
            listed: None,
            listed_once: false,
            scratch: Vec::new(),
        }
    }

    pub(crate) fn apply_watcher_event(&mut self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => match encode(object, &mut self.scratch) {
                Some(bytes) => {
                    self.objects.write().insert(key_of(object), bytes);
                }
                None => self.remove(&key_of(object)),
            },
            watcher::Event::Delete(object) => self.remove(&key_of(object)),
            watcher::Event::Init if !self.listed_once => self.first = Some(HashMap::new()),
            watcher::Event::Init => self.listed = Some(HashSet::new()),
            watcher::Event::InitApply(object) => {
                let key = key_of(object);
                if let Some(first) = self.first.as_mut() {
                    if let Some(bytes) = encode(object, &mut self.scratch) {
                        first.insert(key, bytes);
                    }
                    return;
                }
                match encode(object, &mut self.scratch) {
                    Some(bytes) => {
                        self.objects.write().insert(key.clone(), bytes);
                    }
                    None => self.remove(&key),
                }
                if let Some(listed) = self.listed.as_mut() {
                    listed.insert(key);
                }
            }
            watcher::Event::InitDone => {
                self.listed_once = true;
                if let Some(mut first) = self.first.take() {
                    first.shrink_to_fit();
                    *self.objects.write() = first;
                }
                if let Some(listed) = self.listed.take() {
                    let mut objects = self.objects.write();
                    objects.retain(|key, _| listed.contains(key));
                    objects.shrink_to_fit();
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, key: &Key) {
        self.objects.write().remove(key);
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
