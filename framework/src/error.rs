use std::path::PathBuf;

/// What can go wrong while building or running a [`Manager`](crate::Manager).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration (YAML, environment, `--feature-gates`) is invalid;
    /// the message lists every problem with its source.
    #[error(transparent)]
    Config(#[from] concord_featuregates::ConfigError),
    /// A feature gate could not be registered.
    #[error("registering feature gates failed")]
    RegisterGates(#[source] concord_featuregates::RegistryError),
    /// No usable cluster configuration was found.
    #[error("cannot build a Kubernetes client from {source_name}")]
    Client {
        /// The kubeconfig path, or "the environment".
        source_name: String,
        /// The underlying error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A listener for metrics or health probes could not be bound.
    #[error("cannot listen on {address} for {what}")]
    Bind {
        /// The `--*-bind-address` value.
        address: String,
        /// `metrics` or `health probes`.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A bind address flag is not `host:port`, `:port` or `0`.
    #[error("invalid {flag} `{value}`: expected host:port, :port or 0 to disable")]
    BadAddress {
        /// The flag at fault.
        flag: &'static str,
        /// The value given.
        value: String,
    },
    /// Leader election failed or leadership was lost.
    #[error("leader election on lease {lease} failed: {message}")]
    LeaderElection {
        /// `namespace/name` of the Lease.
        lease: String,
        /// What happened.
        message: String,
    },
    /// A sharded replica lost its membership Lease; it stopped reconciling
    /// before the Lease could expire.
    #[error("shard membership on lease {lease} failed: {message}")]
    ShardMembership {
        /// `namespace/name` of the Lease.
        lease: String,
        /// What happened.
        message: String,
    },
    /// The sharding settings are impossible (`--shards`, lease timings).
    #[error("invalid sharding settings: {0}")]
    ShardingConfig(String),
    /// A configuration file named on the command line does not exist.
    #[error("config file {0} does not exist")]
    MissingConfigFile(PathBuf),
    /// `--explain` was given to [`ManagerBuilder::build`](crate::ManagerBuilder::build),
    /// which cannot print; [`ManagerBuilder::build_or_explain`](crate::ManagerBuilder::build_or_explain)
    /// returns the explanation for the binary to print.
    #[error(
        "--explain was given: build the manager with `build_or_explain` and print the explanation it returns"
    )]
    ExplainRequested,
    /// The webhook server could not start.
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
}
