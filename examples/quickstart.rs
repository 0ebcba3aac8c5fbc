//! A small operator that runs end to end against the embedded control plane.
//!
//! What it shows: a kube-runtime controller that adds a finalizer and a label
//! to every Pod it sees, and removes the finalizer again once the Pod is being
//! deleted — the lifecycle both of concord's motivating incidents are about.
//! It creates its own Pods, deletes them, waits until every one is gone, and
//! prints what happened.
//!
//! What it needs: Go and Rust on the machine (the control plane is built from
//! its Go modules the first time, then cached), or a cluster in `$KUBECONFIG`.
//!
//! ```text
//! cargo run --release --example quickstart -- [--pods 20] [--kubeconfig PATH]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

const FINALIZER: &str = "quickstart.concord.dev/cleanup";
const NAMESPACE: &str = "quickstart";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("info,kube=warn").init();
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let pods_wanted: usize = flag("--pods").map(|v| v.parse()).transpose().context("--pods")?.unwrap_or(20);
    let connection = concord_examples::connect(flag("--kubeconfig").map(Into::into)).await?;
    let client = connection.client.clone();
    println!("connected to {}", connection.server);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))?;
    namespaces.patch(NAMESPACE, &PatchParams::apply("quickstart").force(), &Patch::Apply(&ns)).await?;
    wait_for_default_service_account(&client).await?;

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let controller = Controller::new(pods.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(client.clone()))
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    let start = Instant::now();
    for i in 0..pods_wanted {
        let pod = serde_json::from_value(json!({
            "metadata": {"name": format!("demo-{i}")},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]}
        }))?;
        pods.create(&PostParams::default(), &pod).await?;
    }
    wait_until(&pods, |list| list.iter().all(|p| p.finalizers().iter().any(|f| f == FINALIZER)) && list.len() == pods_wanted).await?;
    println!("{pods_wanted} pods carry the finalizer and the label after {:?}", start.elapsed());

    pods.delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    wait_until(&pods, |list| list.is_empty()).await?;
    println!("all {pods_wanted} pods deleted: the controller removed its finalizer from each ({:?} in all)", start.elapsed());
    controller.abort();
    Ok(())
}

async fn reconcile(pod: Arc<Pod>, client: Arc<Client>) -> Result<Action, kube::Error> {
    let pods: Api<Pod> = Api::namespaced((*client).clone(), &pod.namespace().unwrap_or_default());
    let has_finalizer = pod.finalizers().iter().any(|f| f == FINALIZER);
    if pod.metadata.deletion_timestamp.is_some() {
        if has_finalizer {
            let rest: Vec<&String> = pod.finalizers().iter().filter(|f| *f != FINALIZER).collect();
            let patch = json!({"metadata": {"resourceVersion": pod.resource_version(), "finalizers": rest}});
            pods.patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
        }
    } else if !has_finalizer {
        let mut finalizers = pod.finalizers().to_vec();
        finalizers.push(FINALIZER.into());
        let patch = json!({"metadata": {
            "resourceVersion": pod.resource_version(),
            "finalizers": finalizers,
            "labels": {"quickstart.concord.dev/seen": "true"}
        }});
        pods.patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    }
    Ok(Action::await_change())
}

fn error_policy(_pod: Arc<Pod>, error: &kube::Error, _client: Arc<Client>) -> Action {
    tracing::debug!(%error, "reconcile failed; retrying");
    Action::requeue(Duration::from_millis(200))
}

async fn wait_for_default_service_account(client: &Client) -> anyhow::Result<()> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    for _ in 0..600 {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("namespace {NAMESPACE} has no default ServiceAccount after 60s")
}

async fn wait_until(pods: &Api<Pod>, done: impl Fn(&[Pod]) -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if done(&pods.list(&ListParams::default()).await?.items) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("pods in {NAMESPACE} did not reach the expected state within 120s")
}
