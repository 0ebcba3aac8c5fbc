//! The Kueue incident, fixed by configuration: a Pod finalizer operator.
//!
//! What it shows: an operator that holds managed Pods with its finalizer
//! and releases them when they finish or are deleted, while another
//! controller adds its own finalizer to the same Pods. It declares its own
//! Beta gate, `RemoveFinalizersWithStrictPatch` (on by default), and its
//! `config.yaml` maps it: on → `strict` (optimistic lock, the fix), off →
//! `lax` (plain merge patch, the incident). The demo counts the other
//! controller's finalizers that survive, cleans up and exits.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached), or a cluster named with
//! `--kubeconfig` (`$KUBECONFIG` is ignored in the demo mode; a server that
//! is not on this machine also needs `--yes-create-pods-in <context>`).
//!
//! ```text
//! cargo run --release --example kueue-finalizer
//! cargo run --release --example kueue-finalizer -- --feature-gates=RemoveFinalizersWithStrictPatch=false
//! cargo run --release --example kueue-finalizer -- --print-rbac
//! cargo run --release --example kueue-finalizer -- --explain
//! cargo run --release --example kueue-finalizer -- --serve --namespace jobs   # as in a Deployment
//! ```

use clap::Parser;
use concord::{Manager, featuregates::Operation, manager::Built};
use concord_examples::kueue::{self, PodPhase};
use concord_examples::{ExampleArgs, client_of, demo_connection, ensure_namespace, load_config};
use kube::Api;

/// The Kueue incident fixed by configuration: a Pod finalizer operator (a demo
/// on the embedded control plane, or `--serve` as a Deployment runs it).
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
    let args = cli.example.with_default_config(kueue::CONFIG);
    let namespace = args.namespace_or("kueue-demo");
    if args.print_rbac {
        let (registry, _) = kueue::registry()?;
        let config = load_config(&args.manager, registry)?;
        let permissions = kueue::permissions(config.strategies()).sharding(args.manager.shards);
        print!(
            "{}",
            concord_examples::role_yaml(&permissions, "kueue-finalizer", &namespace)?
        );
        return Ok(());
    }
    let connection = demo_connection(&args).await?;

    // ANCHOR: main
    let (registry, strict_patch) = kueue::registry()?;
    let mut builder = Manager::builder("kueue-finalizer")
        .with_args(args.manager.clone())
        .with_registry(registry);
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
    // The controller reads Pods as `PodPhase` views (metadata and phase):
    // its cache holds nothing else.
    let pods: Api<PodPhase> = Api::namespaced(manager.client().clone(), &namespace);
    kueue::add_controller(&mut manager, pods)?;
    // ANCHOR_END: main
    println!(
        "RemoveFinalizersWithStrictPatch={}: our finalizer is removed with `{}`",
        manager.gates().enabled(strict_patch),
        manager
            .context::<PodPhase>()
            .strategy(Operation::RemoveFinalizer)
    );
    if args.serve {
        return Ok(manager.run().await?);
    }

    let client = manager.client().clone();
    ensure_namespace(&client, &namespace).await?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let report = kueue::demo(&client, &namespace, cli.pods).await?;
    println!(
        "{} pods finished while another controller added its finalizer: {} of its finalizers survived",
        report.finished, report.foreign_kept
    );
    println!(
        "{} pods deleted while running: all released and gone",
        report.deleted
    );
    stop.shutdown();
    running.await??;
    println!("\nwrite metrics (what each strategy sent):");
    for line in metrics.render().lines().filter(|l| {
        (l.starts_with("concord_write_requests_total")
            || l.starts_with("concord_write_conflicts_total"))
            && !l.ends_with(" 0")
    }) {
        println!("  {line}");
    }
    Ok(())
}
