//! Throttling: a control plane that really answers `429 Too Many Requests`
//! (API Priority and Fairness off, one mutating request in flight), many
//! concurrent writes through every safe strategy. All complete, backing off
//! between attempts, and the metrics count the throttling.
//!
//! Measured while writing this test: the in-flight limiter never throttles
//! `system:masters` (the admin kubeconfig got 0 429s), so the writers run
//! as a ServiceAccount; and kube's client retries 429s itself by default,
//! so the writers' clients have `default_retry = false` for concord's own
//! retries and counters to be the ones exercised. The API server sends
//! Retry-After as a header on a plain-text 429, which kube's error type does
//! not carry: concord then backs off by its transient policy.
//!
//! Run with `cargo test -p concord-tests --test reliability throttling:: -- --nocapture`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use concord_strategies::{
    ConflictPolicy, Intent, RetryPolicy, StrategyName, WriteMetrics, Writer, strategy_for,
};
use concord_testenv::restricted_config;
use concord_tests::throttled_control_plane;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

const TASKS_PER_STRATEGY: usize = 16;
const WRITES_PER_TASK: usize = 10;
const PAYLOAD_BYTES: usize = 256 * 1024;
const SAFE: [StrategyName; 4] = [
    StrategyName::Strict,
    StrategyName::Update,
    StrategyName::Locked,
    StrategyName::Apply,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_writes_all_complete_and_the_metrics_count_the_429s() -> anyhow::Result<()> {
    let ns = "throttled";
    let (control_plane, client, config) = throttled_control_plane(ns).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    // The admin is in `system:masters`, which the in-flight limiter never
    // throttles (measured: 0 429s); writers run as a ServiceAccount.
    let rule = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["configmaps".into()]),
        verbs: ["get", "patch", "update"].map(String::from).to_vec(),
        ..Default::default()
    };
    let mut writer_config = restricted_config(&client, &config, ns, vec![rule]).await?;
    // kube's client retries 429s itself by default (honouring Retry-After),
    // which hides them from concord's metrics; turned off here so the
    // strategies' own transient retries and counters are what is tested.
    writer_config.default_retry = false;

    // Enough transient retries that throttling alone never exhausts them;
    // the policy's backoff (and any Retry-After the server sends) spaces
    // them out.
    let mut transient = RetryPolicy::default().with_steps(60);
    transient.factor = 1.5;
    transient.cap = Duration::from_secs(2);
    // Big objects keep each write in the server long enough for the
    // writers to overlap there (measured: with empty ConfigMaps the client
    // is the bottleneck and the server sees no concurrent writes).
    let payload = "x".repeat(PAYLOAD_BYTES);
    let mut runs = Vec::new();
    for strategy in SAFE {
        let mut observed = Vec::new();
        for task in 0..TASKS_PER_STRATEGY {
            let name = format!("{}-{task}", strategy.as_str());
            let cm: ConfigMap = serde_json::from_value(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"payload": payload}}),
            )?;
            // Setup may itself be throttled: retry it plainly.
            let mut created = None;
            for _ in 0..100 {
                match cms.create(&PostParams::default(), &cm).await {
                    Ok(cm) => {
                        created = Some(cm);
                        break;
                    }
                    Err(kube::Error::Api(s)) if s.code == 429 => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    Err(err) => return Err(err.into()),
                }
            }
            observed.push(created.context("setup create kept being throttled")?);
        }
        let metrics = Arc::new(WriteMetrics::default());
        let writer = Writer::<ConfigMap>::new(
            client.clone(),
            strategy_for(strategy, ConflictPolicy::default()),
        )
        .with_target(|t| {
            t.with_metrics(metrics.clone())
                .with_transient_retry(transient)
        });
        runs.push((strategy, observed, metrics, writer));
    }

    let start = Instant::now();
    let mut tasks = Vec::new();
    for (_, observed, metrics, writer) in &runs {
        for seen in observed.clone() {
            // A client (so a connection) per writer, as separate controller
            // processes would have: one client multiplexes its requests.
            let own = Client::try_from(writer_config.clone())?;
            let writer =
                Writer::<ConfigMap>::new(own, writer.strategy().clone()).with_target(|t| {
                    t.with_metrics(metrics.clone())
                        .with_transient_retry(transient)
                });
            tasks.push(tokio::spawn(async move {
                let mut seen = seen;
                let mut errors = Vec::new();
                for i in 0..WRITES_PER_TASK {
                    match writer
                        .write(&seen, &Intent::set_label(format!("w{i}"), "x").into())
                        .await
                    {
                        Ok(written) => seen = written.object.unwrap_or(seen),
                        Err(err) => errors.push(err.to_string()),
                    }
                }
                errors
            }));
        }
    }
    let mut errors = Vec::new();
    for task in tasks {
        errors.extend(task.await?);
    }
    let elapsed = start.elapsed();

    let mut throttled_total = 0;
    for (strategy, observed, metrics, _) in &runs {
        let m = metrics.snapshot();
        println!(
            "{:<7} {} writers x {} writes: {} writes, {} errors, {} throttled (429), {} retries, {} requests",
            strategy.as_str(),
            TASKS_PER_STRATEGY,
            WRITES_PER_TASK,
            m.writes,
            m.errors,
            m.throttled,
            m.retries,
            m.total_requests()
        );
        throttled_total += m.throttled;
        assert_eq!(
            m.writes,
            (TASKS_PER_STRATEGY * WRITES_PER_TASK) as u64,
            "{strategy}"
        );
        assert_eq!(m.errors, 0, "{strategy}: {errors:?}");
        ensure!(
            m.retries >= m.throttled,
            "{strategy}: every 429 was retried"
        );
        for cm in observed {
            let name = cm.metadata.name.clone().unwrap_or_default();
            let labels: BTreeSet<String> = cms
                .get(&name)
                .await?
                .metadata
                .labels
                .unwrap_or_default()
                .into_keys()
                .collect();
            let expected: BTreeSet<String> =
                (0..WRITES_PER_TASK).map(|i| format!("w{i}")).collect();
            assert_eq!(labels, expected, "{strategy} {name}: every write landed");
        }
    }
    println!(
        "{} writes through {} writers in {elapsed:.2?}, {throttled_total} answered 429",
        SAFE.len() * TASKS_PER_STRATEGY * WRITES_PER_TASK,
        SAFE.len() * TASKS_PER_STRATEGY
    );
    ensure!(errors.is_empty(), "writes failed: {errors:?}");
    ensure!(
        throttled_total > 0,
        "the API server was expected to throttle 64 concurrent writers"
    );
    tokio::task::spawn_blocking(move || drop(control_plane)).await?;
    Ok(())
}
