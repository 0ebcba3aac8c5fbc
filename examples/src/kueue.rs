//! The Kueue-like pod finalizer operator: its gate, reconciler, permissions
//! and demo. `examples/kueue-finalizer/main.rs` runs it; the integration
//! tests run the same code.

use std::sync::Arc;
use std::time::Duration;

use concord::featuregates::{RegistryError, StageChange, StrategyTable};
use concord::strategies::{ConflictPolicy, Writer, strategy_for};
use concord::{
    Action, Context, EventType, Intent, Reconciler, WriteError, featuregates::Feature,
    featuregates::FeatureRegistry, featuregates::FeatureSpec, featuregates::Operation,
    featuregates::Stage, featuregates::StrategyName, finalizer, finalizer::FinalizerError,
    finalizer::Lifecycle, rbac::Permissions,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::demo::wait_until;
#[doc(inline)]
pub use crate::pod_phase::PodPhase;

// ANCHOR: gate
/// Remove our finalizer from Pods with an optimistic lock (`strict`) rather
/// than a plain merge patch (`lax`).
///
/// - owner: concord examples (kueue-finalizer)
/// - beta: 0.1 (on by default), as Kueue's gate of the same name
/// - graduates when the race benchmark shows at most 5% slower finalizer
///   removal at 10,000 pods
pub const REMOVE_FINALIZERS_WITH_STRICT_PATCH: FeatureSpec =
    FeatureSpec::beta("RemoveFinalizersWithStrictPatch")
        .with_owner("concord examples (kueue-finalizer)")
        .with_history(&[StageChange::new(Stage::Beta, "0.1")])
        .with_description(
            "remove our finalizer from pods with an optimistic lock (strict) instead of a plain merge patch (lax)",
        );
// ANCHOR_END: gate

/// The example's configuration file, `examples/kueue-finalizer/config.yaml`.
pub const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/kueue-finalizer/config.yaml");

/// The same with `guarded` finalizer removal,
/// `examples/kueue-finalizer/guarded.yaml`.
pub const GUARDED_CONFIG: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/kueue-finalizer/guarded.yaml");

/// The finalizer this operator holds Pods with.
pub const FINALIZER: &str = "kueue.concord.dev/managed";
/// Pods carrying this label (any value) are managed.
pub const MANAGED_LABEL: &str = "kueue.concord.dev/queue-name";
/// The finalizer the demo's "other controller" adds meanwhile.
pub const FOREIGN_FINALIZER: &str = "audit.example.com/keep";

/// A registry holding this operator's gate, and the gate's handle.
///
/// # Errors
///
/// Only if the gate's declaration were inconsistent.
pub fn registry() -> Result<(FeatureRegistry, Feature), RegistryError> {
    let mut registry = FeatureRegistry::new();
    let gate = registry.register(REMOVE_FINALIZERS_WITH_STRICT_PATCH)?;
    Ok((registry, gate))
}

// ANCHOR: reconciler
/// Holds managed Pods with [`FINALIZER`] while they run, and releases them
/// when they finish or are deleted — never naming a strategy: whether the
/// removal is `strict`, `guarded` or `lax` is the YAML's (and the gate's)
/// decision. It reconciles from the [`PodPhase`] view.
#[derive(Debug, Default)]
pub struct PodFinalizer;

#[concord::async_trait]
impl Reconciler<PodPhase> for PodFinalizer {
    type Error = FinalizerError<WriteError>;

    async fn reconcile(
        &self,
        pod: Arc<PodPhase>,
        ctx: &Context<PodPhase>,
    ) -> Result<Action, Self::Error> {
        if !pod.labels().contains_key(MANAGED_LABEL) {
            return Ok(Action::await_change());
        }
        if pod.finished() && pod.metadata.deletion_timestamp.is_none() {
            // The workload has accounted for the finished Pod: let it go.
            // Removing an absent finalizer sends nothing.
            let written = ctx
                .remove_finalizer(&pod, FINALIZER)
                .await
                .map_err(|source| FinalizerError::RemoveFinalizer {
                    finalizer: FINALIZER.to_owned(),
                    source,
                })?;
            if !written.outcome.unchanged {
                ctx.event(&pod, EventType::Normal, "Released", "pod finished")
                    .await;
            }
            return Ok(Action::await_change());
        }
        finalizer(ctx, FINALIZER, pod, |event| async move {
            if let Lifecycle::Cleanup(pod) = event {
                let strategy = ctx.strategy(Operation::RemoveFinalizer);
                tracing::debug!(pod = %pod.name_any(), %strategy, "releasing a deleted pod");
            }
            Ok::<_, WriteError>(Action::await_change())
        })
        .await
    }
}

/// Adds the operator's controller over the managed Pods of `pods` (a
/// namespace, or all) to `manager`: a controller of the [`PodPhase`] view,
/// so its cache holds views only.
///
/// # Errors
///
/// [`concord::Error::InvalidController`] if the controller does not check.
pub fn add_controller(
    manager: &mut concord::Manager,
    pods: Api<PodPhase>,
) -> Result<(), concord::Error> {
    manager.controller("pods", pods, PodFinalizer).add()
}
// ANCHOR_END: reconciler

// ANCHOR: permissions
/// What this operator does to the API, for [`Permissions::rules`]: it
/// watches Pods, adds and removes its finalizer, publishes events and may
/// run with leader election.
pub fn permissions(table: &StrategyTable) -> Permissions<'_> {
    Permissions::new(table)
        .watches::<Pod>()
        .writes::<Pod>(&[Operation::AddFinalizer, Operation::RemoveFinalizer])
        .events()
        .leader_election()
}
// ANCHOR_END: permissions

/// What the demo saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoReport {
    /// Pods that finished while another controller added its finalizer.
    pub finished: usize,
    /// Of those, how many still carry the other controller's finalizer.
    pub foreign_kept: usize,
    /// Pods deleted while running, all gone once we released them.
    pub deleted: usize,
}

/// A managed Pod named `name`.
///
/// # Errors
///
/// Never in practice: the JSON is fixed.
pub fn managed_pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {MANAGED_LABEL: "demo"}},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]}
    }))?)
}

// ANCHOR: demo
/// Runs the Kueue incident on `pods` Pods in `namespace` while the operator
/// is running: half finish while another controller adds its own finalizer
/// to them (the race that lost 7,297 of 10,000 finalizers upstream), half
/// are deleted. Cleans up after itself.
///
/// # Errors
///
/// An API error, or a step that did not complete within a minute.
pub async fn demo(client: &Client, namespace: &str, pods: usize) -> anyhow::Result<DemoReport> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let names: Vec<String> = (0..pods).map(|i| format!("job-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &managed_pod(name)?)
            .await?;
    }
    let ours = |p: &Pod| p.finalizers().iter().any(|f| f == FINALIZER);
    let minute = Duration::from_secs(60);
    wait_until(&api, "our finalizer on every pod", minute, |list| {
        list.iter().filter(|p| ours(p)).count() == pods
    })
    .await?;

    // The other controller writes safely (update with retry): any loss is ours.
    let other = Writer::<Pod>::new(
        client.clone(),
        strategy_for(StrategyName::Update, ConflictPolicy::default()),
    )
    .with_builtin_type();
    let (finishing, deleting) = names.split_at(pods / 2);
    let finish = finishing.iter().map(|name| async {
        let done = json!({"status": {"phase": "Succeeded"}});
        let pod = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
            .await?;
        other
            .write(&pod, &Intent::add_finalizer(FOREIGN_FINALIZER).into())
            .await?;
        anyhow::Ok(())
    });
    let delete = deleting.iter().map(|name| async {
        api.delete(name, &DeleteParams::default()).await?;
        anyhow::Ok(())
    });
    let (finished, deleted) = futures::join!(
        futures::future::try_join_all(finish),
        futures::future::try_join_all(delete)
    );
    let (finished, deleted) = (finished?.len(), deleted?.len());
    wait_until(&api, "every pod released", minute, |list| {
        list.len() == finished && !list.iter().any(ours)
    })
    .await?;
    let foreign_kept = api
        .list(&Default::default())
        .await?
        .items
        .iter()
        .filter(|p| p.finalizers().iter().any(|f| f == FOREIGN_FINALIZER))
        .count();

    for pod in api.list(&Default::default()).await?.items {
        other
            .write(&pod, &Intent::remove_finalizer(FOREIGN_FINALIZER).into())
            .await?;
        api.delete(&pod.name_any(), &DeleteParams::default())
            .await?;
    }
    wait_until(&api, "every pod gone", minute, <[Pod]>::is_empty).await?;
    Ok(DemoReport {
        finished,
        foreign_kept,
        deleted,
    })
}
// ANCHOR_END: demo
