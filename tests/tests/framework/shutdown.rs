//! Graceful shutdown on the real control plane: a SIGTERM (or a
//! `ShutdownHandle`) in the middle of reconciles lets every reconcile that
//! started finish, so no object is left half-written.
//!
//! ```text
//! cargo test -p concord-tests --test framework manager::shutdown::
//! ```
//!
//! The SIGTERM test signals this very test process; the manager under test
//! is the only one here that handles signals, and it stops gracefully instead
//! of the process dying.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, manager::ShutdownHandle,
};
use concord_testenv::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

/// Writes in two steps with a pause between, so a shutdown that cut a
/// reconcile short would leave `step=1` behind.
struct TwoStep {
    started: Arc<AtomicU64>,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for TwoStep {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        if cm.labels().contains_key("step") {
            return Ok(Action::await_change());
        }
        self.started.fetch_add(1, Relaxed);
        let first = ctx.set_label(&cm, "step", "1").await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let latest = first.object.unwrap_or_else(|| (*cm).clone());
        ctx.set_label(&latest, "step", "2").await?;
        Ok(Action::await_change())
    }
}

/// Runs the two-step reconciler over 40 ConfigMaps, calls `stop` once at
/// least six reconciles have started, waits for the manager to return, and
/// checks that no ConfigMap was left between its two writes.
async fn shutdown_mid_work(signals: bool, stop: impl FnOnce(ShutdownHandle)) -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for i in 0..40 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
        maps.create(&PostParams::default(), &cm).await?;
    }
    let started = Arc::new(AtomicU64::new(0));
    let mut manager = Manager::builder("shutdown-test")
        .with_client(env.client()?)
        .with_args(ManagerArgs::new())
        .with_signal_handling(signals)
        .build()
        .await?;
    let reconciler = TwoStep {
        started: started.clone(),
    };
    manager
        .controller("two-step", maps.clone(), reconciler)
        .with_concurrency(4)
        .add()?;
    let handle = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let deadline = Instant::now() + Duration::from_secs(30);
    while started.load(Relaxed) < 6 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(started.load(Relaxed) >= 6, "reconciles started");
    stop(handle);
    tokio::time::timeout(Duration::from_secs(60), running).await???;

    let steps: Vec<Option<String>> = maps
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|c| c.labels().get("step").cloned())
        .collect();
    let finished = steps.iter().filter(|s| s.as_deref() == Some("2")).count();
    let half = steps.iter().filter(|s| s.as_deref() == Some("1")).count();
    println!(
        "{finished} reconciled, {} untouched, {half} half-applied",
        steps.len() - finished - half
    );
    assert_eq!(half, 0, "no reconcile may be cut between its two writes");
    assert!(
        (6..40).contains(&finished),
        "shutdown came in the middle of the work ({finished} of 40 done)"
    );
    Ok(())
}

#[tokio::test]
async fn shutdown_handle_during_reconciles_leaves_no_half_applied_write() -> Result<()> {
    shutdown_mid_work(false, |handle| handle.shutdown()).await
}

#[tokio::test]
async fn sigterm_during_reconciles_leaves_no_half_applied_write() -> Result<()> {
    shutdown_mid_work(true, |_| {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    })
    .await
}
