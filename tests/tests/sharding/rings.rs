//! A shard ring belongs to one deployment, on the real control plane: two
//! sharded deployments of one binary watching two namespaces, their Leases
//! in a third, each reconcile every object of their own; a member of
//! another run is never counted; and a live replica of another
//! configuration watching the same objects stops the ring rather than
//! share it.
//!
//! ```text
//! cargo test -p concord-tests --test sharding membership::rings::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use concord::sharding::ShardingMode;
use concord_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use support::*;

/// A membership Lease as a replica of another run writes it: the ring of
/// the test binary (named after the default `--leader-election-id`), the
/// same manager, and the given mode and scope; renewed now, for `seconds`.
async fn foreign_member(
    leases: &Api<Lease>,
    name: &str,
    mode: &str,
    scope: &str,
    seconds: i32,
) -> Result<()> {
    let config = json!({
        "version": 2,
        "ring": "sharding-test",
        "manager": "sharding-test",
        "mode": mode,
        "scope": [scope],
    });
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": {
                "shard.concord.dev/ring": "sharding-test",
                "shard.concord.dev/member": "00000000deadbeef",
            },
            "annotations": {
                "shard.concord.dev/config": config.to_string(),
                "shard.concord.dev/acked": "00000000deadbeef",
            },
        },
        "spec": {
            "holderIdentity": "an-earlier-run_1-0",
            "leaseDurationSeconds": seconds,
            "acquireTime": now,
            "renewTime": now,
        },
    }))?;
    leases.create(&PostParams::default(), &lease).await?;
    Ok(())
}

/// Every key of `names` in `namespace`, each reconciled by the replica of
/// `replicas` that owns it.
fn all_reconciled_by_owner(
    log: &Log,
    namespace: &str,
    names: &[String],
    replicas: &[(usize, &Replica)],
) -> bool {
    let Ok(owners) = owners(namespace, names, replicas) else {
        return false;
    };
    let since = Instant::now() - Duration::from_secs(3600);
    reconciled_by_owner_since(log, &owners, &keys(namespace, names), since)
}

// ANCHOR: two_deployments
#[tokio::test]
async fn two_deployments_of_one_binary_keep_their_own_objects_and_ignore_another_run() -> Result<()>
{
    let env = TestEnv::shared()?;
    let (leases_ns, ns_a, ns_b) = (
        env.namespace().await?,
        env.namespace().await?,
        env.namespace().await?,
    );
    let leases: Api<Lease> = Api::namespaced(leases_ns.client(), leases_ns.name());
    // A member of an earlier run of the same binary that watched another
    // namespace: its Lease claims an hour, and it never renews again.
    foreign_member(
        &leases,
        "sharding-test-0123abcd-00000000deadbeef",
        "hash",
        "v1/ConfigMap@an-earlier-run",
        3600,
    )
    .await?;
    let a: Api<ConfigMap> = Api::namespaced(ns_a.client(), ns_a.name());
    let b: Api<ConfigMap> = Api::namespaced(ns_b.client(), ns_b.name());
    let names_a = create_config_maps(&a, 300).await?;
    let names_b = create_config_maps(&b, 300).await?;
    let log: Log = Arc::default();

    // Same binary, same manager name, same (default) election id, Leases
    // in one namespace: only the watched namespace differs.
    let deployment_a = Deployment {
        mode: ShardingMode::Hash,
        leases: leases_ns.name(),
        watched: ns_a.name(),
        ring: None,
    };
    let deployment_b = Deployment {
        watched: ns_b.name(),
        ..deployment_a
    };
    let mut replicas = Vec::new();
    for (i, deployment) in [&deployment_a, &deployment_a, &deployment_b, &deployment_b]
        .into_iter()
        .enumerate()
    {
        replicas.push(replica_of(deployment, env.client()?, i, &log).await?);
    }
    let of_a: Vec<(usize, &Replica)> = vec![(0, &replicas[0]), (1, &replicas[1])];
    let of_b: Vec<(usize, &Replica)> = vec![(2, &replicas[2]), (3, &replicas[3])];
    let mut most_members = 0;
    let done = eventually(Duration::from_secs(90), || {
        most_members = replicas
            .iter()
            .map(|r| r.shard.members().len())
            .max()
            .unwrap_or(0)
            .max(most_members);
        settled(&[&replicas[0], &replicas[1]], 2)
            && settled(&[&replicas[2], &replicas[3]], 2)
            && all_reconciled_by_owner(&log, ns_a.name(), &names_a, &of_a)
            && all_reconciled_by_owner(&log, ns_b.name(), &names_b, &of_b)
    })
    .await;
    for r in &replicas {
        println!(
            "{}: members {:?}, owns {}, refused {:?}",
            r.shard.member(),
            r.shard.members(),
            r.shard.keys_owned(),
            r.shard.refused_members()
        );
    }
    ensure!(
        done,
        "not every object was reconciled by its own deployment's owner"
    );
    ensure!(
        most_members == 2,
        "a replica counted {most_members} members: the deployments shared a ring, or counted the earlier run"
    );
    ensure!(
        replicas
            .iter()
            .all(|r| r.shard.refused_members().is_empty()),
        "a member of a disjoint configuration stopped a ring"
    );
    // Each deployment's objects split between its two replicas.
    for (namespace, names, of) in [
        (ns_a.name(), &names_a, &of_a),
        (ns_b.name(), &names_b, &of_b),
    ] {
        let owners = owners(namespace, names, of)?;
        let mut counts = BTreeMap::new();
        for owner in owners.values() {
            *counts.entry(*owner).or_insert(0) += 1;
        }
        println!("{namespace}: owned {counts:?}");
        ensure!(
            counts.values().all(|n| (90..=210).contains(n)) && counts.len() == 2,
            "{namespace} split {counts:?}"
        );
    }
    // Nobody reconciled an object of the other deployment.
    {
        let log = log.lock().unwrap();
        for (key, spans) in log.iter() {
            let own = if key.starts_with(&format!("{}/", ns_a.name())) {
                [0, 1]
            } else {
                [2, 3]
            };
            ensure!(
                spans.iter().all(|s| own.contains(&s.replica)),
                "{key} was reconciled by another deployment"
            );
        }
    }
    let overlapping = overlaps(&log);
    ensure!(overlapping.is_empty(), "overlaps: {overlapping:?}");
    for r in &replicas {
        r.stop.shutdown();
    }
    for r in replicas {
        r.run.await??;
    }
    Ok(())
}
// ANCHOR_END: two_deployments

#[tokio::test]
async fn a_live_replica_of_another_configuration_on_the_same_objects_stops_the_ring() -> Result<()>
{
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names = create_config_maps(&api, 100).await?;
    let log: Log = Arc::default();
    let mut replicas = Vec::new();
    for i in 0..2 {
        replicas.push(replica(env.client()?, ns.name(), i, &log).await?);
    }
    let indexed: Vec<(usize, &Replica)> = replicas.iter().enumerate().collect();
    ensure!(
        eventually(Duration::from_secs(60), || settled(
            &[&replicas[0], &replicas[1]],
            2
        ) && all_reconciled_by_owner(
            &log,
            ns.name(),
            &names,
            &indexed
        ))
        .await,
        "two replicas did not reconcile their objects"
    );

    // A replica of the same ring name in `label` mode on the same objects
    // (a rollout that changed --shards): it may own any of them.
    let foreign = "sharding-test-0badc0de-00000000deadbeef";
    foreign_member(
        &leases,
        foreign,
        "label",
        &format!("v1/ConfigMap@{}", ns.name()),
        3600,
    )
    .await?;
    ensure!(
        eventually(Duration::from_secs(30), || replicas
            .iter()
            .all(|r| r.shard.refused_members() == [foreign.to_owned()]))
        .await,
        "the replicas did not refuse the member of another configuration"
    );
    ensure!(
        replicas.iter().all(|r| r.shard.members().len() == 2),
        "a member of another configuration was counted"
    );
    let refused_at = Instant::now();
    let late = create_config_maps_named(&api, "late", 20).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let late_keys = keys(ns.name(), &late);
    {
        let log = log.lock().unwrap();
        let started: Vec<&String> = log
            .iter()
            .filter(|(_, spans)| spans.iter().any(|s| s.start_after(refused_at)))
            .map(|(k, _)| k)
            .collect();
        ensure!(
            started.is_empty(),
            "reconciles started while a replica of another configuration was live: {started:?}"
        );
    }

    // It goes: the ring is the deployment's own again.
    leases.delete(foreign, &DeleteParams::default()).await?;
    let gone = Instant::now();
    let owners = owners(ns.name(), &late, &indexed)?;
    ensure!(
        eventually(Duration::from_secs(30), || reconciled_by_owner_since(
            &log, &owners, &late_keys, gone
        ))
        .await,
        "the objects created meanwhile were not reconciled once it went"
    );
    let overlapping = overlaps(&log);
    ensure!(overlapping.is_empty(), "overlaps: {overlapping:?}");
    let left = leases
        .list(&ListParams::default().labels("shard.concord.dev/ring=sharding-test"))
        .await?;
    ensure!(left.items.len() == 2, "{} Leases", left.items.len());
    for r in &replicas {
        r.stop.shutdown();
    }
    for r in replicas {
        r.run.await??;
    }
    Ok(())
}
