//! The write strategies against a real kube-apiserver and etcd.
//!
//! Each incident is reproduced deterministically: the competing write is
//! placed exactly between a strategy's read and its write, through the
//! [`BeforeWrite`] hook or by handing the strategy a stale observed object,
//! which is what a controller reading from its cache does.
//!
//! Run with `cargo test -p concord-tests --test strategies -- --nocapture`
//! to see the stress-test figures.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, ConflictPolicy, Error, Intent, Lax, Locked, Mutation, ObjectKey, RetryPolicy,
    StrategyName, Target, Verb, WriteMetrics, WriteStrategy, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::json;

const OURS: &str = "kueue.x-k8s.io/managed";
const FOREIGN: &str = "example.com/foreign";
const ARGO: &str = "workflows.argoproj.io/status";
const COMPLETED: &str = "workflows.argoproj.io/completed";

fn pod(name: &str, finalizers: &[&str]) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": finalizers, "labels": {COMPLETED: "false"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))?)
}

fn config_map(name: &str, finalizers: &[&str]) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "finalizers": finalizers},
        "data": {"k": "v"},
    }))?)
}

fn finalizers(meta: &kube::core::ObjectMeta) -> Vec<String> {
    meta.finalizers.clone().unwrap_or_default()
}

fn policy() -> ConflictPolicy {
    ConflictPolicy::default()
}

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

/// What each stress write adds: a label (a map key, which a merge patch
/// sends alone) or a finalizer (a list entry, which a merge patch sends with
/// the whole list).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry {
    Label,
    Finalizer,
}

/// `tasks` tasks × `writes` writes on one ConfigMap per strategy, each write
/// adding its own entry; every task writes from the last object it saw,
/// like a controller cache. Prints one row per strategy and returns the
/// entries each strategy ended with.
async fn stress(
    entry: Entry,
    tasks: usize,
    writes: usize,
) -> anyhow::Result<Vec<(StrategyName, usize, Vec<String>)>> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    // ANCHOR: stress_policy
    let mut retry = RetryPolicy::default().with_steps(1_000);
    retry.jitter = 1.0;
    let policy = ConflictPolicy::Retry(retry);
    // ANCHOR_END: stress_policy
    println!("\n{tasks} tasks x {writes} writes, each adding its own {entry:?}");
    println!(
        "{:<8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>7} {:>7} {:>8} {:>9}",
        "strategy",
        "writes",
        "get",
        "patch",
        "update",
        "apply",
        "requests",
        "conflicts",
        "retries",
        "errors",
        "entries",
        "elapsed"
    );
    let mut results = Vec::new();
    for name in StrategyName::ALL {
        let observed = cms
            .create(&PostParams::default(), &config_map(name.as_str(), &[])?)
            .await?;
        let metrics = Arc::new(WriteMetrics::default());
        let writer = Writer::<ConfigMap>::new(env.client()?, strategy_for(name, policy))
            .with_target(|t| t.with_metrics(metrics.clone()));
        let start = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let (writer, mut seen) = (writer.clone(), observed.clone());
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    for i in 0..writes {
                        let intent = match entry {
                            Entry::Label => Intent::set_label(format!("w{task}-{i}"), "x"),
                            Entry::Finalizer => {
                                Intent::add_finalizer(format!("example.com/w{task}-{i}"))
                            }
                        };
                        match writer.write(&seen, &intent.into()).await {
                            Ok(written) => seen = written.object.unwrap_or(seen),
                            Err(err) => errors.push(err.to_string()),
                        }
                    }
                    errors
                })
            })
            .collect();
        let mut errors = Vec::new();
        for handle in handles {
            errors.extend(handle.await?);
        }
        let elapsed = start.elapsed();
        let stored = cms.get(name.as_str()).await?.metadata;
        let entries = match entry {
            Entry::Label => stored.labels.unwrap_or_default().len(),
            Entry::Finalizer => finalizers(&stored).len(),
        };
        if entry == Entry::Finalizer {
            // Let the namespace go away when the test ends.
            cms.patch(
                name.as_str(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await?;
        }
        let m = metrics.snapshot();
        println!(
            "{:<8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>7} {:>7} {:>8} {:>9.2?}",
            name.as_str(),
            m.writes,
            m.requests(Verb::Get),
            m.requests(Verb::Patch),
            m.requests(Verb::Update),
            m.requests(Verb::Apply),
            m.total_requests(),
            m.conflicts,
            m.retries,
            m.errors,
            entries,
            elapsed,
        );
        results.push((name, entries, errors));
    }
    Ok(results)
}

/// 8 tasks × 50 writes on one object, each adding its own label: every
/// strategy but `lax` must end with all 400 labels and no error.
#[tokio::test]
async fn stress_eight_writers_fifty_labels_each() -> anyhow::Result<()> {
    let results = stress(Entry::Label, 8, 50).await?;
    for (name, labels, errors) in results {
        if name != StrategyName::Lax {
            ensure!(
                labels == 400 && errors.is_empty(),
                "{name}: {labels} labels, errors {errors:?}"
            );
        }
    }
    Ok(())
}

/// The same with finalizers, a list: the safe strategies keep all 80; `lax`
/// writes whole lists computed from stale copies and typically ends with
/// fewer (printed, not asserted — the Kueue test proves the loss
/// deterministically).
#[tokio::test]
async fn stress_eight_writers_ten_finalizers_each() -> anyhow::Result<()> {
    let results = stress(Entry::Finalizer, 8, 10).await?;
    for (name, count, errors) in results {
        if name != StrategyName::Lax {
            ensure!(
                count == 80 && errors.is_empty(),
                "{name}: {count} finalizers, errors {errors:?}"
            );
        }
    }
    Ok(())
}

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
    assert!(locked.table().is_empty());
    Ok(())
}
