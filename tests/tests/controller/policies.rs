//! Which changes a controller reconciles and how it waits after a
//! failure, on the real control plane: a generation predicate, a custom
//! error policy and a controller's backoff.
//!
//! ```text
//! cargo test -p concord-tests --test controller policies::
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::{Action, Context, Predicate, Reconciler};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::api::{WAIT, config_map, manager};
use crate::exact_support::{self, Gadget};

/// Records the generation and number of conditions of each reconciled
/// gadget.
struct Generations(Arc<Mutex<Vec<(i64, usize)>>>);

#[concord::async_trait]
impl Reconciler<Gadget> for Generations {
    type Error = concord::WriteError;

    async fn reconcile(&self, g: Arc<Gadget>, _: &Context<Gadget>) -> Result<Action, Self::Error> {
        let conditions = g.status.as_ref().map_or(0, |s| s.conditions.len());
        let generation = g.meta().generation.unwrap_or_default();
        self.0.lock().unwrap().push((generation, conditions));
        Ok(Action::await_change())
    }
}

#[tokio::test]
async fn a_generation_predicate_skips_status_changes_and_never_spec_changes() -> Result<()> {
    let env = TestEnv::shared()?;
    exact_support::install(env).await?;
    let ns = env.namespace().await?;
    let gadgets: Api<Gadget> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    let filtered = Arc::new(Mutex::new(Vec::new()));
    // ANCHOR: predicate
    manager
        .controller(
            "spec-changes",
            gadgets.clone(),
            Generations(filtered.clone()),
        )
        .with_predicate(Predicate::generation_changed())
        .add()?;
    // ANCHOR_END: predicate
    // Same selection, so the same watch and the same order of events.
    let every = Arc::new(Mutex::new(Vec::new()));
    manager
        .controller("every-change", gadgets.clone(), Generations(every.clone()))
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let gadget: Gadget = serde_json::from_value(json!({
        "apiVersion": "exact.concord.example/v1", "kind": "Gadget",
        "metadata": {"name": "g"}, "spec": {"size": 1},
    }))?;
    gadgets.create(&PostParams::default(), &gadget).await?;
    let saw =
        |log: &Mutex<Vec<(i64, usize)>>, entry: (i64, usize)| log.lock().unwrap().contains(&entry);
    assert!(eventually(WAIT, || async { saw(&filtered, (1, 0)) }).await);

    // Status only: the generation stays 1.
    gadgets
        .patch_status(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "Up", "message": "up"}
            ]}})),
        )
        .await?;
    assert!(
        eventually(WAIT, || async { saw(&every, (1, 1)) }).await,
        "the unfiltered controller saw the status change"
    );
    // A spec change moves the generation.
    gadgets
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await?;
    assert!(
        eventually(WAIT, || async { saw(&filtered, (2, 1)) }).await,
        "the spec change is never skipped"
    );
    assert_eq!(
        filtered.lock().unwrap().clone(),
        vec![(1, 0), (2, 1)],
        "the status-only change was skipped"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}

/// Fails its first three reconciles, succeeds once, fails once more, then
/// succeeds; records when each one started.
struct Flaky {
    calls: Arc<Mutex<Vec<Instant>>>,
}

#[derive(Debug)]
struct Flake(usize);

impl std::fmt::Display for Flake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "flaky failure {}", self.0)
    }
}

impl std::error::Error for Flake {}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Flaky {
    type Error = Flake;

    async fn reconcile(&self, _: Arc<ConfigMap>, _: &Context<ConfigMap>) -> Result<Action, Flake> {
        let mut calls = self.calls.lock().unwrap();
        calls.push(Instant::now());
        match calls.len() {
            n @ (1..=3 | 5) => Err(Flake(n)),
            _ => Ok(Action::await_change()),
        }
    }
}

#[tokio::test]
async fn a_custom_error_policy_sets_the_wait_between_attempts() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let recorded = attempts.clone();
    // ANCHOR: error_policy
    const STEP: Duration = Duration::from_millis(300);
    manager
        .controller(
            "flaky",
            maps.clone(),
            Flaky {
                calls: calls.clone(),
            },
        )
        .with_error_policy(move |_: &ConfigMap, _: &Flake, attempts: u32| {
            recorded.lock().unwrap().push(attempts);
            // 300 ms, 600 ms, 900 ms... for this object's failures in a row.
            Action::requeue(STEP * attempts)
        })
        .add()?;
    // ANCHOR_END: error_policy
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    maps.create(&PostParams::default(), &config_map("flaky", json!({})))
        .await?;
    assert!(
        eventually(WAIT, || async { calls.lock().unwrap().len() >= 4 }).await,
        "three failures, then a success"
    );
    {
        let calls = calls.lock().unwrap();
        for (i, pair) in calls.windows(2).take(3).enumerate() {
            let gap = pair[1] - pair[0];
            let policy = STEP * (u32::try_from(i).unwrap() + 1);
            assert!(
                gap >= policy,
                "attempt {} came after {gap:?} < {policy:?}",
                i + 2
            );
        }
    }
    // A change after the success: its failure counts from one again.
    maps.patch(
        "flaky",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"changed": "yes"}})),
    )
    .await?;
    assert!(eventually(WAIT, || async { calls.lock().unwrap().len() >= 6 }).await);
    assert_eq!(
        attempts.lock().unwrap().clone(),
        vec![1, 2, 3, 1],
        "the policy saw each failure's count, reset by the success"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn a_controller_backoff_sets_the_wait_between_attempts() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let base = Duration::from_millis(250);
    manager
        .controller(
            "backed-off",
            maps.clone(),
            Flaky {
                calls: calls.clone(),
            },
        )
        .with_backoff(
            concord::manager::Backoff::exponential(base, Duration::from_secs(10)).with_jitter(0.2),
        )
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    maps.create(&PostParams::default(), &config_map("backed-off", json!({})))
        .await?;
    assert!(
        eventually(WAIT, || async { calls.lock().unwrap().len() >= 4 }).await,
        "three failures, then a success"
    );
    let calls = calls.lock().unwrap().clone();
    // 250 ms, 500 ms, 1 s: doubling per failure in a row; jitter only
    // lengthens.
    for (i, pair) in calls.windows(2).take(3).enumerate() {
        let gap = pair[1] - pair[0];
        let delay = base * 2u32.pow(u32::try_from(i).unwrap());
        assert!(
            gap >= delay,
            "attempt {} came after {gap:?} < {delay:?}",
            i + 2
        );
    }
    stop.shutdown();
    running.await??;
    Ok(())
}
