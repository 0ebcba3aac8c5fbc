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
    /// The secure metrics endpoint's certificate cannot be loaded or made.
    #[error("metrics certificate {} (--metrics-cert-dir): {message}", path.display())]
    MetricsCertificate {
        /// The file at fault, in `--metrics-cert-dir`.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
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
    /// `--explain` was given to [`ManagerBuilder::build`](crate::manager::ManagerBuilder::build),
    /// which cannot print; [`ManagerBuilder::build_or_explain`](crate::manager::ManagerBuilder::build_or_explain)
    /// returns the explanation for the binary to print.
    #[error(
        "--explain was given: build the manager with `build_or_explain` and print the explanation it returns"
    )]
    ExplainRequested,
    /// A second index of one name for one type
    /// ([`Manager::index`](crate::Manager::index)).
    #[error("an index `{index}` of {type_name} already exists")]
    DuplicateIndex {
        /// The index's name.
        index: String,
        /// The indexed Rust type.
        type_name: &'static str,
    },
    /// A controller's selection, predicate or error policy is invalid or
    /// impossible; the message lists every problem.
    #[error("controller `{controller}` is invalid: {problems}")]
    InvalidController {
        /// The controller's name.
        controller: String,
        /// Each problem with the value at fault, `; `-separated.
        problems: String,
    },
    /// The webhook server could not start.
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
}

/// `error` and its sources, outermost first, joined by `: ` — what a log
/// line needs to name the cause. A source whose message the previous one
/// already prints (`{0}`, `transparent`) is not repeated.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut last = text.clone();
    let mut source = error.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !last.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        last = message;
        source = cause.source();
    }
    text
}

/// Whether `error` is, at any depth, a write that met a conflict under the
/// `requeue` conflict policy: the controller reconciles the object afresh,
/// as that policy intends, so it is no failure to warn about.
pub(crate) fn is_conflict_requeue(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(concord_strategies::Error::Conflict { .. }) =
            e.downcast_ref::<concord_strategies::Error>()
        {
            return true;
        }
        current = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use concord_strategies::ObjectKey;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("writing the status of widget w failed")]
        Status(#[source] concord_strategies::Error),
        #[error("wrapped: {0}")]
        Inline(#[source] std::io::Error),
    }

    fn conflict() -> concord_strategies::Error {
        concord_strategies::Error::Conflict {
            object: ObjectKey::new("widgets", Some("ns"), "w"),
        }
    }

    #[test]
    fn chain_names_every_cause_once() {
        let error = crate::finalizer::FinalizerError::Handler(Outer::Status(conflict()));
        assert_eq!(
            chain(&error),
            "reconcile handler failed: writing the status of widget w failed: \
             conflict writing widgets ns/w: it changed since it was read"
        );
        let inline = Outer::Inline(std::io::Error::other("disk full"));
        assert_eq!(chain(&inline), "wrapped: disk full");
    }

    #[test]
    fn a_conflict_under_requeue_is_recognised_at_any_depth() {
        let nested = crate::finalizer::FinalizerError::Handler(Outer::Status(conflict()));
        assert!(is_conflict_requeue(&nested));
        let exhausted = concord_strategies::Error::ConflictRetriesExhausted {
            object: ObjectKey::new("widgets", Some("ns"), "w"),
            attempts: 5,
        };
        assert!(
            !is_conflict_requeue(&exhausted),
            "retries ran out: a failure"
        );
        assert!(!is_conflict_requeue(&Outer::Inline(std::io::Error::other(
            "x"
        ))));
    }
}
