//! The write strategies on other resources (cluster-scoped, a custom
//! resource with a status subresource, a Pod's status) and their metrics,
//! against a real kube-apiserver and etcd.
//!
//! Run with `cargo test -p concord-tests --test strategies incidents::resources::`.
use std::sync::Arc;

use anyhow::Context;
use concord_strategies::{
    Intent, Locked, Mutation, StrategyName, Target, Verb, WriteMetrics, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::json;

use crate::support;

use support::{OURS, config_map, finalizers, pod, policy};

/// Labels on a cluster-scoped resource.
#[tokio::test]
async fn cluster_scoped_namespace_labels() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let namespaces: Api<Namespace> = Api::all(env.client()?);
    for name in StrategyName::ALL {
        let observed = namespaces.get(ns.name()).await?;
        let writer = Writer::<Namespace>::new(env.client()?, strategy_for(name, policy()));
        writer
            .write(
                &observed,
                &Intent::set_label(format!("by-{name}"), "yes").into(),
            )
            .await?;
    }
    let labels = namespaces
        .get(ns.name())
        .await?
        .metadata
        .labels
        .unwrap_or_default();
    for name in StrategyName::ALL {
        assert_eq!(
            labels.get(&format!("by-{name}")).map(String::as_str),
            Some("yes"),
            "{name}"
        );
    }
    Ok(())
}

fn widget_crd() -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.concord.example"},
        "spec": {
            "group": "concord.example",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {
                            "type": "object",
                            "properties": {
                                "phase": {"type": "string"},
                                "conditions": {
                                    "type": "array",
                                    "x-kubernetes-list-type": "map",
                                    "x-kubernetes-list-map-keys": ["type"],
                                    "items": {
                                        "type": "object",
                                        "required": ["type", "status"],
                                        "properties": {
                                            "type": {"type": "string"},
                                            "status": {"type": "string"},
                                            "reason": {"type": "string"},
                                            "message": {"type": "string"},
                                            "lastTransitionTime": {"type": "string", "format": "date-time"},
                                        },
                                    },
                                },
                            },
                        },
                    },
                }},
            }],
        },
    }))?)
}

/// A custom resource, through `DynamicObject`: metadata on the main
/// resource, status on the status subresource, for every strategy.
#[tokio::test]
async fn custom_resource_metadata_and_status_subresource() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    env.install_crd(widget_crd()?).await?;
    let ns = env.namespace().await?;
    let ar = ApiResource {
        group: "concord.example".into(),
        version: "v1".into(),
        api_version: "concord.example/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
    for name in StrategyName::ALL {
        let mut widget = DynamicObject::new(name.as_str(), &ar);
        widget.data = json!({"spec": {"size": 3}});
        let created = widgets.create(&PostParams::default(), &widget).await?;
        let writer =
            Writer::<DynamicObject>::new_with(env.client()?, strategy_for(name, policy()), &ar);
        let labelled = writer
            .write(&created, &Intent::add_finalizer(OURS).into())
            .await?;
        let observed = labelled.object.context("no object")?;
        // ANCHOR: status
        let status = Mutation::new()
            .with(Intent::MergeStatus(json!({"phase": "Ready"})))
            .with(Intent::SetCondition(concord_strategies::Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Reconciled".into(),
                message: "all good".into(),
            }));
        // ANCHOR_END: status
        writer.write(&observed, &status).await?;
        let stored = widgets.get(name.as_str()).await?;
        assert_eq!(stored.data["status"]["phase"], "Ready", "{name}");
        assert_eq!(
            stored.data["status"]["conditions"][0]["type"], "Ready",
            "{name}"
        );
        assert_eq!(stored.data["spec"]["size"], 3, "{name}");
        assert_eq!(finalizers(&stored.metadata), [OURS], "{name}");
    }
    Ok(())
}

/// A Pod's status subresource, typed.
#[tokio::test]
async fn pod_status_subresource_write() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let observed = pods
        .create(&PostParams::default(), &pod("status", &[])?)
        .await?;
    let writer = Writer::<Pod>::new(env.client()?, strategy_for(StrategyName::Strict, policy()));
    let status = Mutation::from(Intent::MergeStatus(json!({"message": "set by concord"})));
    let written = writer.write(&observed, &status).await?;
    let stored = written.object.context("no object")?;
    assert_eq!(
        stored.status.and_then(|s| s.message).as_deref(),
        Some("set by concord")
    );
    Ok(())
}

/// Counters land in the metrics hook, per strategy and resource.
#[tokio::test]
async fn metrics_count_requests_and_conflicts() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let stale = cms
        .create(&PostParams::default(), &config_map("metrics", &[])?)
        .await?;
    cms.patch(
        "metrics",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"other": "1"}})),
    )
    .await?;
    let metrics = Arc::new(WriteMetrics::default());
    let target = Target::new(env.client()?, ApiResource::erase::<ConfigMap>(&()))
        .with_metrics(metrics.clone());
    let strategy = strategy_for(StrategyName::Update, policy());
    let dynamic: DynamicObject = serde_json::from_value(serde_json::to_value(&stale)?)?;
    strategy
        .write(&target, &dynamic, &Intent::set_label("m", "1").into())
        .await?;
    let snap = metrics.snapshot();
    assert_eq!(
        (snap.writes, snap.conflicts, snap.retries, snap.errors),
        (1, 1, 1, 0)
    );
    assert_eq!(
        (snap.requests(Verb::Update), snap.requests(Verb::Get)),
        (2, 1)
    );
    assert_eq!(snap.latency_buckets.iter().sum::<u64>(), 1);
    Ok(())
}

#[tokio::test]
async fn locked_strategy_table_is_empty_after_concurrent_writes() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let locked = Arc::new(Locked::with_table(Arc::default()));
    let writer = Writer::<ConfigMap>::new(env.client()?, locked.clone());
    let mut tasks = Vec::new();
    for i in 0..20 {
        let observed = cms
            .create(
                &PostParams::default(),
                &config_map(&format!("cm-{i}"), &[])?,
            )
            .await?;
        let writer = writer.clone();
        tasks.push(tokio::spawn(async move {
            writer
                .write(&observed, &Intent::set_label("l", "1").into())
                .await
        }));
    }
    for task in tasks {
        task.await??;
    }
    assert!(locked.table().is_some_and(|table| table.is_empty()));
    Ok(())
}
