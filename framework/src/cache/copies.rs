//! The fresh copies a writer re-reads from after a conflict: the first of
//! the manager's caches of its resource that may serve it
//! (`projection.rs`) and holds the object.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use concord_strategies::{FreshCopies, Observed};
use futures::future::BoxFuture;
use kube::Resource;
use kube::core::ApiResource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::projection::{Projection, WriterType};
use super::registry::Lookup;
use super::{Caches, Objects, SharedCache};
use crate::object::AnyObject;

impl<K: AnyObject> Lookup for SharedCache<K> {
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        SharedCache::holds(self, namespace, name)
    }

    fn objects(&self) -> usize {
        self.objects().len()
    }

    fn version(&self, namespace: Option<&str>, name: &str) -> Option<(String, Option<String>)> {
        match self.objects() {
            Objects::Decoded(store) => {
                let object = store.get(&super::object_ref(namespace, name, self.dyntype()))?;
                let meta = object.meta();
                Some((meta.resource_version.clone()?, meta.uid.clone()))
            }
            Objects::Compact(objects) => objects.version(namespace, name),
        }
    }

    fn decoding(&self) -> (u64, f64) {
        match self.objects() {
            Objects::Decoded(_) => (0, 0.0),
            Objects::Compact(objects) => objects.decoding(),
        }
    }

    fn json_bytes(&self) -> u64 {
        if let Objects::Compact(objects) = self.objects() {
            return objects.json_bytes();
        }
        /// Counts what is written, keeping none of it.
        struct Count(u64);
        impl std::io::Write for Count {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0 += bytes.len() as u64;
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        for object in self.objects().state() {
            // A cached object always encodes: it was decoded from JSON.
            let _ = serde_json::to_writer(&mut count, object.as_ref());
        }
        count.0
    }

    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
        projection: Projection,
    ) -> BoxFuture<'a, Option<Value>> {
        Box::pin(async move {
            let cached = SharedCache::newer(self, namespace, name, than, wait).await?;
            match projection {
                Projection::Metadata => serde_json::to_value(cached.meta()).ok(),
                Projection::Whole | Projection::Decoded => {
                    serde_json::to_value(cached.as_ref()).ok()
                }
            }
        })
    }
}

/// The fresh copies a writer of one resource and Rust type re-reads from:
/// the first of the manager's caches of that resource that may serve the
/// writer (`Caches::lookups`: its own type's first) and holds the object,
/// looked up at the time of the re-read, so controllers added after the
/// writer count.
pub(crate) struct CachedCopies {
    caches: Arc<Caches>,
    resource: ApiResource,
    writer: WriterType,
}

impl CachedCopies {
    /// The copies a writer of `K` for `resource` re-reads from.
    pub(crate) fn new<K>(caches: Arc<Caches>, resource: ApiResource) -> Self
    where
        K: Resource + Serialize + DeserializeOwned + 'static,
    {
        CachedCopies {
            caches,
            resource,
            writer: WriterType::of::<K>(),
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
            let (lookup, projection) = self
                .caches
                .lookups(&self.resource, &self.writer)
                .into_iter()
                .find(|(lookup, _)| lookup.holds(namespace, name))?;
            let copy = lookup
                .newer(namespace, name, than, wait, projection)
                .await?;
            self.writer.observed(copy, projection, &self.resource)
        })
    }
}
