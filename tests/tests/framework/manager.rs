//! The framework on the real control plane: controllers, strategies chosen
//! by YAML alone, leader election and graceful shutdown.
//!
//! ```text
//! cargo test -p concord-tests --test framework manager::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use tempfile::TempPath;

use anyhow::Result;
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, finalizer, finalizer::Lifecycle,
};
use concord_testenv::TestEnv;
use concord_tests::{config_map_write_requests, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const FINALIZER: &str = "framework.concord.dev/cleanup";

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

/// A strategy table in a temporary file, removed when the handle drops.
fn yaml(name: &str, text: &str) -> TempPath {
    concord_tests::yaml_file(&format!("concord-framework-{name}-"), text).unwrap()
}

async fn manager(client: Client, args: ManagerArgs) -> Manager {
    Manager::builder("framework-test")
        .with_client(client)
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

// ANCHOR: reconciler
/// Labels every ConfigMap and counts cleanups; never names a strategy.
struct Labeller {
    reconciled: Arc<AtomicU64>,
    cleaned_up: Arc<AtomicU64>,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Labeller {
    type Error = concord::finalizer::FinalizerError<WriteError>;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, cm, |event| async move {
            match event {
                Lifecycle::Apply(cm) => {
                    ctx.set_label(&cm, "framework.concord.dev/seen", "true")
                        .await?;
                    self.reconciled.fetch_add(1, Relaxed);
                }
                Lifecycle::Cleanup(_) => {
                    self.cleaned_up.fetch_add(1, Relaxed);
                }
            }
            Ok(Action::await_change())
        })
        .await
    }
}
// ANCHOR_END: reconciler

fn labeller() -> (Labeller, Arc<AtomicU64>, Arc<AtomicU64>) {
    let (reconciled, cleaned_up) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    (
        Labeller {
            reconciled: reconciled.clone(),
            cleaned_up: cleaned_up.clone(),
        },
        reconciled,
        cleaned_up,
    )
}

fn seen_with_finalizer(cm: &ConfigMap) -> bool {
    cm.labels().get("framework.concord.dev/seen").is_some()
        && cm.finalizers().iter().any(|f| f == FINALIZER)
}

#[tokio::test]
async fn controller_reconciles_objects_end_to_end() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let (reconciler, _, cleaned_up) = labeller();
    let mut manager = manager(env.client()?, ManagerArgs::new()).await;
    manager
        .controller("configmaps", maps.clone(), reconciler)
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    for i in 0..5 {
        maps.create(&PostParams::default(), &config_map(&format!("cm-{i}")))
            .await?;
    }
    let all_done = eventually(Duration::from_secs(30), || async {
        let list = maps.list(&ListParams::default()).await.unwrap().items;
        list.len() >= 5
            && list
                .iter()
                .filter(|c| c.name_any().starts_with("cm-"))
                .all(seen_with_finalizer)
    })
    .await;
    assert!(all_done, "every ConfigMap gets the finalizer and the label");

    maps.delete("cm-0", &DeleteParams::default()).await?;
    let gone = eventually(Duration::from_secs(30), || async {
        maps.get_opt("cm-0").await.unwrap().is_none()
    })
    .await;
    assert!(
        gone,
        "the finalizer is removed after cleanup and the object disappears"
    );
    assert_eq!(cleaned_up.load(Relaxed), 1);

    stop.shutdown();
    running.await??;
    Ok(())
}

/// Runs the labeller over three ConfigMaps with `config` and returns the
/// rendered metrics.
async fn metrics_after_run(config: TempPath) -> Result<String> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let (reconciler, _, _) = labeller();
    let mut manager = manager(env.client()?, ManagerArgs::new().with_config(&*config)).await;
    manager
        .controller("configmaps", maps.clone(), reconciler)
        .add()?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    for i in 0..3 {
        maps.create(&PostParams::default(), &config_map(&format!("cm-{i}")))
            .await?;
    }
    let done = eventually(Duration::from_secs(30), || async {
        let list = maps.list(&ListParams::default()).await.unwrap().items;
        list.iter().filter(|c| seen_with_finalizer(c)).count() == 3
    })
    .await;
    assert!(done, "the labeller finishes under every strategy");
    stop.shutdown();
    running.await??;
    Ok(metrics.render())
}

/// `apply` cannot serve arbitrary closures (`other`), so it is named per
/// operation rather than as the resource's default.
const APPLY_CONFIG: &str = "
strategies:
  resources:
    configmaps:
      operations:
        add-finalizer: apply
        remove-finalizer: apply
        metadata: apply
";

#[tokio::test]
async fn the_same_reconciler_writes_through_the_strategy_the_yaml_names() -> Result<()> {
    let update = metrics_after_run(yaml("update", "strategies:\n  default: update\n")).await?;
    let apply = metrics_after_run(yaml("apply", APPLY_CONFIG)).await?;

    assert!(
        config_map_write_requests(&update, "update", "update") >= 6,
        "update sends PUTs:\n{update}"
    );
    assert_eq!(config_map_write_requests(&update, "apply", "apply"), 0);
    assert!(
        config_map_write_requests(&apply, "apply", "apply") >= 6,
        "apply sends server-side applies:\n{apply}"
    );
    assert_eq!(config_map_write_requests(&apply, "update", "update"), 0);
    Ok(())
}

#[tokio::test]
async fn one_leader_reconciles_and_a_standby_takes_over() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let args = ManagerArgs::new().with_leader_election("framework-test-lock", ns.name());

    let (first, first_count, _) = labeller();
    let mut leader = manager(env.client()?, args.clone()).await;
    leader.controller("configmaps", maps.clone(), first).add()?;
    let stop_leader = leader.shutdown_handle();
    let leader_run = tokio::spawn(leader.run());
    tokio::time::sleep(Duration::from_secs(1)).await; // let the first one win the lease

    let (second, second_count, _) = labeller();
    let mut standby = manager(env.client()?, args).await;
    standby
        .controller("configmaps", maps.clone(), second)
        .add()?;
    let stop_standby = standby.shutdown_handle();
    let standby_run = tokio::spawn(standby.run());

    for i in 0..4 {
        maps.create(&PostParams::default(), &config_map(&format!("before-{i}")))
            .await?;
    }
    assert!(
        eventually(Duration::from_secs(30), || async {
            first_count.load(Relaxed) >= 4
        })
        .await
    );
    tokio::time::sleep(Duration::from_secs(3)).await; // more than a retry period
    assert_eq!(
        second_count.load(Relaxed),
        0,
        "the standby must not reconcile while the leader runs"
    );

    stop_leader.shutdown();
    leader_run.await??;
    let stopped = Instant::now();
    maps.create(&PostParams::default(), &config_map("after"))
        .await?;
    let took_over = eventually(Duration::from_secs(15), || async {
        maps.get("after")
            .await
            .map(|cm| seen_with_finalizer(&cm))
            .unwrap_or(false)
    })
    .await;
    assert!(
        took_over,
        "the standby takes over within the lease duration"
    );
    println!(
        "standby took over {:?} after the leader stopped",
        stopped.elapsed()
    );
    assert!(second_count.load(Relaxed) >= 1);

    stop_standby.shutdown();
    standby_run.await??;
    Ok(())
}
