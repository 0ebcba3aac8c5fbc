//! `/readyz` means the caches are in: a manager over many ConfigMaps
//! answers 503 (naming the cache that is not synced) until its controller's
//! store holds every object, then 200; `/healthz` names its watchdog.
//!
//! ```text
//! cargo test -p concord-tests --test observability metrics::readiness::
//! CONCORD_READINESS_OBJECTS=10000 cargo test -p concord-tests --test observability metrics::readiness::
//! ```
//!
//! The default is 2,000 objects so that the default suite stays quick;
//! issue 31's figure is 10,000, which the variable above runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::webhooks_support;

use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use concord::webhook::WebhookOptions;
use concord::{Manager, ManagerArgs, sharding::ShardingMode};
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use concord_tests::http_get as get;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

/// How many ConfigMaps the watch lists (`CONCORD_READINESS_OBJECTS`).
fn object_count() -> Result<usize> {
    match std::env::var("CONCORD_READINESS_OBJECTS") {
        Ok(n) => n
            .parse()
            .with_context(|| format!("CONCORD_READINESS_OBJECTS=`{n}` is not a count")),
        Err(_) => Ok(2_000),
    }
}

#[tokio::test]
async fn readyz_waits_for_the_cache_of_a_large_watch() -> Result<()> {
    let count = object_count()?;
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    // Created concurrently, 32 requests at a time.
    futures::stream::iter(0..count)
        .map(|i| {
            let maps = maps.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": format!("cm-{i:05}")},
                    "data": {"index": i.to_string()},
                }))?;
                maps.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await?;

    // The manager's first watch of the ConfigMaps (its question whether
    // lists stream, before its first list) waits 5 s at a proxy, so that
    // the probes below certainly see the manager before its cache has
    // synced.
    let faults = Faults::seeded(31)
        .on(Verb::Watch)
        .resource("configmaps")
        .in_namespace(ns.name())
        .delay(Duration::from_secs(5))
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let args = ManagerArgs::new().with_health_probe_bind_address("127.0.0.1:0");
    let mut manager = Manager::builder("readiness-test")
        .with_kube_config(proxy.config())
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await?;
    let health_at = manager.health_address().context("probes are served")?;
    let watched: Api<ConfigMap> = Api::namespaced(manager.client().clone(), ns.name());
    manager
        .controller("configmaps", watched, concord_tests::Idle)
        .add()?;
    let store = manager
        .context::<ConfigMap>()
        .store()
        .context("the controller's shared cache")?;
    let check = format!("cache:configmaps/{}", ns.name());
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let (mut unready, mut ready) = (0, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while tokio::time::Instant::now() < deadline {
        let (status, body) = get(health_at, "/readyz").await?;
        match status {
            503 => {
                unready += 1;
                ensure!(
                    body.contains(&format!("[-]{check} not synced\n"))
                        && body.ends_with("readyz check failed\n"),
                    "an unready answer names the cache that is not synced: {body}"
                );
            }
            200 => {
                ensure!(
                    store.len() == count,
                    "/readyz answered 200 with {} of {count} objects in the cache",
                    store.len()
                );
                ensure!(
                    body == "ok",
                    "a ready answer without ?verbose is `ok`: {body}"
                );
                ready = true;
                break;
            }
            other => bail!("/readyz answered {other}: {body}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ensure!(
        unready > 0,
        "/readyz never answered 503 before the cache synced"
    );
    ensure!(ready, "/readyz did not turn ready within 120 s");

    // ANCHOR: verbose
    let (status, body) = get(health_at, "/readyz?verbose").await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        format!("[+]ping ok\n[+]{check} ok\nreadyz check passed\n")
    );
    let (status, body) = get(health_at, "/healthz?verbose").await?;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, "[+]ping ok\n[+]watchdog ok\nhealthz check passed\n");
    assert_eq!(get(health_at, "/healthz").await?, (200, "ok".to_owned()));
    // ANCHOR_END: verbose

    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), running).await???;
    Ok(())
}

#[tokio::test]
async fn readyz_names_the_webhook_server_and_the_shard_ring() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let (_ca, certs) = webhooks_support::certs()?;
    let args = ManagerArgs::new()
        .with_health_probe_bind_address("127.0.0.1:0")
        .with_webhook_server("127.0.0.1:0", certs.path())
        .with_shards(ShardingMode::Hash, ns.name());
    let webhooks = webhooks_support::gizmo::webhooks(ns.name(), WebhookOptions::default());
    let mut manager = Manager::builder("readiness-parts")
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .with_webhooks(webhooks)
        .build()
        .await?;
    let health_at = manager.health_address().context("probes are served")?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("configmaps", maps, concord_tests::Idle)
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let expected = format!(
        "[+]ping ok\n[+]cache:configmaps/{} ok\n[+]webhooks ok\n[+]shard-ring ok\nreadyz check passed\n",
        ns.name()
    );
    let mut last = (0, String::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut ready = false;
    while !ready && tokio::time::Instant::now() < deadline {
        last = get(health_at, "/readyz?verbose").await?;
        ready = last == (200, expected.clone());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "every part of the manager reports ready: {last:?}");
    stop.shutdown();
    tokio::time::timeout(Duration::from_secs(30), running).await???;
    Ok(())
}

/// Whether `manager`'s metrics say it runs its controllers.
fn leads(metrics: &concord::metrics::Metrics) -> bool {
    metrics.render().lines().any(|l| l == "concord_leader 1")
}

#[tokio::test]
async fn a_standby_replica_is_ready_with_its_caches_warm() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for i in 0..3 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
        maps.create(&PostParams::default(), &cm).await?;
    }
    let replica = |name: &'static str| {
        let client = env.client();
        let maps = maps.clone();
        let args = ManagerArgs::new()
            .with_health_probe_bind_address("127.0.0.1:0")
            .with_leader_election("standby-test", ns.name());
        async move {
            let mut manager = Manager::builder(name)
                .with_client(client?)
                .with_args(args)
                .with_signal_handling(false)
                .build()
                .await?;
            manager
                .controller("configmaps", maps.clone(), concord_tests::Idle)
                .add()?;
            anyhow::Ok(manager)
        }
    };
    let leader = replica("standby-test").await?;
    let leader_metrics = leader.metrics();
    let stop_leader = leader.shutdown_handle();
    let leading = tokio::spawn(leader.run());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !leads(&leader_metrics) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure!(leads(&leader_metrics), "the first replica became leader");

    let standby = replica("standby-test").await?;
    let health_at = standby.health_address().context("probes are served")?;
    let store = standby
        .context::<ConfigMap>()
        .store()
        .context("the standby's shared cache")?;
    let standby_metrics = standby.metrics();
    let stop_standby = standby.shutdown_handle();
    let waiting = tokio::spawn(standby.run());
    let expected = format!(
        "[+]ping ok\n[+]cache:configmaps/{} ok\nreadyz check passed\n",
        ns.name()
    );
    let mut last = (0, String::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while last != (200, expected.clone()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = get(health_at, "/readyz?verbose").await?;
    }
    assert_eq!(last, (200, expected), "the standby turns ready");
    assert_eq!(store.len(), 3, "the standby's cache holds every ConfigMap");
    assert!(
        !leads(&standby_metrics),
        "the standby is ready while the other replica leads"
    );

    stop_standby.shutdown();
    stop_leader.shutdown();
    tokio::time::timeout(Duration::from_secs(30), waiting).await???;
    tokio::time::timeout(Duration::from_secs(30), leading).await???;
    Ok(())
}
