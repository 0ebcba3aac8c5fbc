//! {{name}}: a Kubernetes operator made with concord.
//!
//! ```text
//! cargo run -- --dev                  # on an embedded control plane, with config/samples
//! cargo test                          # the operator against the embedded control plane
//! cargo run -- --kubeconfig PATH      # on a cluster (install deploy/crds.yaml first)
//! cargo concord generate              # deploy/: kustomize base and Helm chart from this code
//! cargo concord explain               # the feature gates and strategy table in effect
//! ```
//!
//! `cargo concord create api` adds kinds: it writes `src/<kind>.rs` and
//! registers it below, at the `+concord:scaffold` markers. Keep them.

use std::path::{Path, PathBuf};

use clap::Parser;
use concord::featuregates::{FeatureRegistry, StrategyTable};
use concord::manager::Built;
use concord::rbac::Permissions;
use concord::sharding::ShardingMode;
use concord::{Manager, ManagerArgs};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::ObjectMeta;

// +concord:scaffold:modules

/// The operator's name: the field manager of its writes, its Role, its Lease.
const NAME: &str = "{{name}}";
/// The namespace `deploy/` installs the operator in.
const NAMESPACE: &str = "{{namespace}}";
/// The configuration used when `--config` is not given and this file exists.
const DEFAULT_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/concord.yaml");

#[derive(Parser)]
#[command(version, about = "The {{name}} Kubernetes operator", long_about = None)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
    /// Namespace to watch; every namespace when unset.
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Start an embedded control plane (built from Go modules on first use),
    /// install the CRDs, create the objects of config/samples in `default`,
    /// and run the controllers on it.
    #[arg(long)]
    dev: bool,
    /// Print the CustomResourceDefinitions of this operator (YAML), then exit.
    #[arg(long = "print-crds")]
    print_crds: bool,
    /// Print the Role and ClusterRole this operator needs under the
    /// configured strategies, and the ClusterRole a scraper of its secure
    /// metrics is bound to (YAML), then exit. No cluster is needed.
    #[arg(long = "print-rbac")]
    print_rbac: bool,
}

/// The CustomResourceDefinitions of this operator's kinds.
fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        // +concord:scaffold:crds
    ]
}

/// What the operator does to namespaced resources: a Role in each
/// namespace it works in. Verbs follow the strategy table.
fn permissions(table: &StrategyTable) -> Permissions<'_> {
    Permissions::new(table)
        .events()
        .leader_election()
        // +concord:scaffold:permissions
}

/// What the operator does to cluster-scoped resources: a ClusterRole.
/// `secure_metrics`: TokenReviews and SubjectAccessReviews, which
/// `--metrics-secure` sends to check each scrape.
fn cluster_permissions(table: &StrategyTable) -> Permissions<'_> {
    Permissions::new(table)
        .secure_metrics()
        // +concord:scaffold:cluster-permissions
}

/// Registers one controller per kind.
#[allow(unused_variables)] // until `cargo concord create api` adds a controller
fn add_controllers(manager: &mut Manager, namespace: Option<&str>) -> Result<(), concord::Error> {
    // +concord:scaffold:controllers
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn".into()),
        )
        .init();
    let mut cli = Cli::parse();
    if cli.manager.config.is_none() && Path::new(DEFAULT_CONFIG).is_file() {
        cli.manager.config = Some(PathBuf::from(DEFAULT_CONFIG));
    }
    if cli.print_crds {
        for crd in crds() {
            print!("---\n{}", serde_yaml::to_string(&crd)?);
        }
        return Ok(());
    }
    if cli.print_rbac {
        let config = cli.manager.load_config(FeatureRegistry::new())?;
        let namespace = cli.namespace.as_deref().unwrap_or(NAMESPACE);
        print!(
            "{}",
            rbac_yaml(config.strategies(), namespace, cli.manager.shards)?
        );
        return Ok(());
    }
    // Keeps the embedded control plane alive while the operator runs.
    let mut dev = None;
    let mut builder = Manager::builder(NAME).with_args(cli.manager.clone());
    if cli.dev && !cli.manager.wants_explain() {
        let env = {{crate}}::dev::DevCluster::start().await?;
        builder = builder.with_kube_config(env.config().clone());
        dev = Some(env);
    }
    // With --explain (or --explain-yaml) nothing connects: print the gates
    // and strategy table in effect, with their reasons, and stop.
    let mut manager = match builder.build_or_explain().await? {
        Built::Manager(manager) => *manager,
        Built::Explained(text) => {
            print!("{text}");
            return Ok(());
        }
    };
    add_controllers(&mut manager, cli.namespace.as_deref())?;
    if let Some(dev) = &dev {
        dev.install_and_report(manager.client().clone(), crds()).await?;
    }
    manager.run().await?;
    Ok(())
}

/// The Role, the ClusterRole and the metrics readers' ClusterRole, as
/// `--print-rbac` prints them (with the Lease verbs `--shards` needs).
fn rbac_yaml(
    table: &StrategyTable,
    namespace: &str,
    shards: ShardingMode,
) -> anyhow::Result<String> {
    let role = permissions(table).sharding(shards).role(NAME, namespace);
    let cluster_role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(NAME.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(cluster_permissions(table).rules()),
        ..ClusterRole::default()
    };
    let reader = concord::rbac::metrics_reader(&format!("{NAME}-metrics-reader"));
    Ok(format!(
        "{}---\n{}---\n{}",
        serde_yaml::to_string(&role)?,
        serde_yaml::to_string(&cluster_role)?,
        serde_yaml::to_string(&reader)?
    ))
}
