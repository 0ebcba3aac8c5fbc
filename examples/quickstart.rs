//! A complete small concord operator, run end to end.
//!
//! What it shows: a reconciler for Pods that uses the finalizer lifecycle —
//! add our finalizer on first sight, label the Pod, and remove the finalizer
//! when the Pod is deleted — without naming a write strategy anywhere. The
//! strategies come from `examples/quickstart.yaml`; edit it (or pass
//! `--feature-gates`, `--config`) and the same code writes differently.
//! The example creates its own Pods, deletes them, waits until every one is
//! gone and prints the per-strategy write metrics.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached), or a cluster named with
//! `--kubeconfig` (`$KUBECONFIG` is ignored; a server that is not on this
//! machine also needs `--yes-create-pods-in <context>`).
//!
//! ```text
//! cargo run --release --example quickstart -- [--pods 20] [--config examples/quickstart.yaml]
//! cargo run --release --example quickstart -- --explain
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, finalizer, finalizer::Lifecycle,
    manager::Built,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

// ANCHOR: reconciler
const FINALIZER: &str = "quickstart.concord.dev/cleanup";

/// Labels every Pod it manages and holds it with a finalizer until cleanup ran.
struct PodLabeller;

#[concord::async_trait]
impl Reconciler<Pod> for PodLabeller {
    type Error = concord::finalizer::FinalizerError<WriteError>;

    async fn reconcile(&self, pod: Arc<Pod>, ctx: &Context<Pod>) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, pod, |event| async move {
            match event {
                Lifecycle::Apply(pod) => {
                    ctx.set_label(&pod, "quickstart.concord.dev/seen", "true")
                        .await?;
                }
                Lifecycle::Cleanup(pod) => {
                    tracing::debug!(pod = %pod.name_any(), "cleaning up");
                }
            }
            Ok(Action::await_change())
        })
        .await
    }
}
// ANCHOR_END: reconciler

/// A small concord operator: it creates Pods, adds and removes its finalizer
/// on each through the strategy table, and prints the write metrics.
#[derive(Parser)]
#[command(mut_arg("kubeconfig", |a| a.help(
    "Path to the kubeconfig of the cluster to use; without it the embedded control plane runs ($KUBECONFIG and ~/.kube/config are not read)"
)))]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
    /// How many Pods to create.
    #[arg(long, default_value_t = 20)]
    pods: usize,
    /// Namespace to work in.
    #[arg(long, default_value = "quickstart")]
    namespace: String,
    #[command(flatten)]
    consent: concord_examples::RemoteConsent,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("info,kube=warn")
        .init();
    let mut cli = Cli::parse();
    if cli.manager.config.is_none() {
        cli.manager.config = Some(concat!(env!("CARGO_MANIFEST_DIR"), "/quickstart.yaml").into());
    }
    if cli.manager.wants_explain() {
        // Prints the gates and the strategy table with their reasons, then exits.
        let built = Manager::builder("quickstart")
            .with_args(cli.manager)
            .build_or_explain()
            .await?;
        if let Built::Explained(text) = built {
            print!("{text}");
        }
        return Ok(());
    }
    // ANCHOR: main
    let connection =
        concord_examples::connect(cli.manager.kubeconfig.clone(), &cli.consent).await?;
    let mut manager = Manager::builder("quickstart")
        .with_builtin_type::<Pod>()
        .with_args(cli.manager.clone())
        .with_client(connection.client.clone())
        .build()
        .await?;
    let pods: Api<Pod> = Api::namespaced(manager.client().clone(), &cli.namespace);
    manager
        .controller("pods", pods.clone(), PodLabeller)
        .add()?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    // ANCHOR_END: main
    println!("connected to {}", connection.server);

    ensure_namespace(&connection.client, &cli.namespace).await?;
    let start = Instant::now();
    for i in 0..cli.pods {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("demo-{i}")},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]}
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    let labelled = |p: &Pod| {
        p.labels().contains_key("quickstart.concord.dev/seen")
            && p.finalizers().iter().any(|f| f == FINALIZER)
    };
    wait_until(&pods, |list| {
        list.len() == cli.pods && list.iter().all(labelled)
    })
    .await?;
    println!(
        "{} pods carry the finalizer and the label after {:.1?}",
        cli.pods,
        start.elapsed()
    );

    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait_until(&pods, |list| list.is_empty()).await?;
    println!(
        "all {} pods deleted: the finalizer was removed from each after cleanup ({:.1?} in all)",
        cli.pods,
        start.elapsed()
    );

    stop.shutdown();
    running.await??;
    let reconciles = metrics.reconciles("pods");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{reconciles} reconciles in {secs:.1}s ({:.0}/s); operator peak RSS {}",
        reconciles as f64 / secs,
        peak_rss().unwrap_or_else(|| "unknown".into())
    );
    println!("\nwrite metrics (what each strategy sent):");
    for line in metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("concord_write_requests_total") && !l.ends_with(" 0"))
    {
        println!("  {line}");
    }
    Ok(())
}

/// The process's peak resident set size, from `/proc/self/status`.
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line.trim_start_matches("VmHWM:").trim().to_owned())
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )?;
    namespaces
        .patch(
            name,
            &PatchParams::apply("quickstart").force(),
            &Patch::Apply(&ns),
        )
        .await?;
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), name);
    for _ in 0..600 {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("namespace {name} has no default ServiceAccount after 60s")
}

async fn wait_until(pods: &Api<Pod>, done: impl Fn(&[Pod]) -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if done(&pods.list(&ListParams::default()).await?.items) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("pods did not reach the expected state within 120s")
}
