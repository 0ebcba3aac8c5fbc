//! The command line: `cargo concord <command>`, with help that reads like
//! operator-sdk's and kubebuilder's.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Scaffolds and maintains Kubernetes operators written with concord.
///
/// A typical session:
///
///   cargo concord init demo --domain example.com
///   cd demo
///   cargo concord create api --group ships --version v1 --kind Frigate
///   cargo run -- --dev     # run it on an embedded control plane
///   cargo test             # test it against a real kube-apiserver and etcd
///   cargo concord generate # deploy/ from the code: kustomize base and Helm chart
#[derive(Debug, Parser)]
#[command(
    name = "cargo-concord",
    bin_name = "cargo concord",
    version,
    verbatim_doc_comment
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A `cargo concord` command.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum Command {
    /// Create a new operator project: a manager, its configuration, a test
    /// against the embedded control plane, deployment manifests and a
    /// Dockerfile.
    Init(InitArgs),
    /// Scaffold a piece of an existing project.
    #[command(subcommand)]
    Create(Create),
    /// Write deploy/ from the code, as a kustomize base (deploy/) and a Helm
    /// chart (deploy/chart/NAME/) rendered from one model: the CRDs from the
    /// Rust types, the Role and ClusterRole from the strategy table, the
    /// configuration as a ConfigMap, the Deployment with its probes, the
    /// metrics Service and a ServiceMonitor. Runs the project's own binary
    /// (`cargo run`); running it twice changes nothing.
    Generate(ProjectArgs),
    /// Print the feature gates and the strategy table in effect, with the
    /// reason for every cell, as the operator's `--explain` does.
    Explain(ExplainArgs),
}

/// What `cargo concord create` scaffolds.
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum Create {
    /// Add a kind: a CustomResource type with spec, status and printer
    /// columns, a reconciler with a finalizer and a Ready condition, its
    /// registration in src/main.rs and a sample under config/samples.
    /// Running it twice changes nothing; a second kind adds a second
    /// controller.
    Api(CreateApiArgs),
}

/// Arguments of `cargo concord init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project's name: a Rust package name and a DNS-1123 label
    /// (lowercase letters, digits and '-'); it also names the operator's
    /// namespace (NAME-system), ServiceAccount, Role and Deployment.
    pub name: String,
    /// The domain of the project's API groups: `create api --group ships`
    /// makes the group ships.DOMAIN.
    #[arg(long, default_value = "example.com")]
    pub domain: String,
    /// Depend on the concord checkout at DIR (path dependencies; the
    /// project starts from its Cargo.lock). Default: the checkout this
    /// cargo-concord was installed from (`cargo install --path` or
    /// `--git`); when it is gone, `init` asks for one of these three.
    #[arg(long, value_name = "DIR", group = "concord")]
    pub concord_path: Option<PathBuf>,
    /// Depend on concord from this git repository.
    #[arg(long, value_name = "URL", group = "concord")]
    pub concord_git: Option<String>,
    /// Depend on this version of the published crates (kube-concord).
    #[arg(long, value_name = "VERSION", group = "concord")]
    pub concord_version: Option<String>,
    /// Where to create the project; it must not exist. Default: ./NAME.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Arguments of `cargo concord create api`.
#[derive(Debug, Args)]
pub struct CreateApiArgs {
    /// The API group, without the project's domain: `ships` makes
    /// ships.DOMAIN. A DNS-1123 label.
    #[arg(long)]
    pub group: String,
    /// The API version: v1, v1alpha1, v2beta1, …
    #[arg(long)]
    pub version: String,
    /// The kind, in CamelCase: Frigate, DockYard, …
    #[arg(long)]
    pub kind: String,
    /// The kind's objects live in a namespace (the default).
    #[arg(long, conflicts_with = "cluster_scoped")]
    pub namespaced: bool,
    /// The kind's objects are cluster-scoped; its RBAC goes to the
    /// ClusterRole.
    #[arg(long)]
    pub cluster_scoped: bool,
    /// Scaffold a reconciler and register its controller (the default);
    /// --controller=false adds the type only.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set, value_name = "BOOL")]
    pub controller: bool,
    /// The project; default: the nearest directory upwards with a PROJECT file.
    #[command(flatten)]
    pub project: ProjectArgs,
}

/// Which project a command works on.
#[derive(Debug, Args)]
pub struct ProjectArgs {
    /// The project directory; default: the nearest directory upwards from
    /// the current one that holds a PROJECT file.
    #[arg(long, value_name = "DIR")]
    pub project_dir: Option<PathBuf>,
}

/// Arguments of `cargo concord explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Print YAML that can be fed back with --config.
    #[arg(long)]
    pub yaml: bool,
    /// Which project.
    #[command(flatten)]
    pub project: ProjectArgs,
    /// More flags for the operator, e.g. --feature-gates=A=true or
    /// --config=FILE.
    #[arg(last = true)]
    pub operator_args: Vec<String>,
}

impl Cli {
    /// Parses `args` as given to the `cargo-concord` executable: cargo runs
    /// it as `cargo-concord concord <command>`, `cargo run -p cargo-concord`
    /// as `cargo-concord <command>`; both are accepted.
    pub fn parse_args<I, T>(args: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let mut args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        if args.get(1).is_some_and(|a| a == "concord") {
            args.remove(1);
        }
        Cli::parse_from(args)
    }
}
