//! One layer per kind of retry, against the real API server behind the
//! fault proxy: a throttled write is retried by the strategy alone, exactly
//! as often as its transient policy allows, honouring `Retry-After`, and
//! counted once (in the write's outcome and metrics, not in the client's
//! counters); a throttled read on the same client is retried by kube's
//! client layer and counted there.
//!
//! ```text
//! cargo test -p concord-tests --test strategies incidents::retry::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::{client::ClientCounters, client::throttle_aware_client};
use concord_strategies::{
    ConflictPolicy, Error, Intent, RetryPolicy, StrategyName, Verb, WriteMetrics, Writer,
    strategy_for,
};
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultClass, FaultProxy, Faults, Verb as Wire};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};

/// Three attempts, no backoff of its own: waits come from `Retry-After`.
fn three_attempts() -> RetryPolicy {
    let mut policy = RetryPolicy::default().with_steps(3);
    policy.initial = Duration::from_millis(1);
    policy
}

async fn setup(faults: Faults) -> Result<(ConfigMap, FaultProxy, Client, Arc<ClientCounters>)> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let created = Api::<ConfigMap>::namespaced(ns.client(), ns.name())
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("throttled".into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    let faults = faults.in_namespace(ns.name());
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let counters = Arc::new(ClientCounters::default());
    let client = throttle_aware_client(proxy.config(), counters.clone())?;
    Ok((created, proxy, client, counters))
}

#[tokio::test]
async fn a_throttled_write_is_retried_by_the_strategy_alone_and_counted_once() -> Result<()> {
    let faults = Faults::seeded(12)
        .on(Wire::Patch)
        .resource("configmaps")
        .throttle(1)
        .times(2);
    let (created, proxy, client, counters) = setup(faults).await?;
    // ANCHOR: transient_policy
    // The client from `throttle_aware_client` leaves the write's retries to
    // the strategy: its transient policy alone bounds them.
    let metrics = Arc::new(WriteMetrics::default());
    let writer = Writer::<ConfigMap>::new(
        client,
        strategy_for(StrategyName::Strict, ConflictPolicy::default()),
    )
    .with_target(|t| {
        t.with_metrics(metrics.clone())
            .with_transient_retry(three_attempts())
    });
    // ANCHOR_END: transient_policy

    let start = Instant::now();
    let written = writer
        .write(&created, &Intent::set_label("through", "429s").into())
        .await?;
    let waited = start.elapsed();

    let stored = written.object.expect("stored");
    assert_eq!(stored.labels()["through"], "429s");
    assert_eq!(
        proxy.report().count(FaultClass::Throttle),
        2,
        "two 429s sent"
    );
    assert_eq!(written.outcome.requests(Verb::Patch), 3, "2 retries + 1");
    assert_eq!(written.outcome.retries, 2);
    assert_eq!(written.outcome.throttled, 2);
    let snapshot = metrics.snapshot();
    assert_eq!((snapshot.retries, snapshot.throttled), (2, 2));
    assert_eq!(
        counters.throttled(),
        0,
        "the client neither retried nor counted"
    );
    assert!(
        waited >= Duration::from_millis(1900),
        "Retry-After: 1 honoured twice, waited {waited:?}"
    );
    Ok(())
}

#[tokio::test]
async fn throttling_beyond_the_policy_gives_up_after_exactly_its_attempts() -> Result<()> {
    let faults = Faults::seeded(13)
        .on(Wire::Patch)
        .resource("configmaps")
        .throttle(0);
    let (created, proxy, client, counters) = setup(faults).await?;
    let metrics = Arc::new(WriteMetrics::default());
    let writer = Writer::<ConfigMap>::new(
        client.clone(),
        strategy_for(StrategyName::Strict, ConflictPolicy::default()),
    )
    .with_target(|t| {
        t.with_metrics(metrics.clone())
            .with_transient_retry(three_attempts())
    });

    let failed = writer
        .write(&created, &Intent::set_label("never", "lands").into())
        .await
        .expect_err("every attempt is throttled");
    assert!(
        matches!(failed, Error::TransientRetriesExhausted { attempts: 3, .. }),
        "{failed:?}"
    );
    assert_eq!(
        proxy.report().count(FaultClass::Throttle),
        3,
        "exactly the policy's 3 attempts reached the wire"
    );
    let snapshot = metrics.snapshot();
    assert_eq!((snapshot.throttled, snapshot.errors), (3, 1));
    assert_eq!(counters.throttled(), 0, "no second layer retried the write");

    let direct = Api::<ConfigMap>::namespaced(client, &created.namespace().unwrap());
    let now = direct.get("throttled").await?;
    assert!(!now.labels().contains_key("never"), "nothing written");
    Ok(())
}

#[tokio::test]
async fn a_throttled_read_is_retried_by_the_client_and_counted_there() -> Result<()> {
    let faults = Faults::seeded(14)
        .on(Wire::Get)
        .resource("configmaps")
        .throttle(0)
        .times(1);
    let (created, proxy, client, counters) = setup(faults).await?;
    let maps = Api::<ConfigMap>::namespaced(client, &created.namespace().unwrap());
    maps.get("throttled").await?;
    assert_eq!(proxy.report().count(FaultClass::Throttle), 1);
    assert_eq!(counters.throttled(), 1, "retried and counted by the client");
    Ok(())
}
