use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// Creates namespace `name` if needed and waits until its default
/// ServiceAccount exists, so that Pods can be created in it.
///
/// # Errors
///
/// The API error, or a timeout after 60 s.
pub async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    namespaces
        .patch(
            name,
            &PatchParams::apply("concord-examples").force(),
            &Patch::Apply(&ns),
        )
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    for _ in 0..600 {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("namespace {name} has no default ServiceAccount after 60s")
}

/// Lists `api` every 200 ms until `done` holds for the list, for up to
/// `limit`.
///
/// # Errors
///
/// The API error, or `what` did not happen within `limit`.
pub async fn wait_until<K>(
    api: &Api<K>,
    what: &str,
    limit: Duration,
    done: impl Fn(&[K]) -> bool,
) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let deadline = Instant::now() + limit;
    loop {
        if done(&api.list(&ListParams::default()).await?.items) {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("{what} did not happen within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
