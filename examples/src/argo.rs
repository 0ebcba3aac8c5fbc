//! The Argo-like pod cleanup operator: two event paths, one atomic write.
//! `examples/argo-cleanup/main.rs` runs it; the integration tests run the
//! same code.

use std::sync::Arc;
use std::time::Duration;

use concord::featuregates::StrategyTable;
use concord::strategies::{ConflictPolicy, Writer, strategy_for};
use concord::{
    Action, Context, Intent, Mutation, Reconciler, WriteError, featuregates::Operation,
    featuregates::StrategyName, rbac::Permissions,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::demo::wait_until;
#[doc(inline)]
pub use crate::pod_phase::PodPhase;

/// The example's configuration file, `examples/argo-cleanup/config.yaml`.
pub const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/argo-cleanup/config.yaml");

/// The finalizer that keeps a workflow Pod until its result is recorded.
pub const FINALIZER: &str = "workflows.concord.dev/status";
/// The label that marks a Pod whose result was recorded.
pub const COMPLETED_LABEL: &str = "workflows.concord.dev/completed";
/// Pods carrying this label (any value) belong to a workflow.
pub const WORKFLOW_LABEL: &str = "workflows.concord.dev/workflow";
/// A finalizer someone else holds, listed before ours — where Argo's
/// `remove /metadata/finalizers/0` struck.
pub const FOREIGN_FINALIZER: &str = "backup.example.com/keep";

// ANCHOR: complete
/// Records a Pod's result: removes our finalizer **and** sets the completed
/// label in one mutation, so it is one write whichever strategy sends it —
/// never a finalizer removed without the label, or the reverse.
///
/// Both event paths call this, possibly at the same moment for the same
/// Pod, from different controllers. The mutation removes our finalizer by
/// name, not by index, and the configured strategy (`update` with retry in
/// `config.yaml`, as Argo's fix) sends it with the observed
/// resourceVersion: the second writer gets a `409`, re-reads, finds
/// nothing left to do and sends nothing.
///
/// # Errors
///
/// As [`Context::write`]; a Pod already gone counts as done.
pub async fn complete(ctx: &Context<PodPhase>, pod: &PodPhase) -> Result<(), WriteError> {
    let done = Mutation::new()
        .with(Intent::remove_finalizer(FINALIZER))
        .with(Intent::set_label(COMPLETED_LABEL, "true"));
    match ctx.write(pod, done).await {
        Ok(_) | Err(WriteError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}
// ANCHOR_END: complete

// ANCHOR: paths
/// The deletion path (Argo's informer `DeleteFunc`): holds workflow Pods
/// with our finalizer, and records the result of a Pod being deleted.
#[derive(Debug, Default)]
pub struct DeletionPath;

#[concord::async_trait]
impl Reconciler<PodPhase> for DeletionPath {
    type Error = WriteError;

    async fn reconcile(
        &self,
        pod: Arc<PodPhase>,
        ctx: &Context<PodPhase>,
    ) -> Result<Action, WriteError> {
        if !pod.labels().contains_key(WORKFLOW_LABEL) {
            return Ok(Action::await_change());
        }
        let deleting = pod.metadata.deletion_timestamp.is_some();
        if deleting && holds(&*pod) {
            complete(ctx, &pod).await?;
        } else if !deleting && !holds(&*pod) && !recorded(&*pod) && !pod.finished() {
            ctx.add_finalizer(&pod, FINALIZER).await?;
        }
        Ok(Action::await_change())
    }
}

/// The completion path (Argo's `labelPodCompleted` action): records the
/// result of a Pod that ran to completion.
#[derive(Debug, Default)]
pub struct CompletionPath;

#[concord::async_trait]
impl Reconciler<PodPhase> for CompletionPath {
    type Error = WriteError;

    async fn reconcile(
        &self,
        pod: Arc<PodPhase>,
        ctx: &Context<PodPhase>,
    ) -> Result<Action, WriteError> {
        if pod.labels().contains_key(WORKFLOW_LABEL) && pod.finished() && holds(&*pod) {
            complete(ctx, &pod).await?;
        }
        Ok(Action::await_change())
    }
}
// ANCHOR_END: paths

fn holds<K: ResourceExt>(pod: &K) -> bool {
    pod.finalizers().iter().any(|f| f == FINALIZER)
}

/// Whether the Pod's result was recorded (it carries the completed label).
pub fn recorded<K: ResourceExt>(pod: &K) -> bool {
    pod.labels().get(COMPLETED_LABEL).map(String::as_str) == Some("true")
}

/// What this operator does to the API: two controllers watch Pods, and
/// both add or remove the finalizer (the completed label rides in the same
/// write, filed under `remove-finalizer`); it may run with leader election.
pub fn permissions(table: &StrategyTable) -> Permissions<'_> {
    Permissions::new(table)
        .watches::<Pod>()
        .writes::<Pod>(&[Operation::AddFinalizer, Operation::RemoveFinalizer])
        .leader_election()
}

/// What the demo saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoReport {
    /// Pods completed and deleted at the same moment.
    pub pods: usize,
    /// Of those, how many carry the completed label and not our finalizer.
    pub recorded: usize,
    /// Of those, how many still hold the foreign finalizer listed first.
    pub foreign_kept: usize,
}

/// A workflow Pod named `name`, created with a foreign finalizer first.
///
/// # Errors
///
/// Never in practice: the JSON is fixed.
pub fn workflow_pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {WORKFLOW_LABEL: "demo"},
            "finalizers": [FOREIGN_FINALIZER],
        },
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]}
    }))?)
}

// ANCHOR: demo
/// Runs the Argo incident on `pods` Pods in `namespace` while the operator
/// is running: every Pod completes **and** is deleted at the same moment,
/// so both paths race to record it. Cleans up after itself.
///
/// # Errors
///
/// An API error, or a step that did not complete within a minute.
pub async fn demo(client: &Client, namespace: &str, pods: usize) -> anyhow::Result<DemoReport> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let names: Vec<String> = (0..pods).map(|i| format!("step-{i}")).collect();
    for name in &names {
        api.create(&PostParams::default(), &workflow_pod(name)?)
            .await?;
    }
    let minute = Duration::from_secs(60);
    wait_until(&api, "our finalizer on every pod", minute, |list| {
        list.iter().filter(|p| holds(*p)).count() == pods
    })
    .await?;

    let race = names.iter().map(|name| {
        let api = api.clone();
        async move {
            let done = Patch::Merge(json!({"status": {"phase": "Succeeded"}}));
            let (patch, delete) = (PatchParams::default(), DeleteParams::default());
            let (completed, deleted) = futures::join!(
                api.patch_status(name, &patch, &done),
                api.delete(name, &delete),
            );
            completed?;
            deleted?;
            anyhow::Ok(())
        }
    });
    futures::future::try_join_all(race).await?;
    wait_until(&api, "every pod recorded", minute, |list| {
        list.len() == pods && list.iter().all(|p| recorded(p) && !holds(p))
    })
    .await?;
    let list = api.list(&Default::default()).await?.items;
    let recorded = list.iter().filter(|p| recorded(*p) && !holds(*p)).count();
    let foreign_kept = list
        .iter()
        .filter(|p| p.finalizers().first().map(String::as_str) == Some(FOREIGN_FINALIZER))
        .count();

    let owner = Writer::<Pod>::new(
        client.clone(),
        strategy_for(StrategyName::Strict, ConflictPolicy::default()),
    )
    .with_builtin_type();
    for pod in &list {
        owner
            .write(pod, &Intent::remove_finalizer(FOREIGN_FINALIZER).into())
            .await?;
    }
    wait_until(&api, "every pod gone", minute, <[Pod]>::is_empty).await?;
    Ok(DemoReport {
        pods,
        recorded,
        foreign_kept,
    })
}
// ANCHOR_END: demo
