//! Least privilege: the Kueue-like example's generated RBAC is enough for
//! its writes, and a write outside it fails at once with a typed
//! `Rejected` (403) after exactly one request — never retried.
//!
//! Run with `cargo test -p concord-tests --test reliability least_privilege::`.

use std::sync::Arc;

use anyhow::bail;
use concord::ManagerArgs;
use concord_examples::{kueue, load_config};
use concord_strategies::{
    ConflictPolicy, Error, Intent, StrategyName, WriteMetrics, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

const OURS: &str = "kueue.x-k8s.io/managed";

#[tokio::test]
async fn write_outside_the_generated_rbac_is_rejected_once_and_never_retried() -> anyhow::Result<()>
{
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let config = load_config(
        &ManagerArgs::new().with_config(kueue::CONFIG),
        kueue::registry()?.0,
    )?;
    let rules = kueue::permissions(config.strategies()).rules();
    let restricted = env.restricted_client(ns.name(), rules).await?;

    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "finalizers": [OURS]},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))?;
    let observed = pods.create(&PostParams::default(), &pod).await?;

    // Inside the generated rules: the configured strategy (strict) works.
    let strict = Writer::<Pod>::new(
        restricted.clone(),
        strategy_for(StrategyName::Strict, ConflictPolicy::default()),
    );
    strict
        .write(&observed, &Intent::set_label("inside", "rbac").into())
        .await?;

    // Outside them: `update` sends a PUT the role does not grant.
    let metrics = Arc::new(WriteMetrics::default());
    let update = Writer::<Pod>::new(
        restricted,
        strategy_for(StrategyName::Update, ConflictPolicy::default()),
    )
    .with_builtin_type()
    .with_target(|t| t.with_metrics(metrics.clone()));
    let fresh = pods.get("p").await?;
    match update
        .write(&fresh, &Intent::set_label("outside", "rbac").into())
        .await
    {
        Err(Error::Rejected { source, .. }) => match *source {
            kube::Error::Api(status) => assert_eq!(status.code, 403, "{status:?}"),
            other => bail!("expected a 403 answer, got {other:?}"),
        },
        other => bail!("expected Rejected, got {other:?}"),
    }
    let m = metrics.snapshot();
    assert_eq!(
        (m.writes, m.errors, m.total_requests(), m.retries),
        (1, 1, 1, 0),
        "one request, no retry: {m:?}"
    );
    let labels = pods.get("p").await?.metadata.labels.unwrap_or_default();
    assert!(
        !labels.contains_key("outside"),
        "the forbidden write landed"
    );
    assert_eq!(labels.get("inside").map(String::as_str), Some("rbac"));
    pods.patch(
        "p",
        &Default::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    Ok(())
}
