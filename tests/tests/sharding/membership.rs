//! Sharding on the real control plane: three replicas of one manager divide
//! 3,000 objects over membership Leases, a fourth joins and one crashes, and
//! no object is ever in a reconcile on two replicas at once.
//!
//! ```text
//! cargo test -p concord-tests --test sharding membership::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use concord::sharding::ShardingMode;
use concord_testenv::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;

use support::*;

#[tokio::test]
async fn three_replicas_share_3000_objects_and_never_overlap() -> Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names = create_config_maps(
        &api,
        std::env::var("N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(3_000),
    )
    .await?;
    let log: Log = Arc::default();

    // Staggered starts: the first replica begins alone with every key, so
    // the others' arrivals hand keys over while reconciles are in flight.
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(replica(env.client()?, ns.name(), i, &log).await?);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let all = keys(ns.name(), &names);
    let done = eventually(Duration::from_secs(120), || {
        let refs: Vec<&Replica> = replicas.iter().collect();
        let log = log.lock().unwrap();
        settled(&refs, 3) && all.iter().all(|k| log.contains_key(k))
    })
    .await;
    ensure!(
        done,
        "not every object was reconciled on a settled ring of three"
    );
    let indexed: Vec<(usize, &Replica)> = replicas.iter().enumerate().collect();
    let owners = owners(ns.name(), &names, &indexed)?;
    // Moved keys are reconciled by their new owner once it has them.
    let since = Instant::now() - Duration::from_secs(3600);
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &owners, &all, since
        ))
        .await,
        "some object was never reconciled by its owner"
    );
    let overlapping = overlaps(&log);
    ensure!(
        overlapping.is_empty(),
        "reconciles overlapped:\n{}",
        overlapping.join("\n")
    );
    for (i, replica) in replicas.iter().enumerate() {
        let owned = owners.values().filter(|o| **o == i).count();
        println!("replica {i} ({}) owns {owned}", replica.shard.member());
        ensure!(
            (800..=1_200).contains(&owned),
            "replica {i} owns {owned} of 3,000"
        );
    }
    let spans: usize = log.lock().unwrap().values().map(Vec::len).sum();
    println!("{spans} reconciles of 3,000 objects, none overlapping across replicas");
    for replica in &replicas {
        replica.stop.shutdown();
    }
    for replica in replicas {
        replica.run.await??;
    }
    Ok(())
}

#[tokio::test]
async fn a_joiner_takes_a_quarter_and_a_crashed_replica_s_objects_move_after_expiry() -> Result<()>
{
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names = create_config_maps(&api, 1_200).await?;
    let all = keys(ns.name(), &names);
    let log: Log = Arc::default();
    let start = Instant::now();
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(replica(env.client()?, ns.name(), i, &log).await?);
    }
    ensure!(
        eventually(Duration::from_secs(60), || settled(
            &replicas.iter().collect::<Vec<_>>(),
            3
        ))
        .await,
        "three replicas did not settle"
    );
    let before = owners(
        ns.name(),
        &names,
        &replicas.iter().enumerate().collect::<Vec<_>>(),
    )?;
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &before, &all, start
        ))
        .await,
        "the three replicas did not reconcile every object"
    );

    // A fourth replica joins mid-run.
    let joined = Instant::now();
    replicas.push(replica(env.client()?, ns.name(), 3, &log).await?);
    ensure!(
        eventually(Duration::from_secs(60), || settled(
            &replicas.iter().collect::<Vec<_>>(),
            4
        ))
        .await,
        "four replicas did not settle"
    );
    let after = owners(
        ns.name(),
        &names,
        &replicas.iter().enumerate().collect::<Vec<_>>(),
    )?;
    let moved: Vec<String> = all
        .iter()
        .filter(|k| before[*k] != after[*k])
        .cloned()
        .collect();
    ensure!(
        moved.iter().all(|k| after[k] == 3),
        "a join moves keys only to the newcomer"
    );
    let share = moved.len() as f64 / all.len() as f64;
    println!(
        "join: {} of {} keys moved ({share:.3})",
        moved.len(),
        all.len()
    );
    ensure!(
        (0.15..=0.35).contains(&share),
        "a fourth replica took {share:.3} of the keys"
    );
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &after, &moved, joined
        ))
        .await,
        "the newcomer did not reconcile the keys it took"
    );
    println!(
        "join: moved keys reconciled by the newcomer {:?} after it started",
        joined.elapsed()
    );
    // A view change re-runs only the reconciles of keys that moved.
    let kept: Vec<String> = all
        .iter()
        .filter(|k| before[*k] == after[*k])
        .cloned()
        .collect();
    let again = reconciled_since(&log, &kept, joined);
    ensure!(
        again.is_empty(),
        "the join reconciled {} of {} keys that did not move, e.g. {:?}",
        again.len(),
        kept.len(),
        again.first()
    );

    // Replica 1 crashes: its tasks are aborted, its Lease is not released.
    let crashed = replicas.remove(1);
    let lost: Vec<String> = all.iter().filter(|k| after[*k] == 1).cloned().collect();
    crashed.run.abort();
    let crash = Instant::now();
    let survivors: Vec<(usize, &Replica)> = [0, 2, 3].into_iter().zip(replicas.iter()).collect();
    ensure!(
        eventually(Duration::from_secs(60), || settled(
            &replicas.iter().collect::<Vec<_>>(),
            3
        ))
        .await,
        "the survivors did not drop the crashed replica"
    );
    let last = owners(ns.name(), &names, &survivors)?;
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &last, &lost, crash
        ))
        .await,
        "the crashed replica's objects were not reconciled by their new owners"
    );
    println!(
        "crash: {} keys reconciled by their new owners {:?} after the crash (lease duration 3 s)",
        lost.len(),
        crash.elapsed()
    );
    let stayed: Vec<String> = all.iter().filter(|k| after[*k] != 1).cloned().collect();
    let again = reconciled_since(&log, &stayed, crash);
    ensure!(
        again.is_empty(),
        "the crash reconciled {} of {} keys whose owner lives, e.g. {:?}",
        again.len(),
        stayed.len(),
        again.first()
    );

    // The newcomer leaves: the keys it took go back to replicas that
    // reconciled them before it joined, and nothing else tells those
    // replicas about them — no event, no refusal.
    let leaver = replicas.pop().unwrap();
    let returned: Vec<String> = all.iter().filter(|k| last[*k] == 3).cloned().collect();
    let left = Instant::now();
    leaver.stop.shutdown();
    leaver.run.await??;
    ensure!(
        eventually(Duration::from_secs(60), || settled(
            &replicas.iter().collect::<Vec<_>>(),
            2
        ))
        .await,
        "the last two replicas did not settle"
    );
    let rest: Vec<(usize, &Replica)> = [0, 2].into_iter().zip(replicas.iter()).collect();
    let home = owners(ns.name(), &names, &rest)?;
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &home, &returned, left
        ))
        .await,
        "the keys the newcomer gave back were not reconciled by their owners"
    );
    println!(
        "leave: {} keys the newcomer held reconciled by their owners {:?} after it left",
        returned.len(),
        left.elapsed()
    );
    let overlapping = overlaps(&log);
    ensure!(
        overlapping.is_empty(),
        "reconciles overlapped:\n{}",
        overlapping.join("\n")
    );
    for replica in &replicas {
        replica.stop.shutdown();
    }
    for replica in replicas {
        replica.run.await??;
    }
    Ok(())
}

// ANCHOR: label_mode
#[tokio::test]
async fn label_mode_caches_only_each_replica_s_shard_and_a_move_relabels() -> Result<()> {
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
        replicas.push(replica_in(ShardingMode::Label, env.client()?, ns.name(), i, &log).await?);
    }
    // The ring is named after --leader-election-id, whose default is the
    // manager's name.
    let label = "shard.concord.dev/sharding-test";
    // Each replica's cache holds exactly the objects it owns, and every
    // object carries its owner's member id.
    let cached_own_shard = |replicas: &[Replica]| {
        let refs: Vec<&Replica> = replicas.iter().collect();
        settled(&refs, replicas.len())
            && replicas
                .iter()
                .all(|r| r.shard.keys_cached() as u64 == r.shard.keys_owned())
            && replicas
                .iter()
                .map(|r| r.shard.keys_cached())
                .sum::<usize>()
                == names.len()
    };
    ensure!(
        eventually(Duration::from_secs(60), || cached_own_shard(&replicas)).await,
        "three label-mode replicas did not each cache their own shard"
    );
    ensure!(
        replicas[0].shard.label_key().as_deref() == Some(label),
        "the shard label is {:?}",
        replicas[0].shard.label_key()
    );
    for replica in &replicas {
        let cached = replica.shard.keys_cached();
        println!(
            "label mode: {} caches {cached} of 300",
            replica.shard.member()
        );
        ensure!(
            (60..=140).contains(&cached),
            "a replica caches {cached} of 300 objects"
        );
    }
    for cm in api.list(&Default::default()).await?.items {
        let owner = replicas
            .iter()
            .find(|r| r.shard.owns(ns.name(), &cm.name_any()));
        ensure!(
            owner.map(|r| r.shard.member()) == cm.labels().get(label).map(String::as_str),
            "{} is labelled {:?}",
            cm.name_any(),
            cm.labels().get(label)
        );
    }

    // Replica 2 leaves cleanly: its objects are relabelled, and the new
    // owners' watches pick them up and reconcile them.
    let leaving = replicas.remove(2);
    let indexed: Vec<(usize, &Replica)> = replicas.iter().enumerate().collect();
    let moved: Vec<String> = all
        .iter()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap_or_default();
            leaving.shard.owns(ns.name(), name)
        })
        .cloned()
        .collect();
    drop(indexed);
    leaving.stop.shutdown();
    leaving.run.await??;
    let left = Instant::now();
    ensure!(
        eventually(Duration::from_secs(60), || cached_own_shard(&replicas)).await,
        "the two remaining replicas did not take over the leaver's shard"
    );
    let owners = owners(ns.name(), &names, &[(0, &replicas[0]), (1, &replicas[1])])?;
    ensure!(
        eventually(Duration::from_secs(90), || reconciled_by_owner_since(
            &log, &owners, &moved, left
        ))
        .await,
        "the relabelled objects were not reconciled by their new owners"
    );
    println!(
        "label mode: {} objects relabelled and reconciled by their new owners {:?} after a clean leave",
        moved.len(),
        left.elapsed()
    );
    for cm in api.list(&Default::default()).await?.items {
        let key = format!("{}/{}", ns.name(), cm.name_any());
        let owner = replicas[owners[&key]].shard.member();
        ensure!(
            cm.labels().get(label).map(String::as_str) == Some(owner),
            "{key} was not relabelled"
        );
    }
    let overlapping = overlaps(&log);
    ensure!(
        overlapping.is_empty(),
        "reconciles overlapped:\n{}",
        overlapping.join("\n")
    );
    for replica in &replicas {
        replica.stop.shutdown();
    }
    for replica in replicas {
        replica.run.await??;
    }
    Ok(())
}
// ANCHOR_END: label_mode

/// The rules `Permissions::sharding` adds are what a replica needs: two
/// replicas holding exactly those (and their controller's own) divide the
/// objects; one holding only the leader-election rules refuses to start,
/// naming what it lacks, instead of running owning nothing.
#[tokio::test]
async fn replicas_run_on_the_rules_sharding_grants_and_refuse_to_start_without_them() -> Result<()>
{
    use concord::featuregates::{ConfigLoader, FeatureRegistry};
    use concord::rbac::Permissions;

    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names = create_config_maps(&api, 60).await?;
    let config = ConfigLoader::new()
        .with_yaml("concord.yaml", "strategies: {default: guarded}")
        .load(FeatureRegistry::new())?;
    let granted = Permissions::new(config.strategies())
        .watches::<ConfigMap>()
        .sharding(ShardingMode::Hash)
        .rules();
    let log: Log = Arc::default();
    let mut replicas = Vec::new();
    for i in 0..2 {
        let client = env.restricted_client(ns.name(), granted.clone()).await?;
        replicas.push(replica(client, ns.name(), i, &log).await?);
    }
    let all = keys(ns.name(), &names);
    ensure!(
        eventually(Duration::from_secs(60), || {
            let refs: Vec<&Replica> = replicas.iter().collect();
            let log = log.lock().unwrap();
            settled(&refs, 2) && all.iter().all(|k| log.contains_key(k))
        })
        .await,
        "two replicas on the granted rules never settled and reconciled every object"
    );

    let without = Permissions::new(config.strategies())
        .watches::<ConfigMap>()
        .leader_election()
        .rules();
    let client = env.restricted_client(ns.name(), without).await?;
    let refused = replica(client, ns.name(), 2, &log).await?;
    let ended = tokio::time::timeout(Duration::from_secs(30), refused.run)
        .await
        .map_err(|_| anyhow::anyhow!("a replica that cannot list the Leases kept running"))??;
    match ended {
        Err(concord::Error::ShardMembership { message, .. }) => ensure!(
            message.contains("listing the membership leases failed")
                && message.contains("a sharded replica needs list and watch on leases besides")
                && message.contains("(Permissions::sharding)"),
            "the refusal does not say what is missing: {message}"
        ),
        other => anyhow::bail!("expected a membership error, got {other:?}"),
    }
    for replica in &replicas {
        replica.stop.shutdown();
    }
    for replica in replicas {
        replica.run.await??;
    }
    Ok(())
}
