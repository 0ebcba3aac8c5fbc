//! The write strategies and an object's lifecycle (gone, recreated, being
//! deleted), unchanged mutations and the requeue policy, against a real
//! kube-apiserver and etcd.
//!
//! Run with `cargo test -p concord-tests --test strategies incidents::lifecycle::`.

use anyhow::ensure;
use concord_strategies::{ConflictPolicy, Error, Intent, StrategyName, Verb, Writer, strategy_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support;

use support::{OURS, config_map, policy};

/// Removing a finalizer from an object that is already gone is done.
#[tokio::test]
async fn remove_finalizer_from_a_missing_object_counts_as_done() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for name in StrategyName::ALL {
        let mut observed = cms
            .create(&PostParams::default(), &config_map(name.as_str(), &[])?)
            .await?;
        cms.delete(name.as_str(), &DeleteParams::default()).await?;
        // The cache still shows the object with our finalizer.
        observed.metadata.finalizers = Some(vec![OURS.into()]);
        let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy()));
        let written = writer
            .write(&observed, &Intent::remove_finalizer(OURS).into())
            .await?;
        assert!(written.outcome.gone, "{name}: {:?}", written.outcome);
        assert!(written.object.is_none());
        assert!(
            cms.get_opt(name.as_str()).await?.is_none(),
            "{name} recreated the object"
        );
    }
    Ok(())
}

/// A retry never writes to an object deleted and recreated under the same
/// name.
#[tokio::test]
async fn recreated_object_is_not_written() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for name in [
        StrategyName::Strict,
        StrategyName::Update,
        StrategyName::Locked,
        StrategyName::Apply,
    ] {
        let observed = cms
            .create(&PostParams::default(), &config_map(name.as_str(), &[])?)
            .await?;
        cms.delete(name.as_str(), &DeleteParams::default()).await?;
        cms.create(&PostParams::default(), &config_map(name.as_str(), &[])?)
            .await?;
        let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy()));
        let result = writer
            .write(&observed, &Intent::set_label("stale", "write").into())
            .await;
        assert!(
            matches!(result, Err(Error::ObjectRecreated { .. })),
            "{name}: {result:?}"
        );
        let now = cms.get(name.as_str()).await?;
        assert!(
            !now.metadata
                .labels
                .unwrap_or_default()
                .contains_key("stale"),
            "{name} wrote to the new object"
        );
    }
    Ok(())
}

/// An object being deleted still accepts finalizer removal, and goes away.
#[tokio::test]
async fn object_being_deleted_accepts_finalizer_removal() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for name in StrategyName::ALL {
        cms.create(&PostParams::default(), &config_map(name.as_str(), &[OURS])?)
            .await?;
        cms.delete(name.as_str(), &DeleteParams::default()).await?;
        let observed = cms.get(name.as_str()).await?;
        ensure!(
            observed.metadata.deletion_timestamp.is_some(),
            "{name} has no deletionTimestamp"
        );
        let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy()));
        let written = writer
            .write(&observed, &Intent::remove_finalizer(OURS).into())
            .await?;
        println!("deleting {name}: {:?}", written.outcome);
        assert!(
            cms.get_opt(name.as_str()).await?.is_none(),
            "{name} is still there"
        );
    }
    Ok(())
}

/// A mutation that changes nothing sends no write.
#[tokio::test]
async fn unchanged_mutation_sends_no_write() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let observed = cms
        .create(&PostParams::default(), &config_map("same", &[OURS])?)
        .await?;
    for name in StrategyName::ALL {
        let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy()));
        let written = writer
            .write(&observed, &Intent::add_finalizer(OURS).into())
            .await?;
        let writes = written.outcome.total_requests() - written.outcome.requests(Verb::Get);
        assert_eq!(writes, 0, "{name}: {:?}", written.outcome);
        assert!(written.outcome.unchanged, "{name}");
    }
    Ok(())
}

/// With the requeue policy a conflict comes back at once, typed.
#[tokio::test]
async fn strict_with_requeue_policy_returns_the_conflict() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let stale = cms
        .create(&PostParams::default(), &config_map("requeue", &[])?)
        .await?;
    cms.patch(
        "requeue",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"other": "1"}})),
    )
    .await?;
    let writer = Writer::<ConfigMap>::new(
        env.client()?,
        strategy_for(StrategyName::Strict, ConflictPolicy::Requeue),
    );
    let result = writer
        .write(&stale, &Intent::set_label("a", "b").into())
        .await;
    assert!(matches!(result, Err(Error::Conflict { .. })), "{result:?}");
    let retried =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Strict, policy()))
            .write(&stale, &Intent::set_label("a", "b").into())
            .await?;
    assert_eq!((retried.outcome.conflicts, retried.outcome.retries), (1, 1));
    assert_eq!(retried.outcome.requests(Verb::Get), 1);
    Ok(())
}
