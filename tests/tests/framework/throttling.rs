//! Throttling with the framework's client: a write's `429`s are retried by
//! its strategy alone, honouring the API server's `Retry-After` header, and
//! counted once, in the write metrics; [`throttle_aware_client`] retries
//! and counts only the requests the strategies do not (here the creates),
//! so the metrics show throttling that would otherwise be invisible, and
//! none of it twice.
//!
//! ```text
//! cargo test -p concord-tests --test framework throttling:: -- --nocapture
//! ```

use std::sync::Arc;
use std::time::Instant;

use anyhow::ensure;
use concord::{client::ClientCounters, client::throttle_aware_client};
use concord_strategies::{
    ConflictPolicy, Intent, StrategyName, WriteMetrics, Writer, strategy_for,
};
use concord_testenv::restricted_config;
use concord_tests::throttled_control_plane;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

const WRITERS: usize = 16;
const WRITES: usize = 10;
/// Large objects keep each write inside the API server long enough for
/// writers to overlap there.
const PAYLOAD_BYTES: usize = 256 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_retries_429s_and_the_metrics_count_them() -> anyhow::Result<()> {
    let ns = "throttled";
    let (control_plane, admin, admin_config) = throttled_control_plane(ns).await?;
    let rule = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: ["get", "create", "patch"].map(String::from).to_vec(),
        ..Default::default()
    };
    // The admin (system:masters) is never throttled; a ServiceAccount is.
    let writer_config = restricted_config(&admin, &admin_config, ns, vec![rule]).await?;
    assert!(writer_config.default_retry, "kube's own retry stays on");

    let counters = Arc::new(ClientCounters::default());
    let metrics = Arc::new(WriteMetrics::default());
    let payload = "x".repeat(PAYLOAD_BYTES);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        // A client (so a connection) per writer, as separate processes have.
        let client = throttle_aware_client(writer_config.clone(), counters.clone())?;
        let metrics = metrics.clone();
        let payload = payload.clone();
        tasks.push(tokio::spawn(async move {
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            let cm: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": format!("cm-{w}")}, "data": {"payload": payload}}),
            )?;
            let mut seen = maps.create(&PostParams::default(), &cm).await?;
            let writer = Writer::<ConfigMap>::new(
                client,
                strategy_for(StrategyName::Strict, ConflictPolicy::default()),
            )
            .with_target(|t| t.with_metrics(metrics));
            for i in 0..WRITES {
                let written = writer
                    .write(&seen, &Intent::set_label(format!("w{i}"), "x").into())
                    .await?;
                seen = written.object.unwrap_or(seen);
            }
            anyhow::Ok(seen)
        }));
    }
    let mut labelled = 0;
    for task in tasks {
        let last = task.await??;
        labelled += last.labels().len();
    }
    let snapshot = metrics.snapshot();
    println!(
        "{} writes by {WRITERS} writers in {:.2?}: {} answers 429 retried by the client (creates), {} by the strategy (writes)",
        snapshot.writes,
        start.elapsed(),
        counters.throttled(),
        snapshot.throttled
    );
    assert_eq!(
        snapshot.writes,
        (WRITERS * WRITES) as u64,
        "every write completed"
    );
    assert_eq!(snapshot.errors, 0);
    assert_eq!(labelled, WRITERS * WRITES, "every label landed");
    ensure!(
        counters.throttled() + snapshot.throttled > 0,
        "the API server was expected to throttle {WRITERS} concurrent writers"
    );
    tokio::task::spawn_blocking(move || drop(control_plane)).await?;
    Ok(())
}
