//! The manager's shared caches as an author reaches them: a cache of any
//! kind, indexes on them, and the read handle mappers and reconcilers get.

use std::sync::Arc;

use kube::api::Api;

use super::Manager;
use crate::cache::{CacheReader, KeyFn, Selection, SharedCache};
use crate::own_writes::Seen;
use crate::{Error, Object, cache::Store, object::AnyObject};

impl Manager {
    /// Keeps a shared cache of `C` as `api` lists and watches it (all
    /// namespaces or one), for cached reads of a kind no controller of
    /// this manager reconciles: [`Context::cache`](crate::Context::cache),
    /// [`CacheReader::store`] and the mappers of
    /// [`watches`](crate::manager::ControllerBuilder::watches) read it. A controller
    /// of `C` with no selector, or another call for the same `api`,
    /// shares it: one watch, one store, one `/readyz` check
    /// (`cache:<resource>`).
    ///
    /// ```no_run
    /// # async fn demo(manager: &mut concord::Manager) {
    /// use k8s_openapi::api::core::v1::Secret;
    /// let secrets = kube::Api::<Secret>::all(manager.client().clone());
    /// let store = manager.cache(secrets);
    /// # let _ = store;
    /// # }
    /// ```
    ///
    /// # Caveats
    ///
    /// The cache holds every object `api` lists, trimmed as the manager's
    /// [`CacheTrim`](crate::cache::CacheTrim) says. In a sharded manager it is
    /// not divided among replicas: each holds all of it.
    pub fn cache<C: Object>(&mut self, api: Api<C>) -> Store<C> {
        self.cache_with(api, ())
    }

    /// [`cache`](Self::cache) for a kind known at run time
    /// ([`DynamicObject`](kube::core::DynamicObject) and its
    /// [`ApiResource`](kube::core::ApiResource)).
    pub fn cache_with<C: AnyObject>(&mut self, api: Api<C>, dyntype: C::DynamicType) -> Store<C> {
        self.shared_cache(api, Vec::new(), Selection::default(), &dyntype)
            .store()
    }

    /// The shared cache of `api` (and `more`'s namespaces) as `selection`
    /// picks, created with its watch and readiness check when it is new.
    pub(crate) fn shared_cache<C: AnyObject>(
        &mut self,
        api: Api<C>,
        more: Vec<Api<C>>,
        selection: Selection,
        dyntype: &C::DynamicType,
    ) -> Arc<SharedCache<C>> {
        let resource = kube::core::ApiResource::erase::<C>(dyntype);
        // What the cache leaves out, after what this resource's strategies read.
        let row = self
            .config
            .strategies()
            .for_resource(&crate::writes::resource_key(&resource));
        let trim = self.cache_trim.for_row(&row);
        let (cache, watch) =
            self.writes
                .caches()
                .shared(&api, more, selection, trim, self.cache_layout, dyntype);
        if let Some(watch) = watch {
            // The watch drops the manager's records of its own writes as
            // it delivers them.
            let own = self.writes.own_writes().clone();
            let label = crate::cache::label_of(&resource);
            cache.listen(Box::new(move |object: &C, deleted| {
                let meta = object.meta();
                let key = (
                    label.clone(),
                    meta.namespace.clone(),
                    meta.name.clone().unwrap_or_default(),
                );
                let seen = match (deleted, &meta.resource_version) {
                    (false, Some(version)) => Seen::Held {
                        version: version.clone(),
                        uid: meta.uid.clone(),
                    },
                    _ => Seen::Absent,
                };
                own.observed(&key, &seen);
            }));
            let cold = self.args.leader_elect && self.args.cold_standby;
            self.health.readiness.add_waived(
                &cache.check_name(),
                "not synced",
                cache.synced(),
                cold.then(|| self.standing_by.clone()),
            );
            self.watches.push(watch);
        }
        cache
    }

    /// Indexes every shared cache of `C` — those already added and those
    /// to come — by the keys `keys` gives each object, under `name`, so
    /// that [`Store::indexed`] and [`Store::by_index`] answer "which
    /// objects have key `k`" without decoding or scanning the cache (a
    /// mapper's question: which Mirrors name this ConfigMap), as
    /// controller-runtime's `IndexField`. The function runs once per watch
    /// event on the copy the watch delivered; an object may have any
    /// number of keys.
    ///
    /// ```no_run
    /// # fn demo(manager: &mut concord::Manager) -> Result<(), concord::Error> {
    /// use k8s_openapi::api::core::v1::Pod;
    /// manager.index::<Pod>("node", |pod| {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::DuplicateIndex`] when `C` already has an index `name`.
    pub fn index<C: AnyObject>(
        &mut self,
        name: &str,
        keys: impl Fn(&C) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), Error> {
        let keys: KeyFn<C> = Arc::new(keys);
        if self.writes.caches().index(name, keys) {
            Ok(())
        } else {
            Err(Error::DuplicateIndex {
                index: name.to_owned(),
                type_name: std::any::type_name::<C>(),
            })
        }
    }

    /// A read handle to every shared cache of this manager, for code
    /// outside reconcilers (mappers and reconcilers get one from their
    /// context).
    pub fn caches(&self) -> CacheReader {
        CacheReader::new(self.writes.caches().clone())
    }
}
