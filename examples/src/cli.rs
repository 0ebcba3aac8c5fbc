use std::path::PathBuf;

use concord::featuregates::Config;
use concord::{ManagerArgs, featuregates::FeatureRegistry, rbac::Permissions};
use kube::Client;

/// `--kubeconfig`'s help in the example operators: the demo mode and
/// `--serve` find their cluster differently.
pub const KUBECONFIG_HELP: &str = "Path to a kubeconfig. The demo runs on the embedded control plane without it ($KUBECONFIG is not read); with --serve it defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster configuration";

/// The command line the pod operators share: concord's manager flags plus
/// the namespace, the run mode and `--print-rbac`.
#[derive(Clone, Debug, clap::Args)]
pub struct ExampleArgs {
    /// concord's controller-runtime style flags.
    #[command(flatten)]
    pub manager: ManagerArgs,
    /// Namespace the operator watches (and the demo works in).
    #[arg(long, env = "WATCH_NAMESPACE")]
    pub namespace: Option<String>,
    /// Run as a long-lived operator, as in a Deployment: connect through
    /// `--kubeconfig`, else `$KUBECONFIG`, `~/.kube/config` or the
    /// in-cluster configuration,
    /// create no demo workload, stop on SIGTERM.
    #[arg(long)]
    pub serve: bool,
    /// Print the Role this operator needs under the configured strategies
    /// (YAML), then exit. No cluster is needed.
    #[arg(long = "print-rbac")]
    pub print_rbac: bool,
    /// The demo mode's consent to run on a cluster that is not on this
    /// machine.
    #[command(flatten)]
    pub consent: crate::RemoteConsent,
}

impl ExampleArgs {
    /// Uses `path` when `--config` was not given.
    #[must_use]
    pub fn with_default_config(mut self, path: impl Into<PathBuf>) -> Self {
        if self.manager.config.is_none() {
            self.manager.config = Some(path.into());
        }
        self
    }

    /// The namespace to work in: `--namespace`, `$WATCH_NAMESPACE`, else
    /// `fallback`.
    pub fn namespace_or(&self, fallback: &str) -> String {
        self.namespace
            .clone()
            .unwrap_or_else(|| fallback.to_owned())
    }
}

/// Loads the configuration exactly as the manager will (defaults, the
/// `--config` file, `CONCORD_*` variables, `--feature-gates`), to resolve
/// the strategy table without a cluster — for `--print-rbac` and tests.
///
/// # Errors
///
/// Every configuration problem, as the manager would report them.
pub fn load_config(args: &ManagerArgs, registry: FeatureRegistry) -> anyhow::Result<Config> {
    Ok(args.load_config(registry)?)
}

/// `permissions` as a Role manifest named `name` in `namespace`.
///
/// # Errors
///
/// When the Role cannot be serialised.
pub fn role_yaml(
    permissions: &Permissions<'_>,
    name: &str,
    namespace: &str,
) -> anyhow::Result<String> {
    Ok(serde_yaml::to_string(&permissions.role(name, namespace))?)
}

/// With `--webhook-cert-managed`: the rules the manager needs to make its
/// own webhook certificates, as a Role in `namespace` (the CA Secret) and a
/// ClusterRole (the `caBundle` writes), two YAML documents, each starting
/// with `---`.
///
/// # Errors
///
/// When the objects cannot be serialised.
pub fn managed_certificates_rbac_yaml(
    table: &concord::featuregates::StrategyTable,
    name: &str,
    namespace: &str,
) -> anyhow::Result<String> {
    let (namespaced, cluster) = Permissions::new(table)
        .managed_webhook_certificates()
        .cluster_scoped();
    let name = format!("{name}-webhook-certificates");
    let role = k8s_openapi::api::rbac::v1::Role {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.to_owned()),
            ..Default::default()
        },
        rules: Some(namespaced),
    };
    let cluster_role = k8s_openapi::api::rbac::v1::ClusterRole {
        metadata: kube::api::ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        rules: Some(cluster),
        ..Default::default()
    };
    Ok(format!(
        "---\n{}---\n{}",
        serde_yaml::to_string(&role)?,
        serde_yaml::to_string(&cluster_role)?
    ))
}

/// The client of the demo mode: `--kubeconfig`, else the embedded control
/// plane (kept alive by the returned [`crate::Connection`]); `$KUBECONFIG`
/// is ignored, and a remote server needs `--yes-create-pods-in`.
/// `None` in `--serve` mode, where the manager connects by itself, and
/// with `--explain`, where it prints the configuration without connecting.
///
/// # Errors
///
/// As [`crate::connect`].
pub async fn demo_connection(args: &ExampleArgs) -> anyhow::Result<Option<crate::Connection>> {
    if args.serve || args.manager.wants_explain() {
        return Ok(None);
    }
    let connection = crate::connect(args.manager.kubeconfig.clone(), &args.consent).await?;
    println!("connected to {}", connection.server);
    Ok(Some(connection))
}

/// The client of a demo connection, if any.
pub fn client_of(connection: &Option<crate::Connection>) -> Option<Client> {
    connection.as_ref().map(|c| c.client.clone())
}
