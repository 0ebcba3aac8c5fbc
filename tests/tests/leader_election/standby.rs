//! A standby replica of a `--leader-elect` manager on the real control
//! plane: by default its caches fill while it waits for the Lease (it is
//! ready, and takes over warm); with `--cold-standby` it watches nothing
//! until it leads, is ready meanwhile, and fills its caches on taking
//! over. Either way it reconciles nothing before it leads, and every object
//! after the leader crashes. The handover times of the two are measured by
//! `shard-bench standby`, not here.
//!
//! ```text
//! cargo test -p concord-tests --test leader_election standby::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, manager::LeaderElectionConfig,
};
use concord_testenv::{TestEnv, TestNamespace};
use concord_tests::{eventually, http_get};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

const OBJECTS: usize = 40;
const WAIT: Duration = Duration::from_secs(60);

type Seen = Arc<Mutex<BTreeSet<String>>>;

struct Record(Seen);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Record {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        self.0.lock().unwrap().insert(cm.name_any());
        Ok(Action::await_change())
    }
}

struct Replica {
    seen: Seen,
    store: concord::cache::Store<ConfigMap>,
    health: std::net::SocketAddr,
    run: tokio::task::JoinHandle<Result<(), concord::Error>>,
}

async fn replica(env: &TestEnv, ns: &str, lease: &str, cold: bool) -> Result<Replica> {
    let mut timings = LeaderElectionConfig::default();
    timings.lease_duration = Duration::from_secs(4);
    timings.renew_deadline = Duration::from_secs(3);
    timings.retry_period = Duration::from_millis(300);
    // ANCHOR: standby
    let args = ManagerArgs::new()
        .with_leader_election(lease, ns)
        .with_cold_standby(cold)
        .with_health_probe_bind_address("127.0.0.1:0");
    // ANCHOR_END: standby
    let mut manager = Manager::builder("standby-test")
        .with_client(env.client()?)
        .with_args(args)
        .with_leader_election_config(timings)
        .with_signal_handling(false)
        .build()
        .await?;
    let seen = Seen::default();
    let api: Api<ConfigMap> = Api::namespaced(manager.client().clone(), ns);
    manager
        .controller("configmaps", api, Record(seen.clone()))
        .add()?;
    let store = manager.context::<ConfigMap>().store().context("a store")?;
    let health = manager.health_address().context("probes are served")?;
    let run = tokio::spawn(manager.run());
    Ok(Replica {
        seen,
        store,
        health,
        run,
    })
}

fn count(seen: &Seen) -> usize {
    seen.lock().unwrap().len()
}

async fn config_maps(ns: &str, client: kube::Client) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))?;
                api.create(&PostParams::default(), &cm).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// A leader that has reconciled every object, and a standby beside it.
async fn leader_and_standby(cold: bool) -> Result<(TestNamespace, Replica, Replica)> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    config_maps(ns.name(), ns.client()).await?;
    let leader = replica(env, ns.name(), "standby-test", cold).await?;
    ensure!(
        eventually(WAIT, || async { count(&leader.seen) == OBJECTS }).await,
        "the leader reconciles every object"
    );
    let standby = replica(env, ns.name(), "standby-test", cold).await?;
    // The standby answers /readyz 200 while it waits, warm or cold.
    let ready = eventually(WAIT, || async {
        http_get(standby.health, "/readyz")
            .await
            .is_ok_and(|(status, _)| status == 200)
    })
    .await;
    ensure!(ready, "a standby is ready while it waits for the Lease");
    Ok((ns, leader, standby))
}

#[tokio::test]
async fn a_warm_standby_holds_every_object_before_it_leads() -> Result<()> {
    let (_ns, leader, standby) = leader_and_standby(false).await?;
    standby.store.wait_until_ready().await?;
    assert_eq!(standby.store.state().len(), OBJECTS, "filled while waiting");
    assert_eq!(count(&standby.seen), 0, "no reconcile before it leads");

    leader.run.abort();
    assert!(
        eventually(WAIT, || async { count(&standby.seen) == OBJECTS }).await,
        "the standby reconciles every object once the crashed leader's Lease expired"
    );
    standby.run.abort();
    Ok(())
}

#[tokio::test]
async fn a_cold_standby_watches_nothing_until_it_leads() -> Result<()> {
    let (_ns, leader, standby) = leader_and_standby(true).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!standby.store.is_ready(), "a cold standby has not listed");
    assert!(standby.store.state().is_empty(), "and holds nothing");
    assert_eq!(count(&standby.seen), 0, "no reconcile before it leads");
    let (status, body) = http_get(standby.health, "/readyz?verbose").await?;
    assert_eq!(status, 200, "{body}");

    leader.run.abort();
    assert!(
        eventually(WAIT, || async { count(&standby.seen) == OBJECTS }).await,
        "the standby fills its cache and reconciles every object once it leads"
    );
    assert_eq!(standby.store.state().len(), OBJECTS);
    standby.run.abort();
    Ok(())
}
