use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use concord_featuregates::FeatureRegistry;
use kube::Client;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::watch;

use super::Manager;
use super::connection::{candidate_identity, connect, pod_namespace};
use crate::http::{bind, parse_bind};
use crate::leader::LeaderElectionConfig;
use crate::sharding::{self, Sharding};
use crate::writes::WriteRegistry;
use crate::{
    Error, ManagerArgs, cache::CacheLayout, cache::CacheTrim, client::ClientCounters,
    client::throttle_aware_client, memory::MemoryRelease, metrics::Metrics,
};

mod webhooks;

/// Builds a [`Manager`]: flags, the author's feature gates, optionally a
/// client of the caller's making.
#[must_use]
pub struct ManagerBuilder {
    name: String,
    args: ManagerArgs,
    registry: FeatureRegistry,
    client: Option<Client>,
    kube_config: Option<kube::Config>,
    leader: LeaderElectionConfig,
    signals: bool,
    grace: Duration,
    endpoints: crate::serve::Limits,
    reread_wait: Duration,
    cache_trim: CacheTrim,
    cache_layout: CacheLayout,
    memory_release: MemoryRelease,
    /// Secure metrics set here: the cert dir (`None`: self-signed).
    secure_metrics: Option<Option<std::path::PathBuf>>,
    /// How long a secure-metrics decision is reused, and how many are kept.
    review_cache: (Duration, usize),
    /// The watchdog's tick and how old a tick may get.
    watchdog: (Duration, Duration),
    // Webhooks (framework/src/webhook): served beside the controllers.
    webhooks: Option<crate::webhook::Webhooks>,
    /// Webhook certificates the manager makes itself.
    managed_certificates: Option<crate::webhook::ManagedCertificates>,
    /// What bounds a client of the webhook port; validated by `build`.
    webhook_limits: crate::webhook::WebhookLimits,
}

impl Debug for ManagerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerBuilder")
            .field("name", &self.name)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

impl ManagerBuilder {
    /// Uses these flags (usually parsed with clap) instead of the defaults.
    /// An empty `--leader-election-id` (its default) becomes the
    /// operator's name.
    pub fn with_args(mut self, args: ManagerArgs) -> Self {
        self.args = with_default_election_id(args, &self.name);
        self
    }

    /// Uses this registry, holding the author's own gates; concord's gates
    /// are added to it by [`build`](Self::build).
    pub fn with_registry(mut self, registry: FeatureRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Uses this client instead of `--kubeconfig`, `$KUBECONFIG`,
    /// `~/.kube/config` or the in-cluster configuration.
    ///
    /// # Caveats
    ///
    /// A client of your making retries `429` answers inside kube, where the
    /// manager cannot count them; prefer [`with_kube_config`](Self::with_kube_config).
    pub fn with_client(mut self, client: Client) -> Self {
        self.client = Some(client);
        self
    }

    /// Connects with this configuration instead of `--kubeconfig`,
    /// `$KUBECONFIG`, `~/.kube/config` or the in-cluster configuration,
    /// through a
    /// [`throttle_aware_client`](crate::client::throttle_aware_client) whose
    /// retried 429/503/504 answers show in the metrics.
    pub fn with_kube_config(mut self, config: kube::Config) -> Self {
        self.kube_config = Some(config);
        self
    }

    /// Leader-election timings (defaults: 15 s lease, 10 s renew deadline, 2 s retry).
    pub fn with_leader_election_config(mut self, config: LeaderElectionConfig) -> Self {
        self.leader = config;
        self
    }

    /// Whether [`Manager::run`] stops on SIGTERM and SIGINT (default: yes).
    pub fn with_signal_handling(mut self, on: bool) -> Self {
        self.signals = on;
        self
    }

    /// How long a client of the metrics and health endpoints may take to
    /// send a request's headers, from the moment the connection is ready
    /// for one (default 10 s, at least 10 ms); a connection that takes
    /// longer is closed.
    pub fn with_endpoint_header_read_timeout(mut self, limit: Duration) -> Self {
        self.endpoints.header_read = limit.max(Duration::from_millis(10));
        self
    }

    /// How long a client of the metrics and health endpoints may take to
    /// send a request's body once its headers are in (default 30 s, at
    /// least 10 ms); a late body is answered with a 408 and the connection
    /// closed.
    pub fn with_endpoint_body_read_timeout(mut self, limit: Duration) -> Self {
        self.endpoints.body_read = limit.max(Duration::from_millis(10));
        self
    }

    /// How many connections each of the metrics and health endpoints keeps
    /// open at once (default 256, at least 1); further clients wait in the
    /// listen backlog until one closes.
    pub fn with_endpoint_max_connections(mut self, limit: usize) -> Self {
        self.endpoints.connections = limit.max(1);
        self
    }

    /// Serves `/metrics` over HTTPS with every request authenticated and
    /// authorized through the API server, as `--metrics-secure` does (set
    /// here, it holds whatever [`with_args`](Self::with_args) says):
    /// the certificate is `tls.crt` and `tls.key` in `cert_dir`, re-read
    /// when they change, or self-signed for `localhost` when `None`.
    ///
    /// A request needs a bearer token the API server accepts (a
    /// TokenReview; otherwise `401`) whose user may `get` the request's
    /// non-resource path, `/metrics` (a SubjectAccessReview; otherwise
    /// `403`). A request that cannot be reviewed is refused with `503`.
    /// The operator's identity needs `create` on `tokenreviews` and
    /// `subjectaccessreviews` ([`Permissions::secure_metrics`](crate::rbac::Permissions::secure_metrics)).
    pub fn with_secure_metrics(mut self, cert_dir: Option<std::path::PathBuf>) -> Self {
        self.secure_metrics = Some(cert_dir);
        self
    }

    /// How long a secure-metrics decision (allowed, 401 or 403) is reused
    /// for the same token and path (default 10 s; zero reviews every
    /// request) and how many decisions are kept (default 1,024, at least 1).
    pub fn with_metrics_review_cache(mut self, ttl: Duration, entries: usize) -> Self {
        self.review_cache = (ttl, entries.max(1));
        self
    }

    /// How often the liveness watchdog ticks (default 1 s, at least 10 ms)
    /// and how old its last tick may be before `/healthz` fails (default
    /// 30 s, at least twice the tick): a runtime whose workers are all
    /// blocked polls the tick late, and the kubelet restarts the pod.
    pub fn with_watchdog(mut self, every: Duration, stale_after: Duration) -> Self {
        let every = every.max(Duration::from_millis(10));
        self.watchdog = (every, stale_after.max(every.saturating_mul(2)));
        self
    }

    /// How long shutdown waits for in-flight reconciles before abandoning
    /// them (default 30 s).
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How long a write's re-read after a `409` waits for the shared watch
    /// cache to hold a newer copy before it sends a `GET` (default
    /// [`DEFAULT_FRESH_WAIT`](concord_strategies::DEFAULT_FRESH_WAIT),
    /// 50 ms; zero looks once without waiting). See "Guarantees and failure
    /// modes" in the book.
    pub fn with_fresh_wait(mut self, wait: Duration) -> Self {
        self.reread_wait = wait;
        self
    }

    /// What the shared watch caches drop from each object before storing
    /// it (default [`CacheTrim::default`]: `managedFields` and the
    /// last-applied annotation, each kept for a resource whose strategies
    /// read it). [`CacheTrim::NONE`] keeps objects whole, for reconcilers
    /// that read either field from [`Context::cached`](crate::Context::cached)
    /// or the object they are given.
    pub fn with_cache_trim(mut self, trim: CacheTrim) -> Self {
        self.cache_trim = trim;
        self
    }

    /// How the shared watch caches hold their objects. The default,
    /// [`CacheLayout::Compact`], keeps each as compact JSON, a fraction of
    /// the memory, and decodes a copy for each read (a controller takes,
    /// `Context::cached`, a re-read); [`CacheLayout::Decoded`] keeps them
    /// typed, as kube-runtime's store does, and reads cost nothing: for a
    /// reconciler that scans the whole store often. The book's "The
    /// shared cache and memory" has the figures.
    pub fn with_cache_layout(mut self, layout: CacheLayout) -> Self {
        self.cache_layout = layout;
        self
    }

    /// When the manager gives the memory its allocator holds free back to
    /// the system: by default ([`MemoryRelease::default`]) once
    /// reconciles have stopped for a second, on glibc; see "The
    /// allocator" in the book's shared-cache chapter for the figures.
    pub fn with_memory_release(mut self, release: MemoryRelease) -> Self {
        self.memory_release = release;
        self
    }

    /// Loads the configuration, resolves the strategy table, connects, and
    /// binds the metrics and health endpoints; or, with `--explain` (or
    /// `--explain-yaml`), returns the effective gates and strategy table with
    /// their reasons for the binary to print, as Kubernetes components do
    /// with `--version`. No cluster is needed to explain.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), concord::Error> {
    /// use concord::{manager::Built, Manager};
    /// let manager = match Manager::builder("demo").build_or_explain().await? {
    ///     Built::Manager(manager) => manager,
    ///     Built::Explained(text) => {
    ///         print!("{text}");
    ///         return Ok(());
    ///     }
    /// };
    /// # let _ = manager;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    pub async fn build_or_explain(self) -> Result<Built, Error> {
        if self.args.wants_explain() {
            let config = self.args.load_config(self.registry)?;
            let explanation = config.explain();
            let text = if self.args.explain_yaml {
                explanation.to_yaml()
            } else {
                let namespace = self
                    .args
                    .leader_election_namespace
                    .clone()
                    .unwrap_or_else(pod_namespace);
                format!(
                    "{explanation}{}",
                    sharding::explain(
                        self.args.shards,
                        &self.name,
                        self.args.shard_ring_name(),
                        &namespace,
                        &self.leader
                    )
                )
            };
            return Ok(Built::Explained(text));
        }
        self.build().await.map(|m| Built::Manager(Box::new(m)))
    }

    /// Loads the configuration, resolves the strategy table, connects, and
    /// binds the metrics and health endpoints.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] listing every configuration problem with its
    /// source, [`Error::Client`], [`Error::BadAddress`] or [`Error::Bind`];
    /// [`Error::ExplainRequested`] when `--explain` was given, which only
    /// [`build_or_explain`](Self::build_or_explain) answers;
    /// [`Error::ShardingConfig`] when `--shards` is combined with
    /// `--leader-elect` or with the `locked` strategy, or the lease timings
    /// leave no margin; [`Error::Webhook`] with
    /// [`WebhookError::Limits`](crate::webhook::WebhookError::Limits) when
    /// a [`with_webhook_limits`](Self::with_webhook_limits) value is out of
    /// range.
    pub async fn build(mut self) -> Result<Manager, Error> {
        if self.args.wants_explain() {
            return Err(Error::ExplainRequested);
        }
        let registry = std::mem::replace(&mut self.registry, FeatureRegistry::new());
        let config = self.args.load_config(registry)?;
        // Checked before anything connects, so a bad value fails at once.
        self.webhook_limits.validate()?;
        super::checks::check_sharding(&self.args, &config)?;
        if self.args.shards.is_on() {
            sharding::validate(&self.leader)?;
        }
        super::checks::warn_if_unsafe_for_replicas(
            &config,
            self.args.leader_elect || self.args.shards.is_on(),
        );

        let metrics_at = parse_bind("--metrics-bind-address", &self.args.metrics_bind_address)?;
        let health_at = parse_bind(
            "--health-probe-bind-address",
            &self.args.health_probe_bind_address,
        )?;
        let counters = Arc::new(ClientCounters::default());
        let (client, kube_config) = match (self.client.take(), self.kube_config.take()) {
            (Some(client), _) => (client, None),
            (None, Some(kube_config)) => (
                throttle_aware_client(kube_config.clone(), counters.clone()).map_err(|e| {
                    Error::Client {
                        source_name: "the given configuration".into(),
                        source: Box::new(e),
                    }
                })?,
                Some(kube_config),
            ),
            (None, None) => {
                let (client, config) =
                    connect(self.args.kubeconfig.as_deref(), counters.clone()).await?;
                (client, Some(config))
            }
        };
        let secure_dir = match &self.secure_metrics {
            Some(dir) => Some(dir.clone().or_else(|| self.args.metrics_cert_dir.clone())),
            None if self.args.metrics_secure => Some(self.args.metrics_cert_dir.clone()),
            None => None,
        };
        let metrics_secure = match (secure_dir, metrics_at) {
            (Some(dir), Some(_)) => Some((
                Arc::new(crate::secure::MetricsTls::load(dir.as_deref())?),
                // The client before any write deadline: reviews are reads
                // in all but verb.
                Arc::new(crate::secure::Reviewer::new(
                    client.clone(),
                    self.review_cache.0,
                    self.review_cache.1,
                )),
            )),
            _ => None,
        };
        // Sharded: a write sent just before the fence must not land after
        // the Lease may have expired (sharding/deadline.rs).
        let client = if self.args.shards.is_on() {
            sharding::with_write_deadline(client, sharding::write_deadline(&self.leader))
        } else {
            client
        };
        // `selector` sharding: the caches' watches carry their replica's
        // shard selector through this client (sharding/selectors.rs).
        let selectors = self
            .args
            .shards
            .may_select()
            .then(|| Arc::new(sharding::Selectors::default()));
        let client = match &selectors {
            Some(selectors) => sharding::with_shard_selectors(client, selectors.clone()),
            None => client,
        };
        let writes = Arc::new(
            WriteRegistry::new(
                client.clone(),
                config.strategies().clone(),
                self.name.clone(),
            )
            .with_fresh_wait(self.reread_wait),
        );
        let metrics = Arc::new(Metrics::new(writes.clone(), counters));
        let caches = writes.caches().clone();
        let own = writes.own_writes().clone();
        metrics.register(|registry| {
            registry.register_collector(Box::new(crate::cache::CacheSizes(caches)));
            registry.register_collector(Box::new(crate::own_writes::RecordsHeld(own)));
        });
        let metrics_listener = match metrics_at {
            Some(at) => Some(bind(at, "metrics").await?),
            None => None,
        };
        let health_listener = match health_at {
            Some(at) => Some(bind(at, "health probes").await?),
            None => None,
        };
        let (webhook_server, cert_rotator) = self.bind_webhooks(&client, &writes).await?;
        if let Some(server) = &webhook_server {
            metrics.register_collector(server.metrics().collector());
        }
        let sharding = self.args.shards.is_on().then(|| {
            let namespace = self
                .args
                .leader_election_namespace
                .clone()
                .unwrap_or_else(pod_namespace);
            // Membership gets its own connection when it can, so a renewal
            // never queues behind the reconciles' requests.
            let lease_client = kube_config
                .and_then(|c| throttle_aware_client(c, Arc::default()).ok())
                .unwrap_or_else(|| client.clone());
            Sharding::new(
                self.args.shards,
                self.args.shard_by,
                lease_client,
                &namespace,
                &self.name,
                self.args.shard_ring_name(),
                candidate_identity(),
                self.leader,
                selectors,
            )
        });
        if let Some(sharding) = &sharding {
            metrics.register_collector(sharding.stats());
        }
        let (shutdown, _) = watch::channel(false);
        Ok(Manager {
            webhook_server,
            cert_rotator,
            sharding,
            recorder: Recorder::new(
                client.clone(),
                Reporter {
                    controller: self.name.clone(),
                    instance: None,
                },
            ),
            name: self.name,
            args: self.args,
            client,
            config,
            writes,
            metrics,
            metrics_listener,
            metrics_secure,
            health_listener,
            watches: Vec::new(),
            standing_by: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            controllers: Vec::new(),
            shutdown: Arc::new(shutdown),
            health: crate::health::Health {
                readiness: crate::health::Readiness::default(),
                watchdog: Arc::new(crate::health::Watchdog::new(
                    self.watchdog.0,
                    self.watchdog.1,
                )),
            },
            leader: self.leader,
            signals: self.signals,
            grace: self.grace,
            endpoints: self.endpoints,
            cache_trim: self.cache_trim,
            memory_release: self.memory_release,
            cache_layout: self.cache_layout,
        })
    }
}

/// What [`ManagerBuilder::build_or_explain`] produced.
#[derive(Debug)]
#[must_use]
pub enum Built {
    /// A manager, ready for controllers and [`Manager::run`].
    Manager(Box<Manager>),
    /// `--explain` or `--explain-yaml` was given: the binary prints this
    /// text and exits successfully; nothing was connected or bound.
    Explained(String),
}

impl Manager {
    /// Starts building a manager; `name` is the field manager of its writes
    /// and the reporting controller of its events.
    ///
    /// `name` is also the default `--leader-election-id` (the Lease's
    /// name) and shard ring, so two operators on defaults in one namespace
    /// elect their leaders apart.
    pub fn builder(name: impl Into<String>) -> ManagerBuilder {
        let name = name.into();
        ManagerBuilder {
            args: with_default_election_id(ManagerArgs::new(), &name),
            name,
            registry: FeatureRegistry::new(),
            client: None,
            kube_config: None,
            leader: LeaderElectionConfig::default(),
            signals: true,
            grace: Duration::from_secs(30),
            endpoints: crate::serve::Limits::default(),
            reread_wait: concord_strategies::DEFAULT_FRESH_WAIT,
            cache_trim: CacheTrim::default(),
            memory_release: MemoryRelease::default(),
            cache_layout: CacheLayout::default(),
            watchdog: (Duration::from_secs(1), Duration::from_secs(30)),
            secure_metrics: None,
            review_cache: (crate::secure::DEFAULT_TTL, crate::secure::DEFAULT_ENTRIES),
            webhooks: None,
            managed_certificates: None,
            webhook_limits: crate::webhook::WebhookLimits::default(),
        }
    }
}

/// `args` with the operator's name as the Lease name when none was given.
fn with_default_election_id(mut args: ManagerArgs, name: &str) -> ManagerArgs {
    if args.leader_election_id.is_empty() {
        args.leader_election_id = name.to_owned();
    }
    args
}
