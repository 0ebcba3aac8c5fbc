//! The write strategies under concurrent writers, against a real
//! kube-apiserver and etcd.
//!
//! Run with `cargo test -p concord-tests --test strategies incidents::stress:: -- --nocapture`
//! to see the stress-test figures.
use std::sync::Arc;
use std::time::Instant;

use anyhow::ensure;
use concord_strategies::{
    ConflictPolicy, Intent, RetryPolicy, StrategyName, Verb, WriteMetrics, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support;

use support::{config_map, finalizers};

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
