//! Taking turns, against a real kube-apiserver and etcd: two tasks of one
//! process writing the same object from the same cached copy cost two
//! requests and no conflict, the second starting from the first one's
//! answer; a write from another process in between still conflicts and is
//! not lost.
//!
//! ```text
//! cargo test -p concord-tests --test strategies incidents::turns::
//! ```
use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, Intent, ObjectKey, StrategyName, Target, Verb, WriteStrategy, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use serde_json::json;
use tokio::sync::Notify;

use crate::support;

use support::{ARGO, COMPLETED, FOREIGN, finalizers, pod, policy};

/// Before its first request: tells the test it is about to send, then
/// holds the request back long enough for a second task to be waiting.
#[derive(Debug, Default)]
struct HoldFirst {
    sending: Notify,
}

#[async_trait]
impl BeforeWrite for HoldFirst {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt == 0 {
            self.sending.notify_one();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// Before its first request: another process sets its label.
#[derive(Debug)]
struct Foreign {
    api: Api<Pod>,
    name: String,
}

#[async_trait]
impl BeforeWrite for Foreign {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt == 0 {
            let add = json!({"metadata": {"labels": {FOREIGN: "set"}}});
            let _ = self
                .api
                .patch(&self.name, &PatchParams::default(), &Patch::Merge(add))
                .await;
        }
    }
}

/// Argo's two paths: one removes its finalizer, the other sets the
/// completed label, both from the same copy, the second while the first's
/// request is in flight. `foreign` puts another process's write right
/// before the second's request. Returns the outcomes and the stored pod.
async fn argo(
    name: &str,
    strategy: StrategyName,
    foreign: bool,
) -> anyhow::Result<(
    concord_strategies::Outcome,
    concord_strategies::Outcome,
    Pod,
)> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let observed = pods
        .create(&PostParams::default(), &pod(name, &[ARGO])?)
        .await?;
    let strategy: Arc<dyn WriteStrategy> = strategy_for(strategy, policy());
    let hold = Arc::new(HoldFirst::default());
    let first = Writer::<Pod>::new(ns.client(), strategy.clone())
        .with_builtin_type()
        .with_target(|t| t.with_before_write(hold.clone()));
    // Two writers of one process: they share turns, as a manager's do.
    let second = Writer::<Pod>::new(ns.client(), strategy)
        .with_builtin_type()
        .with_target(|t| t.with_turns(first.target().turns().clone()));
    let second = if foreign {
        let hook = Arc::new(Foreign {
            api: pods.clone(),
            name: name.into(),
        });
        second.with_target(|t| t.with_before_write(hook))
    } else {
        second
    };
    let copy = observed.clone();
    let removal = tokio::spawn(async move {
        first
            .write(&copy, &Intent::remove_finalizer(ARGO).into())
            .await
    });
    hold.sending.notified().await;
    let label = second
        .write(&observed, &Intent::set_label(COMPLETED, "true").into())
        .await?;
    let removal = removal.await??;
    let stored = pods.get(name).await?;
    Ok((removal.outcome, label.outcome, stored))
}

fn sent(outcome: &concord_strategies::Outcome) -> u32 {
    outcome.total_requests()
}

// ANCHOR: turns
#[tokio::test]
async fn two_tasks_writing_one_object_take_turns_without_a_conflict() -> anyhow::Result<()> {
    for (name, strategy) in [
        ("turns-strict", StrategyName::Strict),
        ("turns-update", StrategyName::Update),
    ] {
        let (first, second, stored) = argo(name, strategy, false).await?;
        ensure!(
            finalizers(&stored.metadata).is_empty(),
            "{name}: the finalizer removal was lost: {:?}",
            stored.metadata.finalizers
        );
        ensure!(
            stored.metadata.labels.unwrap_or_default().get(COMPLETED) == Some(&"true".to_owned()),
            "{name}: the completed label was lost"
        );
        ensure!(
            first.conflicts == 0 && second.conflicts == 0,
            "{name}: conflicts {} and {}",
            first.conflicts,
            second.conflicts
        );
        ensure!(
            second.rebased_on_own_write,
            "{name}: the second write did not start from the first one's answer"
        );
        ensure!(
            sent(&first) + sent(&second) == 2 && second.requests(Verb::Get) == 0,
            "{name}: {} and {} requests sent",
            sent(&first),
            sent(&second)
        );
    }
    Ok(())
}
// ANCHOR_END: turns

#[tokio::test]
async fn a_write_from_another_process_between_turns_still_conflicts() -> anyhow::Result<()> {
    let (_, second, stored) = argo("turns-foreign", StrategyName::Strict, true).await?;
    ensure!(second.rebased_on_own_write, "no turn was taken");
    ensure!(
        second.conflicts == 1,
        "the other process's write went unnoticed: {} conflicts",
        second.conflicts
    );
    ensure!(
        finalizers(&stored.metadata).is_empty(),
        "the finalizer removal was lost: {:?}",
        stored.metadata.finalizers
    );
    let labels = stored.metadata.labels.unwrap_or_default();
    ensure!(
        labels.get(COMPLETED) == Some(&"true".to_owned()),
        "the completed label was lost"
    );
    ensure!(
        labels.get(FOREIGN) == Some(&"set".to_owned()),
        "the other process's label was lost"
    );
    Ok(())
}

/// The same two paths through `WriteStrategy::write` from an item of a
/// list (as a kube-rs reflector holds it after its first list): the API
/// server sends list items without `apiVersion`, and the second write must
/// still start from the first one's answer.
#[tokio::test]
async fn copies_from_a_list_take_turns_too() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let resource = ApiResource::erase::<Pod>(&());
    let listed: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    for strategy in [
        StrategyName::Strict,
        StrategyName::Update,
        StrategyName::Guarded,
    ] {
        let name = format!("listed-{strategy}");
        pods.create(&PostParams::default(), &pod(&name, &[ARGO])?)
            .await?;
        let observed = listed
            .list(&ListParams::default().fields(&format!("metadata.name={name}")))
            .await?
            .items
            .pop()
            .ok_or_else(|| anyhow::anyhow!("{name} is not listed"))?;
        let strategy: Arc<dyn WriteStrategy> = strategy_for(strategy, policy());
        let hold = Arc::new(HoldFirst::default());
        let first = Target::new(ns.client(), resource.clone()).with_before_write(hold.clone());
        let second = Target::new(ns.client(), resource.clone()).with_turns(first.turns().clone());
        let (copy, removing) = (observed.clone(), strategy.clone());
        let removal = tokio::spawn(async move {
            removing
                .write(&first, &copy, &Intent::remove_finalizer(ARGO).into())
                .await
        });
        hold.sending.notified().await;
        let label = strategy
            .write(
                &second,
                &observed,
                &Intent::set_label(COMPLETED, "true").into(),
            )
            .await?;
        let removal = removal.await??;
        let stored = pods.get(&name).await?;
        ensure!(
            finalizers(&stored.metadata).is_empty()
                && stored.metadata.labels.unwrap_or_default().get(COMPLETED)
                    == Some(&"true".to_owned()),
            "{name}: a write was lost"
        );
        ensure!(
            removal.outcome.conflicts == 0 && label.outcome.conflicts == 0,
            "{name}: conflicts {} and {}: the second write did not start from the first one's answer",
            removal.outcome.conflicts,
            label.outcome.conflicts
        );
        ensure!(
            sent(&removal.outcome) + sent(&label.outcome) == 2,
            "{name}: {} and {} requests sent",
            sent(&removal.outcome),
            sent(&label.outcome)
        );
    }
    Ok(())
}
