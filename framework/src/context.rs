//! What a reconcile gets: the [`Context`], and [`owner_reference`] for the
//! children it creates.

use std::any::{Any, TypeId};
use std::fmt::Debug;
use std::sync::Arc;

use concord_featuregates::{FeatureGates, Operation, StrategyName};
use concord_strategies::{Condition, Error as WriteError, Intent, Mutation, Written};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::{ApiResource, ClusterResourceScope};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::writes::WriteRegistry;
use crate::{
    Object, cache::CacheError, cache::CacheReader, cache::Store, object::AnyObject,
    writes::ResourceWriter,
};

/// What a reconciler gets besides the object: a client, the feature gates,
/// and writers whose strategy the configuration chose.
///
/// Reconciler code states intent — [`remove_finalizer`](Self::remove_finalizer),
/// [`set_label`](Self::set_label), [`set_condition`](Self::set_condition),
/// or any [`Mutation`] through [`write`](Self::write) — and never names a
/// strategy: changing the YAML changes how every one of these writes is sent.
pub struct Context<K: Resource> {
    /// The dynamic type of `K`: `()` for a static type, the
    /// [`ApiResource`] of a [`DynamicObject`](kube::core::DynamicObject).
    dyntype: K::DynamicType,
    client: Client,
    writer: ResourceWriter<K>,
    gates: FeatureGates,
    registry: Arc<WriteRegistry>,
    recorder: Recorder,
    /// The shared watch cache of `K` (a `Store<K>`), type-erased so that
    /// `Context<K>` needs no bounds on `K`.
    store: Option<Arc<dyn Any + Send + Sync>>,
}

impl<K: Resource> Debug for Context<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("writer", &self.writer)
            .finish_non_exhaustive()
    }
}

impl<K> Context<K>
where
    K: AnyObject,
{
    pub(crate) fn new(
        client: Client,
        gates: FeatureGates,
        registry: Arc<WriteRegistry>,
        recorder: Recorder,
        dyntype: K::DynamicType,
    ) -> Self {
        let writer = registry.writer::<K>(&dyntype);
        Context {
            dyntype,
            client,
            writer,
            gates,
            registry,
            recorder,
            store: None,
        }
    }

    /// Reads `store` in [`cached`](Self::cached) and [`store`](Self::store).
    pub(crate) fn with_store(mut self, store: Store<K>) -> Self {
        self.store = Some(Arc::new(store));
        self
    }

    /// The shared watch cache of `K` this controller reconciles from: one
    /// per resource type, scope and watch selector, shared by every
    /// controller of that type and by the re-reads of writes after a
    /// conflict. `None` in a context made before any controller of `K` was
    /// added. In a sharded manager (`--shards`) it holds what this
    /// replica's shard selects (in `label` mode, its own shard only).
    ///
    /// The cache is as fresh as the watch: a copy may be a moment behind
    /// the API server (it never runs ahead of it). Until the watch's first
    /// list is in, the store is empty; [`Store::wait_until_ready`] returns
    /// once it is (the moment the manager's `/readyz` check
    /// `cache:<resource>` passes), in every task that waits, or fails if
    /// the manager stopped first.
    pub fn store(&self) -> Option<Store<K>> {
        self.store.as_ref()?.downcast_ref::<Store<K>>().cloned()
    }

    /// The cached copy of `name` (in `namespace`, `None` for a
    /// cluster-scoped object) from the shared watch cache — no request.
    /// `None` when the cache does not hold it (not created yet, deleted,
    /// outside this controller's selector, or no cache: see
    /// [`store`](Self::store)), and when the copy it holds is older than
    /// this manager's own last write of the object (read your own writes:
    /// [`get`](Self::get) then reads the server).
    ///
    /// ```no_run
    /// # async fn demo(ctx: &concord::Context<k8s_openapi::api::core::v1::Pod>) {
    /// if let Some(pod) = ctx.cached(Some("default"), "web-0") {
    ///     println!("{:?}", pod.metadata.resource_version);
    /// }
    /// # }
    /// ```
    pub fn cached(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let key = crate::cache::object_ref::<K>(namespace, name, &self.dyntype);
        let cached = self.store()?.get(&key)?;
        self.is_current(&cached).then_some(cached)
    }

    /// Whether `cached` is at least as new as the manager's own last write
    /// of its object.
    fn is_current(&self, cached: &K) -> bool {
        let meta = cached.meta();
        let key = (
            crate::cache::label_of(&ApiResource::erase::<K>(&self.dyntype)),
            meta.namespace.clone(),
            meta.name.clone().unwrap_or_default(),
        );
        let seen = match &meta.resource_version {
            Some(version) => crate::own_writes::Seen::Held {
                version: version.clone(),
                uid: meta.uid.clone(),
            },
            None => crate::own_writes::Seen::Absent,
        };
        self.registry.own_writes().is_current(&key, &seen)
    }

    /// A read handle to every shared cache of the manager: the store of
    /// any kind a controller, a [`watches`](crate::manager::ControllerBuilder::watches)
    /// or [`Manager::cache`](crate::Manager::cache) keeps, with its indexes.
    pub fn caches(&self) -> CacheReader {
        CacheReader::new(self.registry.caches().clone())
    }

    /// The manager's shared cache of `C` — any kind, not only this
    /// controller's — for reads that send no request: `get` by name
    /// ([`Store::named`]), `list` by namespace and label selector
    /// ([`Store::list`]), and lookups of its indexes ([`Store::indexed`]).
    ///
    /// ```no_run
    /// # async fn demo(ctx: &concord::Context<k8s_openapi::api::core::v1::Pod>) -> Result<(), concord::cache::CacheError> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let maps = ctx.cache::<ConfigMap>()?;
    /// let settings = maps.named(Some("default"), "settings");
    /// let web = maps.list(Some("default"), Some("app=web"))?;
    /// # let _ = (settings, web);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`CacheError::NoCache`] when the manager keeps no cache of `C`:
    /// nothing falls back to the API server.
    pub fn cache<C: Object>(&self) -> Result<Store<C>, CacheError> {
        self.caches().store::<C>()
    }

    /// The dynamic type of `K`: `()` for a statically typed resource, the
    /// [`ApiResource`] a [`DynamicObject`](kube::core::DynamicObject)
    /// controller was added with
    /// ([`Manager::controller_with`](crate::Manager::controller_with)).
    pub fn dyntype(&self) -> &K::DynamicType {
        &self.dyntype
    }

    /// `name` (in `namespace`, `None` for a cluster-scoped object): the
    /// shared watch cache's copy when it holds one (no request), else the
    /// API server's (one `GET`); `None` when the server has no such object.
    ///
    /// An object outside this controller's selection (its label or field
    /// selector, its namespaces) is not in the cache and is read from the
    /// server.
    ///
    /// ```no_run
    /// # async fn demo(ctx: &concord::Context<k8s_openapi::api::core::v1::ConfigMap>) -> Result<(), kube::Error> {
    /// if let Some(settings) = ctx.get(Some("default"), "settings").await? {
    ///     println!("{:?}", settings.data);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The `GET`'s error, other than `404 Not Found`.
    pub async fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, kube::Error> {
        if let Some(cached) = self.cached(namespace, name) {
            return Ok(Some(cached));
        }
        let request = kube::core::Request::new(K::url_path(&self.dyntype, namespace))
            .get(name, &kube::api::GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        match self.client.request::<K>(request).await {
            Ok(object) => Ok(Some(Arc::new(object))),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The client, for reads and for writes the framework does not model.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The frozen feature gates.
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// The strategy this controller's writes of `operation` go through.
    pub fn strategy(&self, operation: Operation) -> StrategyName {
        self.writer.strategy(operation)
    }

    /// Sends `mutation` of `object` through the configured strategy.
    ///
    /// # Errors
    ///
    /// See [`concord_strategies::Error`]; with a `requeue` conflict policy a
    /// conflict comes back at once so the object is reconciled afresh.
    pub async fn write(&self, object: &K, mutation: Mutation) -> Result<Written<K>, WriteError> {
        self.writer.write(object, &mutation).await
    }

    /// Adds finalizer `name` (no request when it is already there).
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub async fn add_finalizer(&self, object: &K, name: &str) -> Result<Written<K>, WriteError> {
        self.write(object, Intent::add_finalizer(name).into()).await
    }

    /// Removes finalizer `name`; an object already gone counts as done.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub async fn remove_finalizer(&self, object: &K, name: &str) -> Result<Written<K>, WriteError> {
        self.write(object, Intent::remove_finalizer(name).into())
            .await
    }

    /// Sets label `key` to `value`.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub async fn set_label(
        &self,
        object: &K,
        key: &str,
        value: &str,
    ) -> Result<Written<K>, WriteError> {
        self.write(object, Intent::set_label(key, value).into())
            .await
    }

    /// Inserts or replaces the status condition of `condition.type_`, on the
    /// status subresource.
    ///
    /// # Errors
    ///
    /// As [`write`](Self::write).
    pub async fn set_condition(
        &self,
        object: &K,
        condition: Condition,
    ) -> Result<Written<K>, WriteError> {
        self.write(object, Intent::SetCondition(condition).into())
            .await
    }

    /// A writer for another resource type (children, related objects),
    /// resolved from the same strategy table.
    pub fn writer_for<C>(&self) -> ResourceWriter<C>
    where
        C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        self.registry.writer::<C>(&())
    }

    /// A writer for a resource known at run time (`C` is
    /// [`DynamicObject`](kube::core::DynamicObject) with its
    /// [`ApiResource`]), resolved from the same strategy table by the
    /// resource's group, version and plural.
    pub fn writer_for_with<C>(&self, dyntype: &C::DynamicType) -> ResourceWriter<C>
    where
        C: Resource + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        self.registry.writer::<C>(dyntype)
    }

    /// Creates or updates `child` as owned by `owner` (a controller owner
    /// reference, so deleting the owner garbage-collects the child), with
    /// one forced server-side apply under this operator's field manager.
    ///
    /// Like every write, it goes through the strategy table: the
    /// `apply-owned` operation of the child's resource (served by `apply`
    /// alone, its built-in choice), counted in the write metrics.
    ///
    /// # Errors
    ///
    /// See [`concord_strategies::Error`]: `InvalidOwner`, before anything
    /// is sent, when `child` names another namespace than `owner`'s or is
    /// cluster-scoped while `owner` is namespaced (the garbage collector
    /// would delete it); `Rejected` when the API server refuses the apply;
    /// `UnsupportedMutation` if the configuration could choose another
    /// strategy (the loader refuses that).
    pub async fn apply_owned<C>(&self, owner: &K, child: C) -> Result<C, WriteError>
    where
        C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        self.apply(self.owned_by(owner, child)?).await
    }

    /// Creates or updates `object` as given, with one forced server-side
    /// apply under this operator's field manager, and no owner reference
    /// (for an object nothing should garbage-collect, or one whose owner
    /// references the caller set itself). Fields another manager set and
    /// `object` leaves out are kept.
    ///
    /// It goes through the same strategy table cell as
    /// [`apply_owned`](Self::apply_owned): the `apply-owned` operation of
    /// the object's resource, served by `apply` alone.
    ///
    /// ```no_run
    /// # async fn demo(ctx: &concord::Context<k8s_openapi::api::core::v1::ConfigMap>) -> Result<(), concord::strategies::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let mut settings = ConfigMap::default();
    /// settings.metadata.name = Some("settings".into());
    /// settings.metadata.namespace = Some("default".into());
    /// settings.data = Some([("mode".to_owned(), "fast".to_owned())].into());
    /// let stored = ctx.apply(settings).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`apply_owned`](Self::apply_owned).
    pub async fn apply<C>(&self, object: C) -> Result<C, WriteError>
    where
        C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        let written = self
            .registry
            .writer::<C>(&())
            .write(&object, &Intent::ApplyOwned.into())
            .await?;
        stored(written, &object)
    }

    /// Creates `object` with one `POST`, through the strategy table's
    /// `create` operation of its resource (built-in `strict`), counted in
    /// the write metrics. It must carry its name (or a `generateName`, and
    /// the stored object comes back with the generated name), and its
    /// namespace when the resource is namespaced; it is sent as its type
    /// serializes it.
    ///
    /// Under `strict`, `update` and `guarded` an object of that name that
    /// already exists is [`WriteError::AlreadyExists`] (nothing is
    /// changed); configure `create: lax` to count it as done and get the
    /// stored object back instead.
    ///
    /// ```no_run
    /// # async fn demo(ctx: &concord::Context<k8s_openapi::api::core::v1::ConfigMap>) -> Result<(), concord::strategies::Error> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let mut settings = ConfigMap::default();
    /// settings.metadata.name = Some("settings".into());
    /// settings.metadata.namespace = Some("default".into());
    /// let stored = ctx.create(&settings).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// See [`Writer::create`](concord_strategies::Writer::create).
    pub async fn create<C>(&self, object: &C) -> Result<C, WriteError>
    where
        C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        let written = self.registry.writer::<C>(&()).create(object).await?;
        stored(written, object)
    }

    /// Creates `child` as owned by `owner`, as [`create`](Self::create):
    /// with a controller owner reference to `owner` (so deleting the owner
    /// garbage-collects the child) and, when it names none, the owner's
    /// namespace.
    ///
    /// # Errors
    ///
    /// `InvalidOwner` as for [`apply_owned`](Self::apply_owned), before
    /// anything is sent; otherwise as [`create`](Self::create).
    pub async fn create_owned<C>(&self, owner: &K, child: C) -> Result<C, WriteError>
    where
        C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        self.create(&self.owned_by(owner, child)?).await
    }

    /// Deletes the object `copy` was read as — a cached copy, a view or a
    /// metadata-only copy serve, as only its name, namespace, uid and
    /// `resourceVersion` are read — through the strategy table's `delete`
    /// operation of its resource (built-in `strict`), counted in the write
    /// metrics.
    ///
    /// Under `strict`, `update` and `guarded` the `DELETE` carries the
    /// copy's uid and `resourceVersion` as preconditions: if the object
    /// changed since the copy was read, nothing is deleted and the call
    /// fails with [`WriteError::Conflict`], so the reconciler decides again
    /// on the newer copy. Under `lax` only the uid is a precondition. An
    /// object already gone — or gone and created again under its name —
    /// counts as done ([`Outcome::gone`](concord_strategies::Outcome)) and
    /// the newcomer is left alone. The written object is `None` once
    /// deleted, or the object with its `deletionTimestamp` while its
    /// finalizers hold it.
    ///
    /// # Errors
    ///
    /// See [`Writer::delete`](concord_strategies::Writer::delete).
    pub async fn delete<C>(&self, copy: &C) -> Result<Written<C>, WriteError>
    where
        C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        self.registry.writer::<C>(&()).delete(copy).await
    }

    /// `child` with a controller owner reference to `owner` (replacing one
    /// to the same uid) and, when it is namespaced and names none, the
    /// owner's namespace; an error naming the rule when the garbage
    /// collector would not honour the reference.
    fn owned_by<C>(&self, owner: &K, mut child: C) -> Result<C, WriteError>
    where
        C: Resource<DynamicType = ()> + 'static,
    {
        let cluster_child = is_cluster_scoped::<C>();
        if !cluster_child && child.meta().namespace.is_none() {
            child.meta_mut().namespace = owner.namespace();
        }
        let owner_namespace = owner.namespace();
        if let Some(rule) = owner_rule(
            owner_namespace.as_deref(),
            cluster_child,
            child.namespace().as_deref(),
        ) {
            let owner = match owner_namespace {
                Some(ns) => format!("{ns}/{}", owner.name_any()),
                None => owner.name_any(),
            };
            return Err(WriteError::InvalidOwner {
                object: concord_strategies::ObjectKey::new(
                    ApiResource::erase::<C>(&()).plural,
                    child.namespace().as_deref(),
                    child.name_any(),
                ),
                owner,
                rule,
            });
        }
        if let Some(reference) = owner.controller_owner_ref(&self.dyntype) {
            child
                .owner_references_mut()
                .retain(|r| r.uid != reference.uid);
            child.owner_references_mut().push(reference);
        }
        Ok(child)
    }

    /// Publishes a Kubernetes Event about `object`. Failures are logged, not
    /// returned: an event is never worth failing a reconcile.
    pub async fn event(&self, object: &K, type_: EventType, reason: &str, note: impl Into<String>) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        };
        let reference = object.object_ref(&self.dyntype);
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(%error, object = %object.name_any(), "publishing an event failed");
        }
    }
}

/// The stored object of a write that always stores one (an apply, a
/// create).
fn stored<C>(written: Written<C>, sent: &C) -> Result<C, WriteError>
where
    C: Resource<DynamicType = ()>,
{
    written.object.ok_or_else(|| WriteError::NotFound {
        object: concord_strategies::ObjectKey::new(
            ApiResource::erase::<C>(&()).plural,
            sent.namespace().as_deref(),
            sent.name_any(),
        ),
    })
}

/// Whether `C` is a cluster-scoped resource type.
pub(crate) fn is_cluster_scoped<C: Resource + 'static>() -> bool {
    TypeId::of::<C::Scope>() == TypeId::of::<ClusterResourceScope>()
}

/// The rule an owner in `owner_namespace` (`None`: cluster-scoped) of a
/// child (cluster-scoped, or in `child_namespace`) breaks, if any. The
/// garbage collector resolves a namespaced owner in its child's own
/// namespace only, and finds none for a cluster-scoped child: it would
/// take the owner for gone and delete the child.
fn owner_rule(
    owner_namespace: Option<&str>,
    cluster_child: bool,
    child_namespace: Option<&str>,
) -> Option<&'static str> {
    let owner_namespace = owner_namespace?;
    if cluster_child {
        return Some("a namespaced owner cannot own a cluster-scoped object");
    }
    (child_namespace != Some(owner_namespace))
        .then_some("an owner must be in its child's namespace (cross-namespace owner references are deleted by the garbage collector)")
}

/// A controller owner reference to `owner`, or `None` when it has no uid yet.
pub fn owner_reference<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    owner.controller_owner_ref(&())
}

#[cfg(test)]
mod tests {
    use super::owner_rule;

    #[test]
    fn owner_rule_refuses_what_the_garbage_collector_would_delete() {
        // A cluster-scoped owner may own anything.
        assert_eq!(owner_rule(None, true, None), None);
        assert_eq!(owner_rule(None, false, Some("b")), None);
        // A namespaced owner: its own namespace only, never a cluster-scoped child.
        assert_eq!(owner_rule(Some("a"), false, Some("a")), None);
        assert!(owner_rule(Some("a"), false, Some("b")).is_some());
        assert!(owner_rule(Some("a"), true, None).is_some());
        assert!(owner_rule(Some("a"), false, None).is_some());
    }
}
