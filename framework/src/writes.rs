//! A resource type's writers, one per operation, resolved from the
//! strategy table ([`ResourceWriter`]).

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use concord_featuregates::{Operation, ResourceKey, StrategyName, StrategyTable};
use concord_strategies::{
    DEFAULT_FRESH_WAIT, Error as WriteError, Mutation, Target, WriteMetrics, WriteTurns, Writer,
    Written, strategy_for,
};
use kube::Resource;
use kube::core::ApiResource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::{CachedCopies, Caches};
use crate::metrics::WriteSeries;
use crate::own_writes::{Expect, OwnWrites};

/// The writers of one resource type, one per [`Operation`], resolved from
/// the strategy table once, when a controller or context is built.
///
/// A write picks its cell by the mutation's [`Mutation::operation`] — an
/// array index, no string work on the hot path.
///
/// Cloning one is a reference count: every clone shares the writers.
pub struct ResourceWriter<K> {
    resolved: Arc<Resolved<K>>,
}

/// What a [`ResourceWriter`] shares between its clones.
struct Resolved<K> {
    cells: [Writer<K>; Operation::ALL.len()],
    /// What the manager remembers of its writes, and the resource's name
    /// in it (`plural.group`).
    own: Option<(Arc<OwnWrites>, Arc<Caches>, String)>,
}

impl<K> Clone for ResourceWriter<K> {
    fn clone(&self) -> Self {
        ResourceWriter {
            resolved: self.resolved.clone(),
        }
    }
}

impl<K> Debug for ResourceWriter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceWriter")
            .field("cells", &self.resolved.cells)
            .finish()
    }
}

impl<K> ResourceWriter<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Debug + 'static,
{
    /// Sends `mutation` of `observed` through the strategy configured for
    /// this resource and the mutation's operation.
    ///
    /// # Errors
    ///
    /// Whatever the strategy reports: see [`concord_strategies::Error`].
    pub async fn write(&self, observed: &K, mutation: &Mutation) -> Result<Written<K>, WriteError> {
        let written = self.resolved.cells[mutation.operation().index()]
            .write(observed, mutation)
            .await?;
        self.remember(observed, written.object.as_ref());
        Ok(written)
    }

    /// Records what a write left of `observed`'s object: `stored`, or that
    /// it is gone.
    fn remember(&self, observed: &K, stored: Option<&K>) {
        let Some((own, caches, resource)) = &self.resolved.own else {
            return;
        };
        let key = (resource.clone(), observed.meta().namespace.clone(), {
            let meta = stored.map_or(observed.meta(), |s| s.meta());
            meta.name.clone().unwrap_or_default()
        });
        // Only what a cache that selects every object of its scope would
        // show is waited for: a cache that may never hold the object
        // cannot be.
        let waited = caches.covers(resource, key.1.as_deref());
        let expect = match stored.and_then(|s| s.meta().resource_version.clone()) {
            Some(version) => Expect::Version(version),
            None if stored.is_none() => Expect::Gone {
                uid: observed.meta().uid.clone(),
            },
            None => return,
        };
        own.record(key, expect, crate::own_writes::reconciling(), waited);
    }

    /// Creates `object` through the strategy configured for `create`
    /// (see [`Writer::create`](concord_strategies::Writer::create)).
    ///
    /// # Errors
    ///
    /// As [`Writer::create`](concord_strategies::Writer::create).
    pub async fn create(&self, object: &K) -> Result<Written<K>, WriteError> {
        let written = self.resolved.cells[Operation::Create.index()]
            .create(object)
            .await?;
        if let Some(stored) = &written.object {
            self.remember(stored, Some(stored));
        }
        Ok(written)
    }

    /// Deletes the object `observed` is a copy of through the strategy
    /// configured for `delete` (see
    /// [`Writer::delete`](concord_strategies::Writer::delete)).
    ///
    /// # Errors
    ///
    /// As [`Writer::delete`](concord_strategies::Writer::delete).
    pub async fn delete(&self, observed: &K) -> Result<Written<K>, WriteError> {
        let written = self.resolved.cells[Operation::Delete.index()]
            .delete(observed)
            .await?;
        self.remember(observed, written.object.as_ref());
        Ok(written)
    }

    /// The strategy configured for `operation`.
    pub fn strategy(&self, operation: Operation) -> StrategyName {
        self.resolved.cells[operation.index()].strategy().name()
    }
}

/// Builds [`ResourceWriter`]s and keeps one [`WriteMetrics`] per resource and
/// strategy for the metrics endpoint, and the manager's shared watch caches
/// the writers re-read from after a conflict.
pub(crate) struct WriteRegistry {
    client: kube::Client,
    table: StrategyTable,
    field_manager: String,
    metrics: Mutex<BTreeMap<(String, StrategyName), Arc<WriteMetrics>>>,
    caches: Arc<Caches>,
    fresh_wait: Duration,
    /// The turns every writer of this manager takes (whatever its
    /// strategy, resource cell or controller), and no other manager's.
    turns: WriteTurns,
    /// The resources writers were built for, in the order first asked.
    resources: Mutex<Vec<ResourceKey>>,
    /// Every writer built, by Rust type and resource: a resource's writers
    /// are resolved from the table once and shared by every later call.
    built: Mutex<HashMap<(TypeId, ApiResource), Box<dyn Any + Send + Sync>>>,
    /// What this manager wrote, until its caches show it.
    own: Arc<OwnWrites>,
    /// The types the author stated `k8s-openapi` generates.
    builtins: BuiltinTypes,
}

/// The Rust types an author stated `k8s-openapi` generates
/// ([`ManagerBuilder::with_builtin_type`](crate::manager::ManagerBuilder::with_builtin_type)),
/// each kept as the statement its writers take: a function only a type
/// bounded on `k8s_openapi::Resource` can supply, so no other type can be
/// counted as one.
#[derive(Default)]
pub(crate) struct BuiltinTypes(HashMap<TypeId, Box<dyn Any + Send + Sync>>);

/// A writer of `K`, stated to be of a type `k8s-openapi` generates.
type Statement<K> = fn(Writer<K>) -> Writer<K>;

impl BuiltinTypes {
    pub(crate) fn insert<K>(&mut self)
    where
        K: k8s_openapi::Resource
            + Resource
            + Clone
            + Serialize
            + DeserializeOwned
            + Debug
            + 'static,
    {
        let statement: Statement<K> = Writer::with_builtin_type;
        self.0.insert(TypeId::of::<K>(), Box::new(statement));
    }

    /// `writer`, with the author's statement if one was made for `K`.
    fn state<K: 'static>(&self, writer: Writer<K>) -> Writer<K> {
        match self
            .0
            .get(&TypeId::of::<K>())
            .and_then(|statement| statement.downcast_ref::<Statement<K>>())
        {
            Some(statement) => statement(writer),
            None => writer,
        }
    }
}

impl std::fmt::Debug for WriteRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteRegistry")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

impl WriteRegistry {
    pub(crate) fn new(client: kube::Client, table: StrategyTable, field_manager: String) -> Self {
        WriteRegistry {
            client,
            table,
            field_manager,
            metrics: Mutex::new(BTreeMap::new()),
            caches: Arc::default(),
            fresh_wait: DEFAULT_FRESH_WAIT,
            turns: WriteTurns::default(),
            resources: Mutex::default(),
            built: Mutex::default(),
            own: Arc::default(),
            builtins: BuiltinTypes::default(),
        }
    }

    /// The types the author stated `k8s-openapi` generates.
    pub(crate) fn with_builtins(mut self, builtins: BuiltinTypes) -> Self {
        self.builtins = builtins;
        self
    }

    /// What this manager wrote, until its caches show it.
    pub(crate) fn own_writes(&self) -> &Arc<OwnWrites> {
        &self.own
    }

    /// How long a re-read after a conflict waits for the shared cache.
    pub(crate) fn with_fresh_wait(mut self, wait: Duration) -> Self {
        self.fresh_wait = wait;
        self
    }

    /// The shared watch caches, one per resource type, scope and selector.
    pub(crate) fn caches(&self) -> &Arc<Caches> {
        &self.caches
    }

    pub(crate) fn writer<K>(&self, dyntype: &K::DynamicType) -> ResourceWriter<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        let resource = ApiResource::erase::<K>(dyntype);
        let id = (TypeId::of::<K>(), resource);
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(writer) = built
            .get(&id)
            .and_then(|w| w.downcast_ref::<ResourceWriter<K>>())
        {
            return writer.clone();
        }
        let writer = self.resolve::<K>(&id.1);
        built.insert(id, Box::new(writer.clone()));
        writer
    }

    /// The writers of `resource`, one per operation, from the table.
    fn resolve<K>(&self, resource: &ApiResource) -> ResourceWriter<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Debug + 'static,
    {
        let key = resource_key(resource);
        let row = self.table.for_resource(&key);
        {
            let mut resources = self
                .resources
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !resources.contains(&key) {
                resources.push(key.clone());
            }
        }
        let label = key.to_string();
        let cells = Operation::ALL.map(|operation| {
            let choice = row.get(operation);
            let target = Target::new(self.client.clone(), resource.clone())
                .with_field_manager(self.field_manager.clone())
                .with_metrics(self.metrics_for(&label, choice.strategy))
                .with_fresh_copies(Arc::new(CachedCopies::new::<K>(
                    self.caches.clone(),
                    resource.clone(),
                )))
                .with_fresh_wait(self.fresh_wait)
                .with_turns(self.turns.clone());
            self.builtins.state(Writer::from_target(
                target,
                strategy_for(choice.strategy, choice.on_conflict),
            ))
        });
        ResourceWriter {
            resolved: Arc::new(Resolved {
                cells,
                own: Some((self.own.clone(), self.caches.clone(), label)),
            }),
        }
    }

    fn metrics_for(&self, resource: &str, strategy: StrategyName) -> Arc<WriteMetrics> {
        let mut metrics = self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        metrics
            .entry((resource.to_owned(), strategy))
            .or_default()
            .clone()
    }

    /// The resources writers have been built for so far (at start-up: the
    /// controllers' own).
    pub(crate) fn resources(&self) -> Vec<ResourceKey> {
        self.resources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl WriteSeries for WriteRegistry {
    fn series(&self) -> Vec<((String, StrategyName), Arc<WriteMetrics>)> {
        let metrics = self
            .metrics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        metrics
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

pub(crate) fn resource_key(resource: &ApiResource) -> ResourceKey {
    ResourceKey::new(
        &resource.group,
        &resource.version,
        &resource.kind,
        &resource.plural,
    )
}
