//! The example operators do their job on the real control plane: each test
//! runs the very reconcilers and demo of `cargo run --example <name>`.
//!
//! ```text
//! cargo test -p concord-tests --test examples operators::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use anyhow::Result;
use concord::{
    Manager, ManagerArgs, featuregates::FeatureRegistry, featuregates::Operation,
    featuregates::StrategyName,
};
use concord_examples::argo::{self, CompletionPath, DeletionPath};
use concord_examples::kueue;
use concord_examples::widgets::{self, Widget};
use concord_examples::{load_config, widgets_demo};
use concord_testenv::TestEnv;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client, CustomResourceExt};

async fn manager(
    name: &str,
    client: Client,
    args: ManagerArgs,
    registry: FeatureRegistry,
) -> Manager {
    Manager::builder(name)
        .with_client(client)
        .with_args(args)
        .with_registry(registry)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

/// The kueue operator with `config`, whose finalizer removal must be
/// `removal`: every pod released, every foreign finalizer kept.
async fn kueue_keeps_every_foreign_finalizer(config: &str, removal: StrategyName) -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let (registry, gate) = kueue::registry()?;
    let mut manager = manager(
        "kueue-finalizer",
        env.client()?,
        ManagerArgs::new().with_config(config),
        registry,
    )
    .await;
    assert!(
        manager.gates().enabled(gate),
        "the Beta gate is on by default"
    );
    assert_eq!(
        manager
            .context::<Pod>()
            .strategy(Operation::RemoveFinalizer),
        removal
    );
    kueue::add_controller(&mut manager, Api::namespaced(ns.client(), ns.name()))?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let report = kueue::demo(&ns.client(), ns.name(), 30).await?;
    assert_eq!(report.finished, 15);
    assert_eq!(report.deleted, 15);
    assert_eq!(
        report.foreign_kept, 15,
        "{removal} removal keeps the other controller's finalizer on every pod"
    );

    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn kueue_operator_keeps_every_foreign_finalizer_with_the_gate_on() -> Result<()> {
    kueue_keeps_every_foreign_finalizer(kueue::CONFIG, StrategyName::Strict).await
}

#[tokio::test]
async fn kueue_operator_keeps_every_foreign_finalizer_with_guarded_removal() -> Result<()> {
    kueue_keeps_every_foreign_finalizer(kueue::GUARDED_CONFIG, StrategyName::Guarded).await
}

#[test]
fn kueue_gate_off_turns_only_finalizer_removal_lax() -> Result<()> {
    let args = ManagerArgs::new()
        .with_config(kueue::CONFIG)
        .with_feature_gates("RemoveFinalizersWithStrictPatch=false");
    let config = load_config(&args, kueue::registry()?.0)?;
    let pods = config
        .strategies()
        .for_resource(&concord::featuregates::ResourceKey::new(
            "", "v1", "Pod", "pods",
        ));
    assert_eq!(pods.strategy(Operation::RemoveFinalizer), StrategyName::Lax);
    assert_eq!(pods.strategy(Operation::AddFinalizer), StrategyName::Strict);
    Ok(())
}

#[tokio::test]
async fn argo_operator_records_each_pod_once_when_both_paths_race() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let mut manager = manager(
        "argo-cleanup",
        env.client()?,
        ManagerArgs::new().with_config(argo::CONFIG),
        FeatureRegistry::new(),
    )
    .await;
    assert_eq!(
        manager
            .context::<Pod>()
            .strategy(Operation::RemoveFinalizer),
        StrategyName::Update
    );
    let pods: Api<argo::PodPhase> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("pod-deletion", pods.clone(), DeletionPath)
        .add()?;
    manager
        .controller("pod-completion", pods, CompletionPath)
        .add()?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let report = argo::demo(&ns.client(), ns.name(), 30).await?;
    assert_eq!(
        report.recorded, 30,
        "every pod is labelled completed and released"
    );
    assert_eq!(
        report.foreign_kept, 30,
        "the finalizer listed before ours is never the one removed"
    );
    let rendered = metrics.render();
    let failures = rendered
        .lines()
        .filter(|l| l.contains("result=\"failure\"") && !l.ends_with(" 0"))
        .collect::<Vec<_>>();
    assert!(
        failures.is_empty(),
        "no write failed (no 422 from a stale index): {failures:?}"
    );

    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn crd_operator_owns_shards_reports_status_and_cleans_up() -> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(Widget::crd()).await?;
    let ns = env.namespace().await?;
    let mut manager = manager(
        "crd-operator",
        env.client()?,
        ManagerArgs::new().with_config(widgets::CONFIG),
        FeatureRegistry::new(),
    )
    .await;
    widgets::add_controller(&mut manager, ns.name())?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let report = widgets_demo::demo(&ns.client(), ns.name()).await?;
    assert_eq!(report.shards_created, 3);
    assert_eq!(report.shards_after_scale_down, 1);
    assert_eq!(
        report.shards_after_delete, 0,
        "the finalizer deletes the shards before the widget goes"
    );
    for reason in ["ShardsReady", "ShardsDeleted"] {
        assert!(
            report.events.iter().any(|r| r == reason),
            "event {reason} in {:?}",
            report.events
        );
    }

    stop.shutdown();
    running.await??;
    Ok(())
}
