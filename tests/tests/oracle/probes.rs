//! The server's rules the oracle's universe relies on, probed on the
//! real API server and kept as tests: which map keys a ConfigMap's data
//! and a custom resource's preserve-unknown-fields map accept.
//!
//! ```text
//! cargo test -p concord-tests --test oracle probes::
//! ```

use crate::support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::core::DynamicObject;
use serde_json::json;
use support::Oracle;
use support::model::{DATA_KEYS, Kind, NESTED_KEYS};

/// A ConfigMap's data keys must match `[-._a-zA-Z0-9]+`: the server
/// refuses the empty key and keys holding `/`, `~` or non-ASCII (so the
/// oracle draws only `.` among the hostile keys there), and accepts every
/// key of [`DATA_KEYS`].
#[tokio::test]
async fn configmap_data_keys_the_server_accepts() -> anyhow::Result<()> {
    let oracle = Oracle::new().await?;
    let cms: Api<ConfigMap> = Api::namespaced(oracle.client.clone(), oracle.ns.name());
    let create = |i: usize, key: &str| {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("probe-key-{i}")},
            "data": {key: "v"},
        }))
        .expect("a ConfigMap");
        let cms = cms.clone();
        async move { cms.create(&PostParams::default(), &cm).await }
    };
    for (i, key) in ["", "a/b", "t~1", "é"].into_iter().enumerate() {
        let refused = create(i, key).await;
        assert!(refused.is_err(), "the server accepted data key {key:?}");
    }
    for (i, key) in DATA_KEYS.into_iter().enumerate() {
        create(10 + i, key)
            .await
            .map_err(|e| anyhow::anyhow!("data key {key:?}: {e}"))?;
    }
    Ok(())
}

/// A custom resource's preserve-unknown-fields map accepts every key the
/// oracle draws, the empty key included, and stores it as sent.
#[tokio::test]
async fn a_custom_resource_map_accepts_every_hostile_key() -> anyhow::Result<()> {
    let oracle = Oracle::new().await?;
    let raw = oracle.raw(Kind::Specimen);
    let nested: serde_json::Map<_, _> = NESTED_KEYS
        .iter()
        .map(|k| ((*k).to_owned(), json!(k)))
        .collect();
    let body: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "oracle.concord.example/v1", "kind": "Specimen",
        "metadata": {"name": "probe-keys"},
        "spec": {"nested": nested},
    }))?;
    let stored = raw.create(&PostParams::default(), &body).await?;
    assert_eq!(stored.data["spec"]["nested"], json!(nested));
    Ok(())
}
