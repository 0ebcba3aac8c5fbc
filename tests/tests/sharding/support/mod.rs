//! What the sharding tests share: a reconcile recorder, replicas on short
//! leases, and checks over who owned and reconciled which key.
// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, manager::LeaderElectionConfig,
    sharding::ShardHandle, sharding::ShardingMode,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;

/// One reconcile: which replica ran it and when (end = when it finished or
/// was dropped).
#[derive(Clone, Debug)]
pub(crate) struct Span {
    pub(crate) replica: usize,
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Span {
    /// Whether this reconcile started after `instant`.
    pub(crate) fn start_after(&self, instant: Instant) -> bool {
        self.start > instant
    }
}

pub(crate) type Log = Arc<Mutex<HashMap<String, Vec<Span>>>>;

// ANCHOR: recorder
/// Records every reconcile's start and end per replica; holds each
/// reconcile a few milliseconds so handovers meet reconciles in flight.
pub(crate) struct Recorder {
    replica: usize,
    log: Log,
}

/// Records the span when the reconcile ends, including when it is aborted.
pub(crate) struct Open {
    pub(crate) replica: usize,
    pub(crate) key: String,
    pub(crate) start: Instant,
    pub(crate) log: Log,
}

impl Drop for Open {
    fn drop(&mut self) {
        let span = Span {
            replica: self.replica,
            start: self.start,
            end: Instant::now(),
        };
        let mut log = self.log.lock().unwrap();
        log.entry(std::mem::take(&mut self.key))
            .or_default()
            .push(span);
    }
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Recorder {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        let _open = Open {
            replica: self.replica,
            key: format!("{}/{}", cm.namespace().unwrap_or_default(), cm.name_any()),
            start: Instant::now(),
            log: self.log.clone(),
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Action::await_change())
    }
}
// ANCHOR_END: recorder

/// Short lease timings so a crash hands over in seconds.
pub(crate) fn timings() -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::default();
    config.lease_duration = Duration::from_secs(3);
    config.renew_deadline = Duration::from_secs(2);
    config.retry_period = Duration::from_millis(500);
    config
}

pub(crate) struct Replica {
    pub(crate) shard: ShardHandle,
    pub(crate) run: JoinHandle<Result<(), concord::Error>>,
    pub(crate) stop: concord::manager::ShutdownHandle,
}

pub(crate) async fn replica(
    client: Client,
    namespace: &str,
    index: usize,
    log: &Log,
) -> Result<Replica> {
    replica_in(ShardingMode::Hash, client, namespace, index, log).await
}

pub(crate) async fn replica_in(
    mode: ShardingMode,
    client: Client,
    namespace: &str,
    index: usize,
    log: &Log,
) -> Result<Replica> {
    let deployment = Deployment {
        mode,
        leases: namespace,
        watched: namespace,
        ring: None,
    };
    replica_of(&deployment, client, index, log).await
}

// ANCHOR: replica
/// What tells one deployment of the test binary from another.
pub(crate) struct Deployment<'a> {
    pub(crate) mode: ShardingMode,
    /// `--leader-election-namespace`: where the membership Leases live.
    pub(crate) leases: &'a str,
    /// The namespace its controller watches.
    pub(crate) watched: &'a str,
    /// `--shard-ring`, if given.
    pub(crate) ring: Option<&'a str>,
}

/// One replica of `deployment`, recording its reconciles as replica `index`.
pub(crate) async fn replica_of(
    deployment: &Deployment<'_>,
    client: Client,
    index: usize,
    log: &Log,
) -> Result<Replica> {
    let mut args = ManagerArgs::new().with_shards(deployment.mode, deployment.leases);
    if let Some(ring) = deployment.ring {
        args = args.with_shard_ring(ring);
    }
    let namespace = deployment.watched;
    let mut manager = Manager::builder("sharding-test")
        .with_client(client.clone())
        .with_args(args)
        .with_leader_election_config(timings())
        .with_signal_handling(false)
        .build()
        .await?;
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let recorder = Recorder {
        replica: index,
        log: log.clone(),
    };
    manager.controller("configmaps", api, recorder).add()?;
    let shard = manager.sharding().expect("--shards=hash");
    let stop = manager.shutdown_handle();
    let run = tokio::spawn(manager.run());
    Ok(Replica { shard, run, stop })
}
// ANCHOR_END: replica

pub(crate) async fn create_config_maps(api: &Api<ConfigMap>, n: usize) -> Result<Vec<String>> {
    create_config_maps_named(api, "cm", n).await
}

/// Creates `n` ConfigMaps `<prefix>-0` … and returns their names.
pub(crate) async fn create_config_maps_named(
    api: &Api<ConfigMap>,
    prefix: &str,
    n: usize,
) -> Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    let results: Vec<Result<()>> = futures::stream::iter(names.clone())
        .map(|name| {
            let api = api.clone();
            async move {
                let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
                api.create(&PostParams::default(), &cm).await?;
                Ok(())
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(names)
}

/// Polls `check` every 100 ms for up to `limit`.
pub(crate) async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Every pair of reconciles of one key on two replicas that overlapped.
pub(crate) fn overlaps(log: &Log) -> Vec<String> {
    let log = log.lock().unwrap();
    let mut found = Vec::new();
    for (key, spans) in log.iter() {
        let mut spans = spans.clone();
        spans.sort_by_key(|s| s.start);
        let mut latest: Option<Span> = None;
        for span in spans {
            if let Some(prev) = &latest {
                if span.start < prev.end && span.replica != prev.replica {
                    found.push(format!(
                        "{key}: replica {} from {:?} while replica {} until {:?}",
                        span.replica, span.start, prev.replica, prev.end
                    ));
                }
                if span.end > prev.end {
                    latest = Some(span);
                }
            } else {
                latest = Some(span);
            }
        }
    }
    found
}

pub(crate) fn settled(replicas: &[&Replica], members: usize) -> bool {
    let done = replicas
        .iter()
        .all(|r| r.shard.settled() && r.shard.members().len() == members);
    if !done {
        static LAST: Mutex<Option<Instant>> = Mutex::new(None);
        let mut last = LAST.lock().unwrap();
        if last.is_none_or(|t| t.elapsed() > Duration::from_secs(5)) {
            *last = Some(Instant::now());
            for r in replicas {
                println!(
                    "  {}: members {:?} settled {} ring version {} owns {} cached {}",
                    r.shard.member(),
                    r.shard.members(),
                    r.shard.settled(),
                    r.shard.ring_version(),
                    r.shard.keys_owned(),
                    r.shard.keys_cached()
                );
            }
        }
    }
    done
}

pub(crate) fn keys(namespace: &str, names: &[String]) -> Vec<String> {
    names.iter().map(|n| format!("{namespace}/{n}")).collect()
}

/// Which replica owns each key, by each replica's own account; fails if a
/// key has no owner or two.
pub(crate) fn owners(
    namespace: &str,
    names: &[String],
    replicas: &[(usize, &Replica)],
) -> Result<BTreeMap<String, usize>> {
    let mut owners = BTreeMap::new();
    for name in names {
        let claimed: Vec<usize> = replicas
            .iter()
            .filter(|(_, r)| r.shard.owns(namespace, name))
            .map(|(i, _)| *i)
            .collect();
        ensure!(claimed.len() == 1, "{name} is owned by {claimed:?}");
        owners.insert(format!("{namespace}/{name}"), claimed[0]);
    }
    Ok(owners)
}

/// Whether every key in `keys` was reconciled by its owner after `since`.
pub(crate) fn reconciled_by_owner_since(
    log: &Log,
    owners: &BTreeMap<String, usize>,
    keys: &[String],
    since: Instant,
) -> bool {
    let log = log.lock().unwrap();
    keys.iter().all(|k| {
        log.get(k).is_some_and(|spans| {
            spans
                .iter()
                .any(|s| s.start >= since && Some(&s.replica) == owners.get(k))
        })
    })
}

/// The keys of `keys` that some replica started a reconcile of after `since`.
pub(crate) fn reconciled_since(log: &Log, keys: &[String], since: Instant) -> Vec<String> {
    let log = log.lock().unwrap();
    keys.iter()
        .filter(|k| {
            log.get(*k)
                .is_some_and(|spans| spans.iter().any(|s| s.start_after(since)))
        })
        .cloned()
        .collect()
}
