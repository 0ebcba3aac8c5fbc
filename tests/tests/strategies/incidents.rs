//! The write strategies against a real kube-apiserver and etcd.
//!
//! Each incident is reproduced deterministically: the competing write is
//! placed exactly between a strategy's read and its write, through the
//! [`BeforeWrite`] hook or by handing the strategy a stale observed object,
//! which is what a controller reading from its cache does.
//!
//! The stress tests, which print figures, are in `strategies/stress.rs`:
//! `cargo test -p concord-tests --test strategies incidents::stress:: -- --nocapture`.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{bail, ensure};
use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, Intent, Lax, Mutation, ObjectKey, StrategyName, WriteStrategy, Writer,
    strategy_for,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support;

use support::{ARGO, COMPLETED, FOREIGN, OURS, finalizers, pod, policy};

/// Adds a foreign finalizer, as another controller would, right before the
/// strategy's first write.
#[derive(Debug)]
struct ForeignFinalizer {
    api: Api<Pod>,
    name: String,
    fired: AtomicBool,
}

#[async_trait]
impl BeforeWrite for ForeignFinalizer {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt == 0 {
            let add: json_patch::Patch = match serde_json::from_value(json!([
                {"op": "add", "path": "/metadata/finalizers/-", "value": FOREIGN}
            ])) {
                Ok(p) => p,
                Err(_) => return,
            };
            let done = self
                .api
                .patch(&self.name, &PatchParams::default(), &Patch::Json::<()>(add))
                .await;
            self.fired.store(done.is_ok(), Ordering::SeqCst);
        }
    }
}

/// Kueue's incident: remove our finalizer while another controller adds its
/// own in between. Returns the finalizers left on the pod.
async fn kueue(name: &str, strategy: Arc<dyn WriteStrategy>) -> anyhow::Result<Vec<String>> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let observed = pods
        .create(&PostParams::default(), &pod(name, &[OURS])?)
        .await?;
    let hook = Arc::new(ForeignFinalizer {
        api: pods.clone(),
        name: name.into(),
        fired: AtomicBool::new(false),
    });
    let writer = Writer::<Pod>::new(env.client()?, strategy)
        .with_target(|t| t.with_before_write(hook.clone()));
    let written = writer
        .write(&observed, &Intent::remove_finalizer(OURS).into())
        .await?;
    ensure!(
        hook.fired.load(Ordering::SeqCst),
        "the foreign finalizer was not added"
    );
    println!("kueue {name}: {:?}", written.outcome);
    let left = finalizers(&pods.get(name).await?.metadata);
    ensure!(
        !left.contains(&OURS.to_owned()),
        "our finalizer is still there: {left:?}"
    );
    Ok(left)
}

// ANCHOR: kueue_lax
#[tokio::test]
async fn kueue_lax_loses_the_foreign_finalizer() -> anyhow::Result<()> {
    let left = kueue("lax", Arc::new(Lax)).await?;
    assert!(
        left.is_empty(),
        "lax was expected to drop {FOREIGN}, left {left:?}"
    );
    Ok(())
}
// ANCHOR_END: kueue_lax

// ANCHOR: kueue_strict
#[tokio::test]
async fn kueue_strict_keeps_the_foreign_finalizer() -> anyhow::Result<()> {
    let left = kueue("strict", strategy_for(StrategyName::Strict, policy())).await?;
    assert_eq!(left, [FOREIGN]);
    Ok(())
}
// ANCHOR_END: kueue_strict

#[tokio::test]
async fn kueue_update_keeps_the_foreign_finalizer() -> anyhow::Result<()> {
    let left = kueue("update", strategy_for(StrategyName::Update, policy())).await?;
    assert_eq!(left, [FOREIGN]);
    Ok(())
}

#[tokio::test]
async fn kueue_apply_keeps_the_foreign_finalizer() -> anyhow::Result<()> {
    let left = kueue("apply", strategy_for(StrategyName::Apply, policy())).await?;
    assert_eq!(left, [FOREIGN]);
    Ok(())
}

/// The mutex only orders this process's tasks: a write from another process
/// between its GET and its PATCH is lost just as with `lax`.
#[tokio::test]
async fn locked_does_not_protect_against_another_process() -> anyhow::Result<()> {
    let left = kueue("locked", strategy_for(StrategyName::Locked, policy())).await?;
    assert!(
        left.is_empty(),
        "locked was expected to drop {FOREIGN}, left {left:?}"
    );
    Ok(())
}

/// Argo's incident, first half: two code paths compute the same index-based
/// JSON patch from the same read; the second one fails with 422 or removes
/// the wrong finalizer.
#[tokio::test]
async fn argo_naive_index_patch_fails_or_removes_the_wrong_finalizer() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let remove: json_patch::Patch = serde_json::from_value(json!([
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))?;
    let remove_and_label: json_patch::Patch = serde_json::from_value(json!([
        {"op": "remove", "path": "/metadata/finalizers/0"},
        {"op": "replace", "path": "/metadata/labels/workflows.argoproj.io~1completed", "value": "true"},
    ]))?;
    let pp = PatchParams::default();

    // Only Argo's finalizer: the second patch finds no index 0.
    pods.create(&PostParams::default(), &pod("alone", &[ARGO])?)
        .await?;
    // Both patches were computed from the same read; the first one lands.
    pods.patch("alone", &pp, &Patch::Json::<()>(remove.clone()))
        .await?;
    let second = pods
        .patch("alone", &pp, &Patch::Json::<()>(remove_and_label.clone()))
        .await;
    match second {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 422, "{status:?}"),
        other => bail!("the second index patch was expected to fail with 422, got {other:?}"),
    }
    let alone = pods.get("alone").await?;
    assert_eq!(
        alone.metadata.labels.unwrap_or_default()[COMPLETED],
        "false",
        "the completed label was never set"
    );

    // A foreign finalizer behind Argo's: the second patch removes it instead.
    pods.create(&PostParams::default(), &pod("shared", &[ARGO, FOREIGN])?)
        .await?;
    pods.patch("shared", &pp, &Patch::Json::<()>(remove))
        .await?;
    pods.patch("shared", &pp, &Patch::Json::<()>(remove_and_label))
        .await?;
    let shared = pods.get("shared").await?;
    assert!(
        finalizers(&shared.metadata).is_empty(),
        "the foreign finalizer was removed by mistake"
    );
    Ok(())
}

/// Argo's incident, fixed: two tasks remove the same finalizer and set the
/// completed label at once, from the same cached read.
async fn argo(strategy: Arc<dyn WriteStrategy>) -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let name = strategy.name().as_str();
    let observed = pods
        .create(&PostParams::default(), &pod(name, &[ARGO])?)
        .await?;
    let writer = Writer::<Pod>::new(env.client()?, strategy);
    // ANCHOR: argo_mutation
    let completed = Mutation::new()
        .with(Intent::remove_finalizer(ARGO))
        .with(Intent::set_label(COMPLETED, "true"));
    // ANCHOR_END: argo_mutation
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (writer, observed, completed) =
                (writer.clone(), observed.clone(), completed.clone());
            tokio::spawn(async move { writer.write(&observed, &completed).await })
        })
        .collect();
    for task in tasks {
        let written = task.await??;
        println!("argo {name}: {:?}", written.outcome);
    }
    let done = pods.get(name).await?;
    assert!(finalizers(&done.metadata).is_empty());
    assert_eq!(done.metadata.labels.unwrap_or_default()[COMPLETED], "true");
    Ok(())
}

#[tokio::test]
async fn argo_locked_removes_the_finalizer_once_and_labels() -> anyhow::Result<()> {
    argo(strategy_for(StrategyName::Locked, policy())).await
}

#[tokio::test]
async fn argo_strict_removes_the_finalizer_once_and_labels() -> anyhow::Result<()> {
    argo(strategy_for(StrategyName::Strict, policy())).await
}

#[tokio::test]
async fn argo_update_removes_the_finalizer_once_and_labels() -> anyhow::Result<()> {
    argo(strategy_for(StrategyName::Update, policy())).await
}

/// `apply` sends the two intents as one guarded patch (one request, so
/// the removal and the label land together or not at all).
#[tokio::test]
async fn argo_apply_removes_the_finalizer_once_and_labels() -> anyhow::Result<()> {
    argo(strategy_for(StrategyName::Apply, policy())).await
}
