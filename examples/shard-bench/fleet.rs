//! The replicas under test: `hash` replicas of one manager in this
//! process, and the log of every reconcile they ran.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, manager::LeaderElectionConfig,
    manager::ShutdownHandle, sharding::ShardHandle, sharding::ShardingMode,
};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;

/// The manager name; its membership Leases are `shard-bench-shard-<member>`.
pub const MANAGER: &str = "shard-bench";

/// One reconcile that ended (or was dropped): which replica, when.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub replica: usize,
    pub start: Instant,
    pub end: Instant,
}

pub type Log = Arc<Mutex<HashMap<String, Vec<Span>>>>;

pub struct Recorder {
    pub replica: usize,
    pub log: Log,
    pub hold: Duration,
}

/// Records its span when dropped: at the end of the reconcile, or when the
/// replica's task is aborted mid-reconcile.
struct Open {
    replica: usize,
    key: String,
    start: Instant,
    log: Log,
}

impl Drop for Open {
    fn drop(&mut self) {
        let span = Span {
            replica: self.replica,
            start: self.start,
            end: Instant::now(),
        };
        let key = std::mem::take(&mut self.key);
        self.log.lock().unwrap().entry(key).or_default().push(span);
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
        tokio::time::sleep(self.hold).await;
        Ok(Action::await_change())
    }
}

pub struct Replica {
    pub index: usize,
    pub shard: ShardHandle,
    pub run: JoinHandle<Result<(), concord::Error>>,
    pub stop: ShutdownHandle,
}

pub struct Setup {
    pub config: kube::Config,
    pub namespace: String,
    pub timings: LeaderElectionConfig,
    pub hold: Duration,
    pub log: Log,
}

impl Setup {
    pub async fn replica(&self, index: usize) -> Result<Replica> {
        let args = ManagerArgs::new().with_shards(ShardingMode::Hash, &self.namespace);
        // A connection pool of its own per replica (and one for its
        // membership), as separate processes would have.
        let mut manager = Manager::builder(MANAGER)
            .with_builtin_type::<ConfigMap>()
            .with_kube_config(self.config.clone())
            .with_args(args)
            .with_leader_election_config(self.timings)
            .with_signal_handling(false)
            .build()
            .await?;
        let api: Api<ConfigMap> = Api::namespaced(manager.client().clone(), &self.namespace);
        let recorder = Recorder {
            replica: index,
            log: self.log.clone(),
            hold: self.hold,
        };
        manager.controller("configmaps", api, recorder).add()?;
        let shard = manager.sharding().context("the manager is sharded")?;
        let stop = manager.shutdown_handle();
        let run = tokio::spawn(manager.run());
        Ok(Replica {
            index,
            shard,
            run,
            stop,
        })
    }

    /// Whether the ring of `live` is settled and every key's latest
    /// reconcile ran on its owner (so keys moved to a newcomer were
    /// reconciled by it).
    pub fn settled(&self, live: &[Replica], keys: &[String]) -> bool {
        let ring = live
            .iter()
            .all(|r| r.shard.settled() && r.shard.members().len() == live.len());
        if !ring {
            return false;
        }
        let log = self.log.lock().unwrap();
        keys.iter().all(|key| {
            let name = key.rsplit('/').next().unwrap_or_default();
            let owners: Vec<usize> = live
                .iter()
                .filter(|r| r.shard.owns(&self.namespace, name))
                .map(|r| r.index)
                .collect();
            let latest = log
                .get(key)
                .and_then(|spans| spans.iter().max_by_key(|s| s.start));
            owners.len() == 1 && latest.is_some_and(|s| s.replica == owners[0])
        })
    }

    pub async fn wait_settled(&self, live: &[Replica], keys: &[String]) -> Result<()> {
        let start = Instant::now();
        while !self.settled(live, keys) {
            alive(live)?;
            if start.elapsed() > Duration::from_secs(120) {
                let status: Vec<String> = live
                    .iter()
                    .map(|r| {
                        format!(
                            "replica {} ({}): members {:?}, settled {}, owns {}, caches {}",
                            r.index,
                            r.shard.member(),
                            r.shard.members(),
                            r.shard.settled(),
                            r.shard.keys_owned(),
                            r.shard.keys_cached()
                        )
                    })
                    .collect();
                bail!(
                    "the ring of {} replicas did not settle in 120 s, or not every key was reconciled by its owner:\n{}",
                    live.len(),
                    status.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

/// Fails if a replica stopped on its own: it lost its membership (a
/// renewal did not succeed within the renew deadline: an overloaded
/// machine, or timings too tight for it).
pub fn alive(live: &[Replica]) -> Result<()> {
    if let Some(r) = live.iter().find(|r| r.run.is_finished()) {
        bail!(
            "replica {} ({}) stopped on its own: it could not renew its membership Lease within the renew deadline (set RUST_LOG=concord=info to see why; longer timings help on a loaded machine)",
            r.index,
            r.shard.member()
        );
    }
    Ok(())
}

/// The membership Lease of `member` (`<ring>-<configuration
/// fingerprint>-<member>`, labelled with its member id).
pub async fn member_lease(leases: &Api<Lease>, member: &str) -> Result<Lease> {
    let params = ListParams::default().labels(&format!("shard.concord.dev/member={member}"));
    leases
        .list(&params)
        .await?
        .items
        .into_iter()
        .next()
        .with_context(|| format!("the membership Lease of {member}"))
}

pub async fn create_config_maps(api: &Api<ConfigMap>, n: usize) -> Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("cm-{i}")).collect();
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

/// Pairs of reconciles of one key on two replicas that overlapped.
pub fn overlaps(log: &Log) -> usize {
    let log = log.lock().unwrap();
    let mut found = 0;
    for spans in log.values() {
        let mut spans = spans.clone();
        spans.sort_by_key(|s| s.start);
        let mut latest: Option<Span> = None;
        for span in spans {
            if let Some(prev) = latest {
                if span.start < prev.end && span.replica != prev.replica {
                    found += 1;
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
