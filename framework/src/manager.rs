use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use concord_featuregates::{Config, FeatureGates, FeatureRegistry, StrategyName};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::Controller;
use kube::runtime::events::{Recorder, Reporter};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::controller::{Backoff, Pending, Shared, pending};
use crate::http::{Endpoints, bind, parse_bind, serve};
use crate::leader::{LeaderElectionConfig, LeaderElector};
use crate::writes::WriteRegistry;
use crate::{
    ClientCounters, Context, Error, ManagerArgs, Metrics, Object, Reconciler, throttle_aware_client,
};

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
    // Webhooks (framework/src/webhook): served beside the controllers.
    webhooks: Option<crate::webhook::Webhooks>,
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
    pub fn with_args(mut self, args: ManagerArgs) -> Self {
        self.args = args;
        self
    }

    /// Uses this registry, holding the author's own gates; concord's gates
    /// are added to it by [`build`](Self::build).
    pub fn with_registry(mut self, registry: FeatureRegistry) -> Self {
        self.registry = registry;
        self
    }

    /// Uses this client instead of `--kubeconfig`, `$KUBECONFIG` or the
    /// in-cluster configuration.
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
    /// `$KUBECONFIG` or the in-cluster configuration, through a
    /// [`throttle_aware_client`](crate::throttle_aware_client) whose
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

    /// How long shutdown waits for in-flight reconciles before abandoning
    /// them (default 30 s).
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Serves these webhooks over HTTPS on `--webhook-bind-address`, with
    /// the certificates in `--webhook-cert-dir`, on every replica (leader
    /// or not) until [`Manager::run`] returns.
    pub fn with_webhooks(mut self, webhooks: crate::webhook::Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// Loads the configuration, resolves the strategy table, connects, and
    /// binds the metrics and health endpoints.
    ///
    /// With `--explain` (or `--explain-yaml`) it prints the effective gates
    /// and strategy table with their reasons and exits the process, as
    /// Kubernetes components do with `--version`; no cluster is needed.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] listing every configuration problem with its
    /// source, [`Error::Client`], [`Error::BadAddress`] or [`Error::Bind`].
    pub async fn build(self) -> Result<Manager, Error> {
        let config = self.args.load_config(self.registry)?;
        if self.args.wants_explain() {
            let explanation = config.explain();
            if self.args.explain_yaml {
                print!("{}", explanation.to_yaml());
            } else {
                print!("{explanation}");
            }
            std::process::exit(0);
        }
        warn_if_unsafe_for_replicas(&config, self.args.leader_elect);

        let metrics_at = parse_bind("--metrics-bind-address", &self.args.metrics_bind_address)?;
        let health_at = parse_bind(
            "--health-probe-bind-address",
            &self.args.health_probe_bind_address,
        )?;
        let counters = Arc::new(ClientCounters::default());
        let client = match (self.client, self.kube_config) {
            (Some(client), _) => client,
            (None, Some(kube_config)) => throttle_aware_client(kube_config, counters.clone())
                .map_err(|e| Error::Client {
                    source_name: "the given configuration".into(),
                    source: Box::new(e),
                })?,
            (None, None) => connect(self.args.kubeconfig.as_deref(), counters.clone()).await?,
        };
        let writes = Arc::new(WriteRegistry::new(
            client.clone(),
            config.strategies().clone(),
            self.name.clone(),
        ));
        let metrics = Arc::new(Metrics::new(writes.clone(), counters));
        let metrics_listener = match metrics_at {
            Some(at) => Some(bind(at, "metrics").await?),
            None => None,
        };
        let health_listener = match health_at {
            Some(at) => Some(bind(at, "health probes").await?),
            None => None,
        };
        // Webhooks: bound now so that a bad certificate fails the build.
        let webhook_server = match (
            self.webhooks,
            parse_bind("--webhook-bind-address", &self.args.webhook_bind_address)?,
        ) {
            (Some(webhooks), Some(at)) if !webhooks.is_empty() => Some(
                crate::webhook::WebhookServer::bind(at, &self.args.webhook_cert_dir, webhooks)
                    .await?,
            ),
            _ => None,
        };
        let (shutdown, _) = watch::channel(false);
        Ok(Manager {
            webhook_server,
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
            health_listener,
            controllers: Vec::new(),
            shutdown: Arc::new(shutdown),
            ready: Arc::new(AtomicBool::new(false)),
            leader: self.leader,
            signals: self.signals,
            grace: self.grace,
        })
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
/// manager.add_controller("configmaps", api, Labeller, |c| c);
/// manager.run().await
/// # }
/// ```
pub struct Manager {
    name: String,
    args: ManagerArgs,
    client: Client,
    config: Config,
    writes: Arc<WriteRegistry>,
    metrics: Arc<Metrics>,
    recorder: Recorder,
    metrics_listener: Option<TcpListener>,
    health_listener: Option<TcpListener>,
    controllers: Vec<Pending>,
    shutdown: Arc<watch::Sender<bool>>,
    ready: Arc<AtomicBool>,
    leader: LeaderElectionConfig,
    signals: bool,
    grace: Duration,
    webhook_server: Option<crate::webhook::WebhookServer>,
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
    /// Starts building a manager; `name` is the field manager of its writes
    /// and the reporting controller of its events.
    pub fn builder(name: impl Into<String>) -> ManagerBuilder {
        ManagerBuilder {
            name: name.into(),
            args: ManagerArgs::new(),
            registry: FeatureRegistry::new(),
            client: None,
            kube_config: None,
            leader: LeaderElectionConfig::default(),
            signals: true,
            grace: Duration::from_secs(30),
            webhooks: None,
        }
    }

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

    /// Where the webhook server listens, if webhooks are registered and
    /// `--webhook-bind-address` is not 0.
    pub fn webhook_address(&self) -> Option<SocketAddr> {
        self.webhook_server.as_ref().and_then(|s| s.local_addr())
    }

    /// The webhook server's counters and latencies, if it runs.
    pub fn webhook_metrics(&self) -> Option<Arc<crate::webhook::WebhookMetrics>> {
        self.webhook_server.as_ref().map(|s| s.metrics())
    }

    /// A handle that stops [`run`](Self::run) gracefully.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.shutdown.clone())
    }

    /// A context for `K` outside any controller (for setup code and tests).
    pub fn context<K>(&self) -> Context<K>
    where
        K: Object,
    {
        Context::new(
            self.client.clone(),
            self.config.gates().clone(),
            self.writes.clone(),
            self.recorder.clone(),
        )
    }

    /// Adds a controller for `K` listing and watching through `api`.
    /// `customize` gets the kube-runtime [`Controller`] to add owned and
    /// watched resources (`.owns(..)`, `.watches(..)`) or a concurrency
    /// limit (`.with_config(..)`).
    pub fn add_controller<K, R, F>(&mut self, name: &str, api: Api<K>, reconciler: R, customize: F)
    where
        K: Object,
        R: Reconciler<K>,
        F: FnOnce(Controller<K>) -> Controller<K> + Send + 'static,
    {
        let shared = Arc::new(Shared {
            reconciler,
            context: self.context::<K>(),
            counters: self.metrics.controller(name),
            backoff: Backoff::default(),
            name: name.to_owned(),
        });
        self.controllers.push(pending(api, shared, customize));
    }

    /// Runs every controller until shutdown (SIGTERM, SIGINT or a
    /// [`ShutdownHandle`]) or, with leader election, until leadership is lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaderElection`] when the lease is lost; the controllers are
    /// stopped gracefully first.
    pub async fn run(mut self) -> Result<(), Error> {
        if let Some(listener) = self.metrics_listener.take() {
            tokio::spawn(serve(listener, Endpoints::Metrics(self.metrics.clone())));
        }
        if let Some(listener) = self.health_listener.take() {
            tokio::spawn(serve(listener, Endpoints::Health(self.ready.clone())));
        }
        if self.signals {
            tokio::spawn(stop_on_signals(self.shutdown_handle()));
        }
        // Webhooks stop when `run` returns (the sender drops), not at the
        // shutdown signal: the controllers' last writes may need them.
        let (_webhooks_running, webhooks_stop) = tokio::sync::oneshot::channel::<()>();
        let serving_webhooks = self.webhook_server.is_some();
        if let Some(server) = self.webhook_server.take() {
            tokio::spawn(server.serve(async move {
                let _ = webhooks_stop.await;
            }));
        }
        self.ready.store(true, Ordering::Relaxed);
        let mut shutdown = self.shutdown.subscribe();
        let mut elector = if self.args.leader_elect {
            let namespace = self
                .args
                .leader_election_namespace
                .clone()
                .unwrap_or_else(pod_namespace);
            let identity = candidate_identity();
            let mut elector = LeaderElector::new(
                Api::<Lease>::namespaced(self.client.clone(), &namespace),
                self.args.leader_election_id.clone(),
                identity,
                self.leader,
            );
            tracing::info!(lease = %elector.lease_name(), "waiting for leadership");
            if !elector.acquire(&mut shutdown).await {
                return Ok(());
            }
            tracing::info!(lease = %elector.lease_name(), "became leader");
            Some(elector)
        } else {
            None
        };
        self.metrics.set_leader(true);

        let (done_tx, mut done_rx) = watch::channel(false);
        let grace = self.grace;
        let stop = self.shutdown.subscribe();
        let futures: Vec<_> = self
            .controllers
            .into_iter()
            .map(|start| start(stop.clone()))
            .collect();
        let controllers = async {
            let mut stop = stop.clone();
            tokio::select! {
                _ = futures::future::join_all(futures) => {}
                _ = async {
                    let _ = stop.wait_for(|s| *s).await;
                    tokio::time::sleep(grace).await;
                } => tracing::warn!("in-flight reconciles did not finish within the shutdown grace period; abandoning them"),
            }
            // Webhooks: a manager that serves them runs until told to stop,
            // even when its controllers are done (or it has none).
            if serving_webhooks {
                let _ = stop.clone().wait_for(|s| *s).await;
            }
            done_tx.send_replace(true);
        };
        let shutdown_tx = self.shutdown.clone();
        let metrics = self.metrics.clone();
        let holding = async {
            let Some(elector) = elector.as_mut() else {
                return Ok(());
            };
            let result = elector.hold(&mut done_rx).await;
            if result.is_err() {
                metrics.set_leader(false);
                shutdown_tx.send_replace(true);
            }
            result
        };
        let ((), held) = tokio::join!(controllers, holding);
        held
    }
}

async fn stop_on_signals(handle: ShutdownHandle) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
    }
    handle.shutdown();
}

fn warn_if_unsafe_for_replicas(config: &Config, leader_elect: bool) {
    if leader_elect {
        return;
    }
    let table = config.strategies();
    for row in table
        .rows()
        .iter()
        .chain(std::iter::once(table.default_row()))
    {
        let strategies = row.strategies();
        for operation in concord_featuregates::Operation::ALL {
            if strategies.strategy(operation) == StrategyName::Locked {
                tracing::warn!(
                    resource = row.resource().unwrap_or("(default)"),
                    %operation,
                    "the `locked` strategy only orders writes inside one process: run a single replica \
                     with --leader-elect, or choose `strict`, `update` or `apply`"
                );
                return;
            }
        }
    }
}

async fn connect(
    kubeconfig: Option<&std::path::Path>,
    counters: Arc<ClientCounters>,
) -> Result<Client, Error> {
    let fail = |name: String, e: Box<dyn std::error::Error + Send + Sync>| Error::Client {
        source_name: name,
        source: e,
    };
    let (name, config) = match kubeconfig {
        Some(path) => {
            let name = path.display().to_string();
            let kubeconfig =
                Kubeconfig::read_from(path).map_err(|e| fail(name.clone(), Box::new(e)))?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .map_err(|e| fail(name.clone(), Box::new(e)))?;
            (name, config)
        }
        None => {
            let name = "the environment".to_owned();
            let config = kube::Config::infer()
                .await
                .map_err(|e| fail(name.clone(), Box::new(e)))?;
            (name, config)
        }
    };
    throttle_aware_client(config, counters).map_err(|e| fail(name, Box::new(e)))
}

/// `hostname_<unique suffix>`, as controller-runtime does, so that several
/// managers in one process (tests) or one pod are distinct candidates.
fn candidate_identity() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}_{}-{nanos:x}-{}",
        hostname(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_owned())
        .unwrap_or_else(|_| "default".into())
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .unwrap_or_else(|| "concord".into())
}
