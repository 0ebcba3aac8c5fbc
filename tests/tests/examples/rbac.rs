//! Least privilege, proved on the RBAC-enabled control plane: each example
//! operator runs as a ServiceAccount holding only the rules
//! `--print-rbac` generates from its configured strategies, does its whole
//! job (leader election included), and a write outside those rules fails
//! at once with a 403 that is not retried.
//!
//! ```text
//! cargo test -p concord-tests --test examples operators::rbac::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use anyhow::Result;
use concord::{Manager, ManagerArgs, WriteError, featuregates::FeatureRegistry, metrics::Metrics};
use concord_examples::argo::{self, CompletionPath, DeletionPath};
use concord_examples::kueue::{self, PodPhase};
use concord_examples::widgets::{self, Widget, WidgetReconciler};
use concord_examples::{load_config, widgets_demo};
use concord_testenv::{TestEnv, TestNamespace};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use kube::{Client, CustomResourceExt, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

/// A manager for `name` running as an identity that holds only `rules`,
/// with leader election on in the test namespace.
async fn restricted_manager(
    env: &TestEnv,
    ns: &TestNamespace,
    name: &str,
    args: ManagerArgs,
    registry: FeatureRegistry,
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
) -> Result<Manager> {
    let client = env.restricted_client(ns.name(), rules).await?;
    Ok(Manager::builder(name)
        .with_client(client)
        .with_args(args.with_leader_election(name, ns.name()))
        .with_registry(registry)
        .with_signal_handling(false)
        .build()
        .await?)
}

/// The value of the metrics series that starts with `series`, 0 if absent.
fn metric(metrics: &Metrics, series: &str) -> f64 {
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

// ANCHOR: forbidden
/// Writes a label on `object` (created by the admin) through the
/// restricted manager's strategy for `K`, and checks the answer is an
/// immediate, unretried 403.
async fn assert_forbidden<K>(manager: &Manager, object: &K, resource: &str)
where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let ctx = manager.context::<K>();
    let start = Instant::now();
    let error = ctx
        .set_label(object, "outside.concord.dev/rules", "true")
        .await
        .unwrap_err();
    let elapsed = start.elapsed();
    match &error {
        WriteError::Rejected { source, .. } => match source.as_ref() {
            kube::Error::Api(status) => {
                assert_eq!(status.code, 403, "{status:?}");
                assert_eq!(status.reason, "Forbidden");
                assert!(
                    status.message.contains(resource),
                    "the message names the resource: {}",
                    status.message
                );
            }
            other => panic!("expected an API error, got {other:?}"),
        },
        other => panic!("expected Rejected, got {other:?}"),
    }
    assert!(
        elapsed < Duration::from_secs(2),
        "a 403 fails at once, took {elapsed:?}"
    );
    let labels = format!("{{resource=\"{resource}\",strategy=\"strict\"");
    let metrics = manager.metrics();
    assert_eq!(
        metric(
            &metrics,
            &format!("concord_write_requests_total{labels},verb=\"patch\"}}")
        ),
        1.0,
        "one request"
    );
    assert_eq!(
        metric(&metrics, &format!("concord_write_retries_total{labels}}}")),
        0.0,
        "never retried"
    );
    assert_eq!(
        metric(
            &metrics,
            &format!("concord_write_requests_total{labels},verb=\"get\"}}")
        ),
        0.0,
        "no re-read"
    );
}
// ANCHOR_END: forbidden

async fn leader_of(client: Client, ns: &str, lease: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client, ns);
    leases
        .get_opt(lease)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
}

// ANCHOR: restricted
#[tokio::test]
async fn kueue_operator_needs_only_its_generated_rules() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let args = ManagerArgs::new().with_config(kueue::CONFIG);
    let config = load_config(&args, kueue::registry()?.0)?;
    let rules = kueue::permissions(config.strategies()).rules();
    let mut manager = restricted_manager(
        env,
        &ns,
        "kueue-finalizer",
        args,
        kueue::registry()?.0,
        rules,
    )
    .await?;
    let pods: Api<PodPhase> = Api::namespaced(manager.client().clone(), ns.name());
    kueue::add_controller(&mut manager, pods)?;
    let outside: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "outside"}}))?;
    let outside = Api::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &outside)
        .await?;
    assert_forbidden(&manager, &outside, "configmaps").await;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let report = kueue::demo(&ns.client(), ns.name(), 10).await?;
    assert_eq!(
        (report.finished, report.foreign_kept, report.deleted),
        (5, 5, 5)
    );
    assert!(
        leader_of(ns.client(), ns.name(), "kueue-finalizer")
            .await
            .is_some(),
        "the lease was taken"
    );

    stop.shutdown();
    running.await??;
    Ok(())
}
// ANCHOR_END: restricted

#[tokio::test]
async fn argo_operator_needs_only_its_generated_rules() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let args = ManagerArgs::new().with_config(argo::CONFIG);
    let config = load_config(&args, FeatureRegistry::new())?;
    let rules = argo::permissions(config.strategies()).rules();
    let mut manager = restricted_manager(
        env,
        &ns,
        "argo-cleanup",
        args,
        FeatureRegistry::new(),
        rules,
    )
    .await?;
    let pods: Api<PodPhase> = Api::namespaced(manager.client().clone(), ns.name());
    manager
        .controller("pod-deletion", pods.clone(), DeletionPath)
        .add()?;
    manager
        .controller("pod-completion", pods, CompletionPath)
        .add()?;
    let outside: Secret = serde_json::from_value(json!({"metadata": {"name": "outside"}}))?;
    let outside = Api::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &outside)
        .await?;
    assert_forbidden(&manager, &outside, "secrets").await;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let report = argo::demo(&ns.client(), ns.name(), 10).await?;
    assert_eq!((report.recorded, report.foreign_kept), (10, 10));

    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn crd_operator_needs_only_its_generated_rules() -> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(Widget::crd()).await?;
    let ns = env.namespace().await?;
    let args = ManagerArgs::new().with_config(widgets::CONFIG);
    let config = load_config(&args, FeatureRegistry::new())?;
    let rules = widgets::permissions(config.strategies()).rules();
    let mut manager = restricted_manager(
        env,
        &ns,
        "crd-operator",
        args,
        FeatureRegistry::new(),
        rules,
    )
    .await?;
    widgets::add_controller(&mut manager, ns.name())?;
    let outside: Secret = serde_json::from_value(json!({"metadata": {"name": "outside"}}))?;
    let outside = Api::namespaced(ns.client(), ns.name())
        .create(&PostParams::default(), &outside)
        .await?;
    assert_forbidden(&manager, &outside, "secrets").await;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    // Children created by server-side apply, status, events, finalizer
    // cleanup: all with the generated rules alone.
    let report = widgets_demo::demo(&ns.client(), ns.name()).await?;
    assert_eq!(
        (
            report.shards_created,
            report.shards_after_scale_down,
            report.shards_after_delete
        ),
        (3, 1, 0)
    );
    assert!(
        report.events.iter().any(|r| r == "ShardsDeleted"),
        "{:?}",
        report.events
    );

    stop.shutdown();
    running.await??;
    Ok(())
}

/// The least obvious generated verb is needed: the first server-side apply
/// of a child creates it, so without `create` on ConfigMaps the operator
/// cannot make a single shard.
#[tokio::test]
async fn crd_operator_cannot_create_shards_without_the_generated_create_verb() -> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(Widget::crd()).await?;
    let ns = env.namespace().await?;
    let args = ManagerArgs::new().with_config(widgets::CONFIG);
    let config = load_config(&args, FeatureRegistry::new())?;
    let mut rules = widgets::permissions(config.strategies()).rules();
    for rule in &mut rules {
        if rule.resources.iter().flatten().any(|r| r == "configmaps") {
            rule.verbs.retain(|v| v != "create");
        }
    }
    let mut manager = restricted_manager(
        env,
        &ns,
        "crd-operator",
        args,
        FeatureRegistry::new(),
        rules,
    )
    .await?;
    let client = manager.client().clone();
    manager
        .controller(
            "widgets",
            Api::namespaced(client, ns.name()),
            WidgetReconciler,
        )
        .add()?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let widgets: Api<Widget> = Api::namespaced(ns.client(), ns.name());
    let spec = widgets::WidgetSpec {
        message: "hi".into(),
        shards: 1,
    };
    widgets
        .create(&PostParams::default(), &Widget::new("no-create", spec))
        .await?;
    let errors = "concord_reconcile_total{controller=\"widgets\",result=\"error\"}";
    let start = Instant::now();
    while metric(&metrics, errors) < 1.0 && start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(metric(&metrics, errors) >= 1.0, "the reconcile fails");
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    assert!(
        maps.get_opt("no-create-shard-0").await?.is_none(),
        "no shard without `create`"
    );

    stop.shutdown();
    running.await??;
    Ok(())
}
