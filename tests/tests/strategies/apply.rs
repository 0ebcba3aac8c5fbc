//! `apply` against a real kube-apiserver and etcd: what it owns, what it
//! refuses, and that a mutation of several intents lands whole or not at
//! all.
//!
//! Run with `cargo test -p concord-tests --test strategies incidents::apply::`.

use anyhow::Context;
use concord_strategies::{Error, Intent, Mutation, StrategyName, Verb, Writer, strategy_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

use crate::support;

use support::{FOREIGN, OURS, config_map, finalizers, policy};

/// `apply` owns what it adds and releases it through SSA alone, keeping
/// entries that other managers own.
#[tokio::test]
async fn apply_releases_its_own_finalizer_without_fallback() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let created = cms
        .create(&PostParams::default(), &config_map("owned", &[FOREIGN])?)
        .await?;
    let writer =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Apply, policy()));
    let added = writer
        .write(&created, &Intent::add_finalizer(OURS).into())
        .await?;
    let observed = added.object.context("no object")?;
    assert_eq!(finalizers(&observed.metadata), [FOREIGN, OURS]);
    let removed = writer
        .write(&observed, &Intent::remove_finalizer(OURS).into())
        .await?;
    assert!(!removed.outcome.fell_back, "{:?}", removed.outcome);
    assert_eq!(removed.outcome.requests(Verb::Apply), 1);
    assert_eq!(finalizers(&cms.get("owned").await?.metadata), [FOREIGN]);
    Ok(())
}

#[tokio::test]
async fn apply_refuses_arbitrary_closures() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let observed = cms
        .create(&PostParams::default(), &config_map("closure", &[])?)
        .await?;
    let writer =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Apply, policy()));
    let closure = Mutation::typed(|cm: &mut ConfigMap| {
        cm.data
            .get_or_insert_default()
            .insert("k".into(), "changed".into());
    });
    let result = writer.write(&observed, &closure).await;
    assert!(
        matches!(result, Err(Error::UnsupportedMutation { .. })),
        "{result:?}"
    );
    let strict =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Strict, policy()));
    let written = strict.write(&observed, &closure).await?;
    assert_eq!(
        written
            .object
            .context("no object")?
            .data
            .unwrap_or_default()["k"],
        "changed"
    );
    Ok(())
}

/// A mutation of several intents is one request: when the server rejects
/// it (here an invalid label key after a valid finalizer and label), the
/// object is left exactly as it was — nothing of the earlier intents lands.
/// A mutation the server accepts lands whole, reported as the fallback.
#[tokio::test]
async fn apply_multi_intent_mutation_is_all_or_nothing() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let writer =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Apply, policy()));
    // ANCHOR: all_or_nothing
    // Three changes, one request: the server rejects the invalid label key,
    // and neither the finalizer nor the valid label lands.
    let rejected = Mutation::new()
        .with(Intent::add_finalizer(OURS))
        .with(Intent::set_label("valid", "yes"))
        .with(Intent::set_label("not a valid key!", "x"));
    // ANCHOR_END: all_or_nothing
    // Without labels the request is the strict merge patch; with labels
    // the entry-guarded JSON patch. Both are one request.
    for (name, labelled) in [("bare", false), ("labelled", true)] {
        let mut object = config_map(name, &[FOREIGN])?;
        if labelled {
            object.metadata.labels = Some([("app".to_owned(), "demo".to_owned())].into());
        }
        let created = cms.create(&PostParams::default(), &object).await?;
        let result = writer.write(&created, &rejected).await;
        assert!(
            matches!(result, Err(Error::Rejected { .. })),
            "{name}: {result:?}"
        );
        let after = cms.get(name).await?;
        assert_eq!(
            after.metadata.resource_version, created.metadata.resource_version,
            "{name}: nothing was written"
        );
        assert_eq!(finalizers(&after.metadata), [FOREIGN], "{name}");
        assert_eq!(after.metadata.labels, created.metadata.labels, "{name}");

        let accepted = Mutation::new()
            .with(Intent::remove_finalizer(FOREIGN))
            .with(Intent::add_finalizer(OURS))
            .with(Intent::set_label("valid", "yes"));
        let written = writer.write(&after, &accepted).await?;
        assert!(written.outcome.fell_back, "{name}: {:?}", written.outcome);
        assert_eq!(written.outcome.total_requests(), 1, "{name}: one request");
        let done = cms.get(name).await?;
        assert_eq!(finalizers(&done.metadata), [OURS], "{name}");
        assert_eq!(done.metadata.labels.unwrap_or_default()["valid"], "yes");
    }
    Ok(())
}

/// `apply-owned` (what `Context::apply_owned` sends): one forced apply of
/// the whole object, creating it and then updating it, counted in the
/// write metrics like every write; no other strategy accepts it.
#[tokio::test]
async fn apply_owned_creates_then_updates_the_whole_object_through_the_table() -> anyhow::Result<()>
{
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let metrics = std::sync::Arc::new(concord_strategies::WriteMetrics::default());
    let writer =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Apply, policy()))
            .with_target(|t| t.with_metrics(metrics.clone()));
    let mut child = config_map("child", &[])?;
    child.metadata.namespace = Some(ns.name().to_owned());
    let owned: Mutation = Intent::ApplyOwned.into();
    assert_eq!(owned.operation(), concord_strategies::Operation::ApplyOwned);

    let created = writer.write(&child, &owned).await?;
    assert_eq!(created.outcome.requests(Verb::Apply), 1);
    assert_eq!(cms.get("child").await?.data.unwrap_or_default()["k"], "v");
    child.data = Some([("k".to_owned(), "changed".to_owned())].into());
    writer.write(&child, &owned).await?;
    assert_eq!(
        cms.get("child").await?.data.unwrap_or_default()["k"],
        "changed"
    );
    let snapshot = metrics.snapshot();
    assert_eq!(
        (snapshot.writes, snapshot.requests[Verb::Apply.index()]),
        (2, 2)
    );

    let strict =
        Writer::<ConfigMap>::new(env.client()?, strategy_for(StrategyName::Strict, policy()));
    let refused = strict.write(&child, &owned).await;
    assert!(
        matches!(refused, Err(Error::UnsupportedMutation { .. })),
        "{refused:?}"
    );
    Ok(())
}
