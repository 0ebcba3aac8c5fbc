use std::path::PathBuf;

use concord_featuregates::{Config, ConfigLoader, FeatureRegistry, register_framework_gates};

use crate::Error;

/// The command-line flags every concord operator accepts, following
/// controller-runtime's habits. Flatten it into your own `clap` parser:
///
/// ```no_run
/// #[derive(clap::Parser)]
/// struct Cli {
///     #[command(flatten)]
///     manager: concord::ManagerArgs,
/// }
/// ```
#[derive(Clone, Debug, Default, clap::Args)]
#[non_exhaustive]
pub struct ManagerArgs {
    /// Path to a kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster configuration.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// YAML file with feature gates and the strategy table.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Feature gates to set, e.g. `A=true,B=false`; `AllAlpha` and `AllBeta` are accepted.
    #[arg(long = "feature-gates", default_value = "")]
    pub feature_gates: String,
    /// Address the Prometheus metrics endpoint binds to (`host:port`, `:port`, or 0 to disable).
    #[arg(long = "metrics-bind-address", default_value = "0")]
    pub metrics_bind_address: String,
    /// Serve metrics over HTTPS, each request authenticated with a
    /// TokenReview and authorized with a SubjectAccessReview (`get` on
    /// the `/metrics` non-resource URL).
    #[arg(long = "metrics-secure")]
    pub metrics_secure: bool,
    /// Directory holding the secure metrics endpoint's `tls.crt` and
    /// `tls.key`, re-read when they change; a self-signed certificate when
    /// not given.
    #[arg(long = "metrics-cert-dir")]
    pub metrics_cert_dir: Option<PathBuf>,
    /// Address the /healthz and /readyz endpoints bind to (`host:port`, `:port`, or 0 to disable).
    #[arg(long = "health-probe-bind-address", default_value = "0")]
    pub health_probe_bind_address: String,
    /// Run controllers only while holding the leader-election Lease.
    #[arg(long = "leader-elect")]
    pub leader_elect: bool,
    /// With `--leader-elect`: while waiting for the Lease, watch nothing
    /// and fill the caches on taking over (less memory and API load on a
    /// standby, a slower handover: the first list comes after the Lease).
    /// By default a standby keeps its caches filled, and takes over warm.
    #[arg(long = "cold-standby")]
    pub cold_standby: bool,
    /// Name of the leader-election Lease; defaults to the operator's name
    /// (the name given to `Manager::builder`), so two operators never share one.
    #[arg(
        long = "leader-election-id",
        default_value = "",
        hide_default_value = true
    )]
    pub leader_election_id: String,
    /// Namespace of the leader-election Lease; defaults to the pod's namespace, else `default`.
    #[arg(long = "leader-election-namespace")]
    pub leader_election_namespace: Option<String>,
    /// Divide the objects among the replicas: `hash` (each replica watches
    /// everything, reconciles its share), `label` (each watches only its
    /// shard's label, which a sharder writes), `selector` (each watches
    /// only its shard through the API server's shard selectors; nothing is
    /// written) or `auto` (`selector` where the server serves it, else
    /// `label`); `off` (default) runs every object here.
    #[arg(long = "shards", value_enum, default_value = "off")]
    pub shards: crate::sharding::ShardingMode,
    /// In `selector` mode, what the API server hashes to place an object:
    /// `uid` (default; objects spread evenly) or `namespace` (a
    /// namespace's objects stay on one replica).
    #[arg(long = "shard-by", value_enum, default_value = "uid")]
    pub shard_by: crate::sharding::ShardKey,
    /// Name of the shard ring; defaults to `--leader-election-id`. Replicas
    /// share a ring only when its name, the manager, `--shards` and the
    /// objects their controllers watch are all the same, so two deployments
    /// of one binary never assign each other's objects.
    #[arg(long = "shard-ring")]
    pub shard_ring: Option<String>,
    /// Address the webhook server binds to when webhooks are registered (`host:port`, `:port`, or 0 to disable).
    #[arg(long = "webhook-bind-address", default_value = ":9443")]
    pub webhook_bind_address: String,
    /// Directory holding the webhook server's `tls.crt` and `tls.key`, re-read when they change.
    #[arg(
        long = "webhook-cert-dir",
        default_value = "/tmp/k8s-webhook-server/serving-certs"
    )]
    pub webhook_cert_dir: PathBuf,
    /// Make the webhook certificates here instead of reading
    /// `--webhook-cert-dir`: a CA in the Secret `<SERVICE>-ca` of the pod's
    /// namespace, a serving certificate for the Service `SERVICE`, the CA
    /// written into the `caBundle` of the manager's own webhook
    /// configurations and CRD conversions, both renewed before they expire.
    #[arg(long = "webhook-cert-managed", value_name = "SERVICE")]
    pub webhook_cert_managed: Option<String>,
    /// Print the effective feature gates and strategy table with their reasons, then exit.
    #[arg(long)]
    pub explain: bool,
    /// Like --explain, but print YAML that can be fed back in with --config.
    #[arg(long = "explain-yaml")]
    pub explain_yaml: bool,
}

impl ManagerArgs {
    /// Arguments with every default, as if no flag was given.
    pub fn new() -> Self {
        ManagerArgs {
            feature_gates: String::new(),
            metrics_bind_address: "0".into(),
            health_probe_bind_address: "0".into(),
            webhook_bind_address: ":9443".into(),
            webhook_cert_dir: "/tmp/k8s-webhook-server/serving-certs".into(),
            ..Default::default()
        }
    }

    /// Whether `--explain` or `--explain-yaml` was given:
    /// [`ManagerBuilder::build_or_explain`](crate::manager::ManagerBuilder::build_or_explain)
    /// will return the configuration to print instead of a manager, so there
    /// is no need to connect first.
    pub fn wants_explain(&self) -> bool {
        self.explain || self.explain_yaml
    }

    /// Loads the configuration these flags name — defaults, the `--config`
    /// YAML file, environment variables, then `--feature-gates` — with
    /// concord's own gates registered beside the author's in `registry`, and
    /// resolves the strategy table. [`ManagerBuilder::build`](crate::manager::ManagerBuilder::build)
    /// does this first; call it directly to inspect the result without
    /// connecting (for example to derive RBAC rules).
    ///
    /// # Errors
    ///
    /// [`Error::MissingConfigFile`], [`Error::RegisterGates`], or
    /// [`Error::Config`] listing every problem with its source.
    pub fn load_config(&self, mut registry: FeatureRegistry) -> Result<Config, Error> {
        register_framework_gates(&mut registry).map_err(Error::RegisterGates)?;
        let mut loader = ConfigLoader::new().with_env();
        if let Some(path) = &self.config {
            if !path.is_file() {
                return Err(Error::MissingConfigFile(path.clone()));
            }
            loader = loader.with_file(path);
        }
        if !self.feature_gates.trim().is_empty() {
            loader = loader.with_feature_gates(self.feature_gates.clone());
        }
        Ok(loader.load(registry)?)
    }

    /// Sets `--config`.
    #[must_use]
    pub fn with_config(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = Some(path.into());
        self
    }

    /// Sets `--feature-gates`.
    #[must_use]
    pub fn with_feature_gates(mut self, gates: impl Into<String>) -> Self {
        self.feature_gates = gates.into();
        self
    }

    /// Sets `--leader-elect` and `--leader-election-id`.
    #[must_use]
    pub fn with_leader_election(
        mut self,
        id: impl Into<String>,
        namespace: impl Into<String>,
    ) -> Self {
        self.leader_elect = true;
        self.leader_election_id = id.into();
        self.leader_election_namespace = Some(namespace.into());
        self
    }

    /// Sets `--cold-standby`.
    #[must_use]
    pub fn with_cold_standby(mut self, cold: bool) -> Self {
        self.cold_standby = cold;
        self
    }

    /// Sets `--shards` and the namespace of the membership Leases
    /// (`--leader-election-namespace`).
    #[must_use]
    pub fn with_shards(
        mut self,
        mode: crate::sharding::ShardingMode,
        namespace: impl Into<String>,
    ) -> Self {
        self.shards = mode;
        self.leader_election_namespace = Some(namespace.into());
        self
    }

    /// Sets `--shard-by`.
    #[must_use]
    pub fn with_shard_by(mut self, key: crate::sharding::ShardKey) -> Self {
        self.shard_by = key;
        self
    }

    /// Sets `--shard-ring`.
    #[must_use]
    pub fn with_shard_ring(mut self, ring: impl Into<String>) -> Self {
        self.shard_ring = Some(ring.into());
        self
    }

    /// The shard ring's name: `--shard-ring`, else `--leader-election-id`
    /// (empty until [`Manager::builder`](crate::Manager::builder) fills in
    /// the operator's name).
    pub fn shard_ring_name(&self) -> &str {
        self.shard_ring
            .as_deref()
            .unwrap_or(&self.leader_election_id)
    }

    /// Sets `--metrics-secure`, and `--metrics-cert-dir` to `cert_dir`
    /// (`None`: a self-signed certificate).
    #[must_use]
    pub fn with_metrics_secure(mut self, cert_dir: Option<PathBuf>) -> Self {
        self.metrics_secure = true;
        self.metrics_cert_dir = cert_dir;
        self
    }

    /// Sets `--metrics-bind-address`.
    #[must_use]
    pub fn with_metrics_bind_address(mut self, address: impl Into<String>) -> Self {
        self.metrics_bind_address = address.into();
        self
    }

    /// Sets `--health-probe-bind-address`.
    #[must_use]
    pub fn with_health_probe_bind_address(mut self, address: impl Into<String>) -> Self {
        self.health_probe_bind_address = address.into();
        self
    }

    /// Sets `--webhook-bind-address` and `--webhook-cert-dir`.
    #[must_use]
    pub fn with_webhook_server(
        mut self,
        address: impl Into<String>,
        cert_dir: impl Into<PathBuf>,
    ) -> Self {
        self.webhook_bind_address = address.into();
        self.webhook_cert_dir = cert_dir.into();
        self
    }
}
