//! A fresh namespace per contender, deleted again afterwards.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::core::ObjectMeta;

use crate::scenarios::BENCH_LABEL;

/// How long a namespace may take to become usable, and to go away when
/// empty.
const TIMEOUT: Duration = Duration::from_secs(180);
/// How much longer its deletion may take per pod in it: the namespace
/// controller deletes them a few hundred a second on two cores.
const PER_POD: Duration = Duration::from_millis(20);

/// Create a namespace for `contender` and wait for its default
/// ServiceAccount, without which no pod can be created.
///
/// # Errors
///
/// When the namespace cannot be created or never becomes usable.
pub async fn create(client: &Client, scenario: &str, contender: &str) -> anyhow::Result<String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() % 0xfffff)
        .unwrap_or(0);
    let name = format!("race-{scenario}-{contender}-{nanos:x}");
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(BENCH_LABEL.to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(name);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("namespace {name} has no default ServiceAccount after {TIMEOUT:?}")
}

/// Delete the namespace `name` holding `pods` pods (their finalizers must
/// be gone) and wait until it is gone, so the next contender runs on a quiet server.
///
/// The namespace controller deletes the pods server-side; a
/// `deletecollection` from here would answer with all 10,000 deleted pods in
/// one body, which alone costs the client hundreds of MiB.
///
/// # Errors
///
/// When a request fails or the namespace outlives `TIMEOUT` plus
/// `PER_POD` for each pod.
pub async fn delete(client: &Client, name: &str, pods: u32) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.delete(name, &DeleteParams::default()).await?;
    let timeout = TIMEOUT + PER_POD * pods;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if namespaces.get_opt(name).await?.is_none() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    anyhow::bail!("namespace {name} still exists {timeout:?} after its deletion")
}
