//! A CRD operator of the kind authors write every day.
//!
//! What it shows: a `Widget` custom resource defined as a Rust type
//! (`#[derive(CustomResource, JsonSchema)]`, status subresource); a
//! reconciler that creates and owns ConfigMap "shards" (server-side apply
//! with an owner reference), reports `status.shards` and a `Ready`
//! condition, publishes Events, and deletes the shards through a finalizer
//! before the Widget goes. The demo installs the CRD, creates a Widget with
//! three shards, scales it to one, deletes it, and exits.
//!
//! With `--serve` (as in its Deployment) it also serves its webhooks
//! (`concord_examples::widgets_webhooks`): a validator, a defaulter and
//! the conversion between `v1alpha1` and `v1`, with `tls.crt`/`tls.key`
//! from `--webhook-cert-dir` (cert-manager's Secret in the Deployment);
//! `--webhook-bind-address=0` turns them off. The demo mode serves none
//! and installs the `v1`-only CRD.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached), or a cluster named with
//! `--kubeconfig` (the demo installs the CRD: it needs to be allowed to;
//! `$KUBECONFIG` is ignored in the demo mode; a server that is not on this
//! machine also needs `--yes-create-pods-in <context>`).
//!
//! ```text
//! cargo run --release --example crd-operator
//! cargo run --release --example crd-operator -- --print-crd
//! cargo run --release --example crd-operator -- --print-webhooks
//! cargo run --release --example crd-operator -- --print-rbac
//! cargo run --release --example crd-operator -- --print-rbac --webhook-cert-managed crd-operator-webhook
//! cargo run --release --example crd-operator -- --serve --namespace widgets   # as in a Deployment
//! ```

use clap::Parser;
use concord::{Manager, featuregates::FeatureRegistry, manager::Built};
use concord_examples::widgets::{self, Widget};
use concord_examples::widgets_demo::{demo, install_crd};
use concord_examples::widgets_webhooks;
use concord_examples::{ExampleArgs, client_of, demo_connection, ensure_namespace, load_config};
use kube::CustomResourceExt;

/// A CRD operator: `Widget`s, each owning a ConfigMap shard (a demo, or
/// `--serve` as a Deployment runs it).
#[derive(Parser)]
#[command(mut_arg("kubeconfig", |a| a.help(concord_examples::KUBECONFIG_HELP)))]
struct Cli {
    #[command(flatten)]
    example: ExampleArgs,
    /// Print the Widget CustomResourceDefinition (YAML, both versions and
    /// the conversion webhook), then exit.
    #[arg(long = "print-crd")]
    print_crd: bool,
    /// Print the Validating- and MutatingWebhookConfiguration (YAML,
    /// two documents), then exit.
    #[arg(long = "print-webhooks")]
    print_webhooks: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("info,kube=warn")
        .init();
    let cli = Cli::parse();
    let args = cli.example.with_default_config(widgets::CONFIG);
    let namespace = args.namespace_or("widgets-demo");
    let in_cluster = widgets_webhooks::in_cluster_client();
    if cli.print_crd {
        print!(
            "{}",
            serde_yaml::to_string(&widgets_webhooks::crd(&in_cluster)?)?
        );
        return Ok(());
    }
    if cli.print_webhooks {
        let webhooks = widgets_webhooks::webhooks();
        let validating = webhooks.validating_configuration(&in_cluster);
        let mutating = webhooks.mutating_configuration(&in_cluster);
        print!(
            "{}---\n{}",
            serde_yaml::to_string(&validating)?,
            serde_yaml::to_string(&mutating)?
        );
        return Ok(());
    }
    if args.print_rbac {
        let config = load_config(&args.manager, FeatureRegistry::new())?;
        let permissions = widgets::permissions(config.strategies()).sharding(args.manager.shards);
        print!(
            "{}",
            concord_examples::role_yaml(&permissions, "crd-operator", &namespace)?
        );
        if args.manager.webhook_cert_managed.is_some() {
            print!(
                "{}",
                concord_examples::managed_certificates_rbac_yaml(
                    config.strategies(),
                    "crd-operator",
                    &namespace
                )?
            );
        }
        return Ok(());
    }
    let connection = demo_connection(&args).await?;

    // ANCHOR: main
    let mut builder = Manager::builder("crd-operator").with_args(args.manager.clone());
    if let Some(client) = client_of(&connection) {
        builder = builder.with_client(client);
    }
    if args.serve {
        // On every replica, leader or not: the API server calls any of them.
        builder = builder.with_webhooks(widgets_webhooks::webhooks());
        // --webhook-cert-managed: the operator's own CA, trusted through
        // the configurations it generates.
        if let Some(service) = &args.manager.webhook_cert_managed {
            builder = builder.with_managed_webhook_certificates(
                concord::webhook::ManagedCertificates::new(service.clone())
                    .with_configuration_name(widgets_webhooks::CONFIGURATION),
            );
        }
    }
    let mut manager = match builder.build_or_explain().await? {
        Built::Manager(manager) => manager,
        Built::Explained(text) => {
            print!("{text}");
            return Ok(());
        }
    };
    widgets::add_controller(&mut manager, &namespace)?;
    // ANCHOR_END: main
    let client = manager.client().clone();
    if args.serve {
        // In a cluster the CRD is installed with the manifests (it is
        // cluster-scoped; the operator's namespaced Role cannot).
        return Ok(manager.run().await?);
    }

    install_crd(&client).await?;
    println!("installed CRD {}", Widget::crd_name());
    ensure_namespace(&client, &namespace).await?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let report = demo(&client, &namespace).await?;
    println!(
        "widget greeter: {} shards created, {} after scaling down to 1, {} after deletion",
        report.shards_created, report.shards_after_scale_down, report.shards_after_delete
    );
    println!("events about greeter: {}", report.events.join(", "));
    stop.shutdown();
    running.await??;
    Ok(())
}
