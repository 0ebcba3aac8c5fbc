//! `selector` mode on the real control plane: the API server's shard
//! selectors (KEP-5866) place every object, nothing is labelled; a crash
//! loses nothing; and a server without the `ShardedListAndWatch` gate
//! makes `auto` choose labels and `selector` refuse to start.
//!
//! ```text
//! cargo test -p concord-tests --test sharding selectors::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use concord::{Manager, ManagerArgs, sharding::ShardingMode};
use concord_testenv::{ControlPlane, ControlPlaneOptions, TestEnv};
use concord_tests::http_get as get;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use kube::{Client, Config, ResourceExt};
use serde_json::json;

use support::*;

/// Every replica caches exactly the objects it owns, and the caches
/// together hold each object once.
fn each_object_cached_once(replicas: &[&Replica], objects: usize) -> bool {
    settled(replicas, replicas.len())
        && replicas
            .iter()
            .all(|r| r.shard.keys_cached() as u64 == r.shard.keys_owned())
        && replicas
            .iter()
            .map(|r| r.shard.keys_cached())
            .sum::<usize>()
            == objects
}

// ANCHOR: selector_mode
#[tokio::test]
async fn selector_mode_places_every_object_once_without_a_write_and_a_crash_loses_nothing()
-> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names = create_config_maps(&api, 300).await?;
    let all = keys(ns.name(), &names);
    let log: Log = Arc::default();
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(replica_in(ShardingMode::Selector, env.client()?, ns.name(), i, &log).await?);
    }
    ensure!(
        eventually(Duration::from_secs(60), || each_object_cached_once(
            &replicas.iter().collect::<Vec<_>>(),
            names.len()
        ))
        .await,
        "three selector-mode replicas did not each cache their own shard: {:?}",
        replicas
            .iter()
            .map(|r| (
                r.shard.members().len(),
                r.shard.settled(),
                r.shard.keys_cached(),
                r.shard.keys_owned()
            ))
            .collect::<Vec<_>>()
    );
    let indexed: Vec<(usize, &Replica)> = replicas.iter().enumerate().collect();
    let before = owners(ns.name(), &names, &indexed)?;
    for replica in &replicas {
        ensure!(
            replica.shard.mode() == "selector",
            "{}",
            replica.shard.mode()
        );
        let selector = replica.shard.shard_selector().unwrap_or_default();
        ensure!(
            selector.starts_with("shardRange(object.metadata.uid, '0x"),
            "{selector}"
        );
        let cached = replica.shard.keys_cached();
        println!(
            "selector mode: {} caches {cached} of {} ({} ranges)",
            replica.shard.member(),
            names.len(),
            selector.matches("shardRange").count()
        );
        ensure!((50..=150).contains(&cached), "a replica caches {cached}");
    }
    ensure!(
        eventually(Duration::from_secs(60), || reconciled_by_owner_since(
            &log,
            &before,
            &all,
            Instant::now() - Duration::from_secs(3600)
        ))
        .await,
        "not every object was reconciled by its owner"
    );
    // No placement writes: no object carries a shard label.
    for cm in api.list(&Default::default()).await?.items {
        ensure!(
            !cm.labels()
                .keys()
                .any(|k| k.starts_with("shard.concord.dev/")),
            "{} is labelled {:?}",
            cm.name_any(),
            cm.labels()
        );
    }

    // Replica 1 crashes: its tasks are aborted, its Lease is not released.
    let crashed = replicas.remove(1);
    let lost: Vec<String> = all.iter().filter(|k| before[*k] == 1).cloned().collect();
    crashed.run.abort();
    let crash = Instant::now();
    let survivors: Vec<(usize, &Replica)> = [0, 2].into_iter().zip(replicas.iter()).collect();
    // Past its renew deadline (2 s) the crashed replica is suspected: the
    // survivors list what its expiry will give them while their views
    // still hold it, and reconcile none of it before the Lease expires.
    let (prefetched, early) = loop {
        // Read before the views: a reconcile seen here started while every
        // survivor still held the crashed replica, if the views say so.
        let early = reconciled_since(&log, &lost, crash);
        let views: Vec<usize> = replicas.iter().map(|r| r.shard.members().len()).collect();
        let cached: usize = replicas.iter().map(|r| r.shard.keys_cached()).sum();
        if views.iter().any(|&n| n < 3) {
            anyhow::bail!(
                "a survivor dropped the crashed replica from its view {:?} after the crash before the survivors cached its objects ({cached} of {} cached)",
                crash.elapsed(),
                names.len()
            );
        }
        if cached >= names.len() {
            break (Instant::now(), early);
        }
        ensure!(
            crash.elapsed() < Duration::from_secs(30),
            "the survivors still see the crashed replica 30 s after the crash"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    println!(
        "selector mode crash: the survivors cached the crashed replica's objects {:?} after the crash, before its Lease expired",
        prefetched - crash
    );
    // The read that finds the Lease expired changes the survivors' views
    // and ends the suspicion together: their selectors already hold what
    // they own without the crashed replica, so no sharded watch restarts
    // (a narrower selector and a wider one again would relist each
    // survivor's shard in the moments it reconciles what it took over).
    let changes = |replicas: &[Replica]| -> Vec<u64> {
        replicas
            .iter()
            .map(|r| r.shard.selector_changes())
            .collect()
    };
    let before_expiry = changes(&replicas);
    while replicas.iter().any(|r| r.shard.members().len() == 3) {
        ensure!(
            crash.elapsed() < Duration::from_secs(30),
            "a survivor still sees the crashed replica 30 s after the crash"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let after_expiry = changes(&replicas);
    ensure!(
        before_expiry == after_expiry,
        "the crashed replica's expiry restarted the survivors' sharded watches: selector changes {before_expiry:?} before, {after_expiry:?} once both dropped it"
    );
    ensure!(
        early.is_empty(),
        "{} of the crashed replica's keys were reconciled before its Lease expired, e.g. {:?}",
        early.len(),
        early.first()
    );
    ensure!(
        eventually(Duration::from_secs(60), || each_object_cached_once(
            &replicas.iter().collect::<Vec<_>>(),
            names.len()
        ))
        .await,
        "the survivors did not take the crashed replica's ranges"
    );
    let after = owners(ns.name(), &names, &survivors)?;
    // The crashed replica's keys move, and the few buckets the survivors
    // trade to stay within one bucket of even (`sharding/ring.rs`).
    let (moved, stayed): (Vec<String>, Vec<String>) =
        all.iter().cloned().partition(|k| before[k] != after[k]);
    ensure!(
        lost.iter().all(|k| moved.contains(k)) && moved.len() * 2 <= lost.len() * 3,
        "the crash moved {} keys; the crashed replica held {}",
        moved.len(),
        lost.len()
    );
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &after, &moved, crash
        ))
        .await,
        "the moved objects were not reconciled by their new owners"
    );
    println!(
        "selector mode crash: {} keys ({} of the crashed replica's) reconciled by their new owners {:?} after the crash (lease duration 3 s)",
        moved.len(),
        lost.len(),
        crash.elapsed()
    );
    let again = reconciled_since(&log, &stayed, crash);
    // The survivors' watches restarted with their new ranges; an object
    // listed again unchanged whose owner stayed is not reconciled again.
    ensure!(
        again.is_empty(),
        "the crash reconciled {} of {} keys whose owner stayed, e.g. {:?}",
        again.len(),
        stayed.len(),
        again.first()
    );
    ensure!(overlaps(&log).is_empty(), "{:?}", overlaps(&log));
    for replica in replicas {
        replica.stop.shutdown();
        replica.run.await??;
    }
    Ok(())
}
// ANCHOR_END: selector_mode

/// A replica of `mode` serving `/metrics` and `/readyz`: its
/// placement as `/readyz?verbose` and `/metrics` say it, once joined.
async fn placement_said(
    client: Client,
    namespace: &str,
    mode: ShardingMode,
) -> Result<(String, String)> {
    let args = ManagerArgs::new()
        .with_shards(mode, namespace)
        .with_health_probe_bind_address("127.0.0.1:0")
        .with_metrics_bind_address("127.0.0.1:0");
    let mut manager = Manager::builder("sharding-said")
        .with_client(client.clone())
        .with_args(args)
        .with_leader_election_config(timings())
        .with_signal_handling(false)
        .build()
        .await?;
    let health_at = manager.health_address().context("probes are served")?;
    let metrics_at = manager.metrics_address().context("metrics are served")?;
    let maps: Api<ConfigMap> = Api::namespaced(client, namespace);
    manager
        .controller("configmaps", maps, concord_tests::Idle)
        .add()?;
    let shard = manager.sharding().context("sharded")?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    ensure!(
        eventually(Duration::from_secs(30), || shard.settled()
            && !shard.mode().is_empty())
        .await,
        "did not join"
    );
    let (_, readyz) = get(health_at, "/readyz?verbose").await?;
    let (_, metrics) = get(metrics_at, "/metrics").await?;
    stop.shutdown();
    running.await??;
    let metric = metrics
        .lines()
        .find(|l| l.starts_with("concord_shard_mode"))
        .unwrap_or_default()
        .to_owned();
    Ok((readyz, metric))
}

#[tokio::test]
async fn auto_chooses_selectors_where_the_server_serves_them_and_says_so() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let (readyz, metric) = placement_said(env.client()?, ns.name(), ShardingMode::Auto).await?;
    ensure!(readyz.contains("[+]shard-mode:selector ok\n"), "{readyz}");
    ensure!(
        metric == r#"concord_shard_mode{mode="selector"} 1"#,
        "{metric}"
    );
    Ok(())
}

/// A control plane without `ShardedListAndWatch`, a namespace in it and
/// an admin client.
async fn gateless() -> Result<(ControlPlane, Client, String)> {
    let control_plane =
        ControlPlane::start(ControlPlaneOptions::default().without_controller_manager())?;
    let kubeconfig = kube::config::Kubeconfig::read_from(control_plane.kubeconfig_path())?;
    let config =
        Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await?;
    let client = Client::try_from(config)?;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "no-shard-selectors"}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await?;
    Ok((control_plane, client, "no-shard-selectors".into()))
}

#[tokio::test]
async fn without_the_gate_auto_chooses_labels_and_selector_refuses_to_start() -> Result<()> {
    let (_control_plane, client, ns) = gateless().await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let names = create_config_maps(&api, 90).await?;
    let log: Log = Arc::default();

    // Forced: an error naming the flag, before anything is reconciled.
    let forced = replica_in(ShardingMode::Selector, client.clone(), &ns, 9, &log).await?;
    let error = forced
        .run
        .await?
        .expect_err("selector mode on a server without it");
    let message = error.to_string();
    println!("--shards=selector without the gate: {message}");
    ensure!(
        message.contains("--shards=selector") && message.contains("ShardedListAndWatch"),
        "{message}"
    );
    ensure!(log.lock().unwrap().is_empty(), "reconciled before refusing");

    // Chosen: labels, and three replicas hold every object exactly once.
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(replica_in(ShardingMode::Auto, client.clone(), &ns, i, &log).await?);
    }
    ensure!(
        eventually(Duration::from_secs(60), || each_object_cached_once(
            &replicas.iter().collect::<Vec<_>>(),
            names.len()
        ))
        .await,
        "three auto replicas on a server without shard selectors did not each cache their own shard"
    );
    for replica in &replicas {
        ensure!(replica.shard.mode() == "label", "{}", replica.shard.mode());
        ensure!(replica.shard.shard_selector().is_none());
    }
    let indexed: Vec<(usize, &Replica)> = replicas.iter().enumerate().collect();
    owners(&ns, &names, &indexed)?;
    ensure!(overlaps(&log).is_empty(), "{:?}", overlaps(&log));
    for replica in replicas {
        replica.stop.shutdown();
        replica.run.await??;
    }
    // And says so.
    let (readyz, metric) = placement_said(client, &ns, ShardingMode::Auto).await?;
    ensure!(readyz.contains("[+]shard-mode:label ok\n"), "{readyz}");
    ensure!(
        metric == r#"concord_shard_mode{mode="label"} 1"#,
        "{metric}"
    );
    Ok(())
}
