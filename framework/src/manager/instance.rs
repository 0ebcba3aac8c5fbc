//! The [`Manager`] type: what it holds, what it hands out, and how a
//! controller is installed in it.

use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use concord_featuregates::{Config, FeatureGates};
use kube::Client;
use kube::api::Api;
use kube::runtime::events::Recorder;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::Selection;
use crate::controller::{Attempts, Policy, Shared, pending};
use crate::health::Health;
use crate::leader::LeaderElectionConfig;
use crate::sharding::{ShardHandle, Sharding};
use crate::task::Task;
use crate::writes::WriteRegistry;
use crate::{
    Action, Context, ManagerArgs, Object, Reconciler, metrics::Metrics, object::AnyObject,
};

/// A controller's selection, predicate and error policy, checked.
pub(crate) struct Parts<K: AnyObject, E> {
    pub(crate) labels: Option<String>,
    pub(crate) fields: Option<String>,
    pub(crate) predicate: Option<crate::Predicate<K>>,
    pub(crate) backoff: crate::backoff::Backoff,
    pub(crate) policy: Option<Policy<K, E>>,
    /// Reconciles at once (0: no limit).
    pub(crate) concurrency: u16,
    /// The objects other kinds' watch events map to, reconciled as they come.
    pub(crate) triggers: Vec<crate::controller::Trigger<K>>,
    /// Whether a reconcile waits for the caches to show the manager's own
    /// writes it depends on.
    pub(crate) read_your_writes: bool,
}

impl<K: AnyObject, E> Default for Parts<K, E> {
    fn default() -> Self {
        Parts {
            labels: None,
            fields: None,
            predicate: None,
            backoff: crate::backoff::Backoff::default(),
            policy: None,
            concurrency: crate::controller::DEFAULT_CONCURRENCY,
            triggers: Vec::new(),
            read_your_writes: true,
        }
    }
}

/// Runs an operator's controllers: configuration, client, strategy table,
/// metrics and health endpoints, leader election and graceful shutdown.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use concord::{Action, Context, Manager, Reconciler};
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// # struct Labeller;
/// # #[concord::async_trait]
/// # impl Reconciler<ConfigMap> for Labeller {
/// #     type Error = concord::WriteError;
/// #     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &Context<ConfigMap>) -> Result<Action, Self::Error> {
/// #         Ok(Action::await_change())
/// #     }
/// # }
/// # async fn demo() -> Result<(), concord::Error> {
/// let mut manager = Manager::builder("labeller").build().await?;
/// let api = kube::Api::<ConfigMap>::all(manager.client().clone());
/// manager.controller("configmaps", api, Labeller).add()?;
/// manager.run().await
/// # }
/// ```
pub struct Manager {
    pub(super) name: String,
    pub(super) args: ManagerArgs,
    pub(super) client: Client,
    pub(super) config: Config,
    pub(super) writes: Arc<WriteRegistry>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) recorder: Recorder,
    pub(super) metrics_listener: Option<TcpListener>,
    /// With `--metrics-secure`: the endpoint's TLS and request reviewer.
    pub(super) metrics_secure:
        Option<(Arc<crate::secure::MetricsTls>, Arc<crate::secure::Reviewer>)>,
    pub(super) health_listener: Option<TcpListener>,
    /// The shared caches' watches, started before the controllers (before
    /// the leader election, so a standby replica's caches are warm, unless
    /// `--cold-standby`).
    pub(super) watches: Vec<Task>,
    /// Set while a `--cold-standby` replica waits for the Lease: its cache
    /// checks pass, as it watches nothing yet.
    pub(super) standing_by: Arc<std::sync::atomic::AtomicBool>,
    pub(super) controllers: Vec<Task>,
    pub(super) shutdown: Arc<watch::Sender<bool>>,
    pub(super) health: Health,
    pub(super) leader: LeaderElectionConfig,
    pub(super) signals: bool,
    pub(super) grace: Duration,
    pub(super) endpoints: crate::serve::Limits,
    pub(super) cache_trim: crate::cache::CacheTrim,
    pub(super) cache_layout: crate::cache::CacheLayout,
    pub(super) memory_release: crate::memory::MemoryRelease,
    pub(super) sharding: Option<Sharding>,
    pub(super) webhook_server: Option<crate::webhook::WebhookServer>,
    /// With managed webhook certificates: what renews them.
    pub(super) cert_rotator: Option<crate::webhook::certs::CertRotator>,
}

impl Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("name", &self.name)
            .field("controllers", &self.controllers.len())
            .finish_non_exhaustive()
    }
}

/// Asks a running [`Manager`] to shut down gracefully, as SIGTERM does.
#[derive(Clone, Debug)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    /// Stops the manager: no new reconciles start, in-flight ones finish
    /// (within the grace period), the leader lease is released.
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

impl Manager {
    /// The client every controller uses.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The frozen feature gates.
    pub fn gates(&self) -> &FeatureGates {
        self.config.gates()
    }

    /// The loaded configuration: gates, strategy table, warnings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The metrics the `/metrics` endpoint serves.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// Where `/metrics` listens, if enabled.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// Where `/healthz` and `/readyz` listen, if enabled.
    pub fn health_address(&self) -> Option<SocketAddr> {
        self.health_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// This replica's place in the shard ring, when `--shards` is on.
    pub fn sharding(&self) -> Option<ShardHandle> {
        self.sharding.as_ref().map(Sharding::handle)
    }

    /// Where the webhook server listens, if webhooks are registered and
    /// `--webhook-bind-address` is not 0.
    pub fn webhook_address(&self) -> Option<SocketAddr> {
        self.webhook_server.as_ref().and_then(|s| s.local_addr())
    }

    /// The webhook server's counters and latencies, if it runs; they are
    /// part of [`metrics`](Self::metrics) and the `/metrics` endpoint too.
    pub fn webhook_metrics(&self) -> Option<Arc<crate::webhook::WebhookMetrics>> {
        self.webhook_server.as_ref().map(|s| s.metrics())
    }

    /// A handle that stops [`run`](Self::run) gracefully.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shutdown.clone())
    }

    /// A context for `K` outside any controller (for setup code and tests).
    /// Its [`cached`](Context::cached) reads see the shared cache of the
    /// first controller of `K` added before this call, if any.
    pub fn context<K>(&self) -> Context<K>
    where
        K: Object,
    {
        self.context_with(())
    }

    /// A context for `K` of dynamic type `dyntype` (a
    /// [`DynamicObject`](kube::core::DynamicObject)'s [`ApiResource`](kube::core::ApiResource)),
    /// as [`context`](Self::context).
    pub fn context_with<K>(&self, dyntype: K::DynamicType) -> Context<K>
    where
        K: AnyObject,
    {
        let resource = kube::core::ApiResource::erase::<K>(&dyntype);
        let context = Context::new(
            self.client.clone(),
            self.config.gates().clone(),
            self.writes.clone(),
            self.recorder.clone(),
            dyntype,
        );
        match self.writes.caches().first_store::<K>(&resource) {
            Some(store) => context.with_store(store),
            None => context,
        }
    }

    /// Adds a controller: `more` are further namespaces' `Api`s whose
    /// objects share `api`'s cache; `dyntype` is `K`'s dynamic type.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn install<K, R>(
        &mut self,
        name: &str,
        api: Api<K>,
        more: Vec<Api<K>>,
        dyntype: K::DynamicType,
        reconciler: R,
        parts: Parts<K, R::Error>,
    ) where
        K: AnyObject,
        R: Reconciler<K>,
    {
        let resource = kube::core::ApiResource::erase::<K>(&dyntype);
        if let Some(sharding) = self.sharding.as_mut() {
            sharding.watch(&resource, api.namespace(), api.resource_url());
        }
        let shard = self.sharding.as_ref().map(Sharding::gate);
        let mut context = self.context_with::<K>(dyntype.clone());
        // One watch and one store per type, scope and selection, shared by
        // every controller (and re-read) that needs the same objects. A
        // sharded replica's selection (in `label` mode, its shard's label)
        // is known only once it has joined its ring, when the watch starts.
        let selection = Selection::default()
            .with_labels(parts.labels)
            .with_fields(parts.fields);
        let selection = match &shard {
            None => selection,
            Some(gate) => {
                let gate = gate.clone();
                let changed = gate.clone();
                selection
                    .with_shard(
                        "shard",
                        Arc::new(move || crate::sharding::hooks::watcher_config(Some(&gate))),
                    )
                    .with_shard_changes(
                        Arc::new(move || crate::sharding::hooks::selector_changes(&changed)),
                        self.client.clone(),
                    )
            }
        };
        let cache = self.shared_cache(api, more, selection, &dyntype);
        context = context.with_store(cache.store());
        let backoff = parts.backoff;
        let policy = parts.policy.unwrap_or_else(|| {
            Box::new(move |_: &K, _: &R::Error, attempts| Action::requeue(backoff.delay(attempts)))
        });
        let shared = Arc::new(Shared {
            reconciler,
            context,
            counters: self.metrics.controller(name),
            attempts: Attempts::default(),
            policy,
            name: name.to_owned(),
            shard: shard.as_ref().map(crate::sharding::hooks::Seat::at),
            fresh: parts
                .read_your_writes
                .then(|| crate::controller::FreshGate {
                    own: self.writes.own_writes().clone(),
                    caches: self.writes.caches().clone(),
                    resource: crate::cache::label_of(&resource),
                    limit: crate::controller::FreshGate::LIMIT,
                }),
        });
        self.controllers.push(pending(
            cache,
            shared,
            parts.predicate,
            parts.concurrency,
            parts.triggers,
        ));
    }
}
