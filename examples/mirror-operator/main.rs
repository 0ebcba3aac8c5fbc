//! The mirror operator: what a controller-runtime author ports in the
//! first week.
//!
//! What it shows: a `Mirror` custom resource naming a source ConfigMap
//! and the namespaces to copy it into; a watch of every ConfigMap mapped
//! back to the Mirrors that name it through an index (no Mirror decoded to
//! find them); the ConfigMaps read from the manager's shared cache; the
//! copies written by server-side apply without an owner reference (an
//! owner in another namespace would be refused: the garbage collector
//! would delete the copy); a generation predicate beside a finalizer that
//! removes the copies before the Mirror goes. The demo installs the CRD,
//! mirrors a ConfigMap into two namespaces, changes it, deletes a copy
//! (it comes back), deletes the Mirror (its copies go), and exits.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached), or a cluster named with
//! `--kubeconfig` (the demo installs the CRD and creates namespaces; a
//! server that is not on this machine also needs `--yes-create-pods-in
//! <context>`).
//!
//! ```text
//! cargo run --release --example mirror-operator
//! cargo run --release --example mirror-operator -- --serve   # every namespace, as in a Deployment
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use concord::{Manager, manager::Built};
use concord_examples::mirror::{self, FROM_LABEL, Mirror, MirrorSpec};
use concord_examples::widgets_demo::apply_crd;
use concord_examples::{ExampleArgs, client_of, demo_connection, ensure_namespace, wait_until};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::json;

/// The mirror operator (a demo, or `--serve` as a Deployment runs it).
#[derive(Parser)]
#[command(mut_arg("kubeconfig", |a| a.help(concord_examples::KUBECONFIG_HELP)))]
struct Cli {
    #[command(flatten)]
    example: ExampleArgs,
}

const TARGETS: [&str; 2] = ["mirror-demo-a", "mirror-demo-b"];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("info,kube=warn")
        .init();
    let args = Cli::parse().example.with_default_config(mirror::CONFIG);
    let connection = demo_connection(&args).await?;
    let mut builder = Manager::builder("mirror-operator")
        .with_builtin_type::<ConfigMap>()
        .with_args(args.manager.clone());
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
    let namespace = args.namespace_or("mirror-demo");
    if args.serve {
        mirror::add_controller(&mut manager, args.namespace.as_deref())?;
        return Ok(manager.run().await?);
    }
    mirror::add_controller(&mut manager, Some(&namespace))?;
    let client = manager.client().clone();
    apply_crd(&client, &Mirror::crd()).await?;
    for ns in std::iter::once(namespace.as_str()).chain(TARGETS) {
        ensure_namespace(&client, ns).await?;
    }
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    demo(&client, &namespace).await?;
    stop.shutdown();
    running.await??;
    Ok(())
}

async fn demo(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let source = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("mode".to_owned(), "fast".to_owned())])),
        ..ConfigMap::default()
    };
    maps.create(&PostParams::default(), &source).await?;
    let mirrors: Api<Mirror> = Api::namespaced(client.clone(), namespace);
    let spec = MirrorSpec {
        source: "settings".into(),
        targets: TARGETS.map(str::to_owned).to_vec(),
    };
    mirrors
        .create(&PostParams::default(), &Mirror::new("fleet", spec))
        .await?;
    let copies: Api<ConfigMap> = Api::all(client.clone());
    let selector = format!("{FROM_LABEL}={namespace}.fleet");
    let holding = |value: &'static str| {
        move |list: &[ConfigMap]| {
            list.iter()
                .filter(|c| {
                    c.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(FROM_LABEL))
                        .is_some()
                })
                .filter(|c| {
                    c.data
                        .as_ref()
                        .and_then(|d| d.get("mode"))
                        .map(String::as_str)
                        == Some(value)
                })
                .count()
                == TARGETS.len()
        }
    };
    let minute = Duration::from_secs(60);
    wait_until(&copies, "two copies", minute, holding("fast")).await?;
    println!(
        "mirror fleet: settings copied into {}",
        TARGETS.join(" and ")
    );
    maps.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"mode": "slow"}})),
    )
    .await?;
    wait_until(&copies, "two updated copies", minute, holding("slow")).await?;
    println!("mirror fleet: the change reached both copies");
    Api::<ConfigMap>::namespaced(client.clone(), TARGETS[0])
        .delete("fleet", &DeleteParams::default())
        .await?;
    wait_until(&copies, "the deleted copy back", minute, holding("slow")).await?;
    println!("mirror fleet: a copy deleted by hand came back");
    mirrors.delete("fleet", &DeleteParams::default()).await?;
    let labelled = ListParams::default().labels(&selector);
    let deadline = std::time::Instant::now() + minute;
    while !copies.list(&labelled).await?.items.is_empty() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the copies outlived their Mirror"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("mirror fleet: deleted, and its copies with it");
    Ok(())
}
