//! The controller's queue on the real control plane: an object created
//! after the cache synced is reconciled ahead of the initial list, and the
//! initial list still drains, each object reconciled once.
//!
//! ```text
//! cargo test -p concord-tests --test controller queue::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use concord::{Action, Context, Manager, Reconciler};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

/// Objects listed when the controller starts.
const LISTED: usize = 2000;
/// Each reconcile of the slow controller takes this long once opened, so
/// the list takes many rounds of slots.
const RECONCILE: Duration = Duration::from_millis(10);
const SLOTS: u16 = 4;
const WAIT: Duration = Duration::from_secs(120);

/// Every reconcile, in the order they started.
type Log = Arc<Mutex<Vec<String>>>;

/// Records each reconcile, then waits for `open` and a little more.
struct Slow {
    log: Log,
    open: watch::Receiver<bool>,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Slow {
    type Error = concord::WriteError;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        _: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.log.lock().unwrap().push(object.name_any());
        let _ = self.open.clone().wait_for(|open| *open).await;
        tokio::time::sleep(RECONCILE).await;
        Ok(Action::await_change())
    }
}

/// Records each reconcile and returns.
struct Fast(Log);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Fast {
    type Error = concord::WriteError;

    async fn reconcile(
        &self,
        object: Arc<ConfigMap>,
        _: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.0.lock().unwrap().push(object.name_any());
        Ok(Action::await_change())
    }
}

fn reconciled(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

async fn manager(client: Client) -> Manager {
    Manager::builder("controller-queue-test")
        .with_client(client)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_new_object_overtakes_the_initial_list_and_the_list_still_drains_once() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    futures::stream::iter(0..LISTED)
        .map(|i| {
            let maps = maps.clone();
            async move {
                maps.create(&PostParams::default(), &config_map(&format!("listed-{i}")))
                    .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await?;

    let slow_log = Log::default();
    let fast_log = Log::default();
    let (open, opened) = watch::channel(false);
    let mut manager = manager(env.client()?).await;
    // ANCHOR: concurrency
    manager
        .controller(
            "slow-maps",
            maps.clone(),
            Slow {
                log: slow_log.clone(),
                open: opened,
            },
        )
        .with_concurrency(SLOTS)
        .add()?;
    // ANCHOR_END: concurrency
    // Same type and selection: the same shared watch, so once this one
    // has seen an object, the slow controller's queue holds it too.
    manager
        .controller("fast-maps", maps.clone(), Fast(fast_log.clone()))
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    // Every slot busy with a listed object, the rest of the list queued.
    assert!(
        eventually(WAIT, || async {
            reconciled(&slow_log).len() == usize::from(SLOTS)
        })
        .await,
        "the slow controller took {SLOTS} listed objects"
    );
    maps.create(&PostParams::default(), &config_map("new"))
        .await?;
    assert!(
        eventually(WAIT, || async {
            reconciled(&fast_log).iter().any(|n| n == "new")
        })
        .await,
        "the shared watch delivered the new object"
    );
    open.send(true)?;

    assert!(
        eventually(WAIT, || async { reconciled(&slow_log).len() > LISTED }).await,
        "every listed object was reconciled (nothing starved): {} of {}",
        reconciled(&slow_log).len(),
        LISTED + 1
    );
    stop.shutdown();
    running.await??;
    let order = reconciled(&slow_log);
    assert_eq!(
        order.iter().position(|n| n == "new"),
        Some(usize::from(SLOTS)),
        "the new object is the first taken once a slot frees, ahead of the {} listed \
         objects still queued",
        LISTED - usize::from(SLOTS)
    );
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in &order {
        *counts.entry(name.as_str()).or_default() += 1;
    }
    let not_once: Vec<_> = counts.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        not_once.is_empty(),
        "reconciled other than once: {not_once:?}"
    );
    assert_eq!(counts.len(), LISTED + 1, "every object, the new one too");
    Ok(())
}
