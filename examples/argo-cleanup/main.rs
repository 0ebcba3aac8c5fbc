//! The Argo Workflows incident, fixed: two event paths, one atomic write.
//!
//! What it shows: a Pod cleanup operator with two controllers on the same
//! Pods — the deletion path (Argo's informer `DeleteFunc`) and the
//! completion path (its `labelPodCompleted` action). Both record a Pod's
//! result with one mutation that removes our finalizer *and* sets the
//! completed label, so it is one write. The demo completes and deletes
//! every Pod at the same moment, so both paths race on each; `config.yaml`
//! sends the write as `update` (PUT with resourceVersion, retry on 409).
//! Every Pod ends up labelled, our finalizer gone, the foreign finalizer
//! listed before ours untouched — no 422, no wrong finalizer removed.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached), or a cluster named with
//! `--kubeconfig` (`$KUBECONFIG` is ignored in the demo mode; a server that
//! is not on this machine also needs `--yes-create-pods-in <context>`).
//!
//! ```text
//! cargo run --release --example argo-cleanup
//! cargo run --release --example argo-cleanup -- --pods 100
//! cargo run --release --example argo-cleanup -- --print-rbac
//! cargo run --release --example argo-cleanup -- --serve --namespace workflows   # as in a Deployment
//! ```

use clap::Parser;
use concord::{Manager, featuregates::FeatureRegistry, manager::Built};
use concord_examples::argo::{self, CompletionPath, DeletionPath};
use concord_examples::pod_phase::PodPhase;
use concord_examples::{ExampleArgs, client_of, demo_connection, ensure_namespace, load_config};
use kube::Api;

/// The Argo Workflows incident fixed: two event paths of a Pod cleanup
/// operator, one write each (a demo, or `--serve` as a Deployment runs it).
#[derive(Parser)]
#[command(mut_arg("kubeconfig", |a| a.help(concord_examples::KUBECONFIG_HELP)))]
struct Cli {
    #[command(flatten)]
    example: ExampleArgs,
    /// How many Pods the demo creates.
    #[arg(long, default_value_t = 20)]
    pods: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("info,kube=warn")
        .init();
    let cli = Cli::parse();
    let args = cli.example.with_default_config(argo::CONFIG);
    let namespace = args.namespace_or("argo-demo");
    if args.print_rbac {
        let config = load_config(&args.manager, FeatureRegistry::new())?;
        let permissions = argo::permissions(config.strategies()).sharding(args.manager.shards);
        print!(
            "{}",
            concord_examples::role_yaml(&permissions, "argo-cleanup", &namespace)?
        );
        return Ok(());
    }
    let connection = demo_connection(&args).await?;

    // ANCHOR: main
    let mut builder = Manager::builder("argo-cleanup").with_args(args.manager.clone());
    if let Some(client) = client_of(&connection) {
        builder = builder.with_client(client);
    }
    let mut manager = match builder.build_or_explain().await? {
        Built::Manager(manager) => manager,
        Built::Explained(text) => {
            print!("{text}");
            return Ok(());
        }
    };
    // Both read Pods as `PodPhase` views (metadata and phase), from one
    // shared cache of views.
    let pods: Api<PodPhase> = Api::namespaced(manager.client().clone(), &namespace);
    // Two controllers, two event paths, racing on the same Pods.
    manager
        .controller("pod-deletion", pods.clone(), DeletionPath)
        .add()?;
    manager
        .controller("pod-completion", pods, CompletionPath)
        .add()?;
    // ANCHOR_END: main
    if args.serve {
        return Ok(manager.run().await?);
    }

    let client = manager.client().clone();
    ensure_namespace(&client, &namespace).await?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let report = argo::demo(&client, &namespace, cli.pods).await?;
    println!(
        "{} pods completed and deleted at the same moment: {} recorded (labelled, our finalizer gone), \
         {} kept the foreign finalizer listed first",
        report.pods, report.recorded, report.foreign_kept
    );
    stop.shutdown();
    running.await??;
    println!("\nwrite metrics (conflicts are the race, met and retried):");
    for line in metrics.render().lines().filter(|l| {
        (l.starts_with("concord_write_requests_total")
            || l.starts_with("concord_write_conflicts_total")
            || l.starts_with("concord_write_total"))
            && !l.ends_with(" 0")
    }) {
        println!("  {line}");
    }
    Ok(())
}
