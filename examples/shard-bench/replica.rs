//! One replica process of the memory benchmark: a Pod controller whose
//! reconciler does nothing, `--shards=label`, `selector` or `off`, printing what it has
//! cached every 250 ms on stdout (`cached=N owned=N settled=true|false`) until SIGTERM.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, WriteError, manager::LeaderElectionConfig,
};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;

/// The replica's command line (every `ManagerArgs` flag, and the namespace).
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    manager: ManagerArgs,
    /// Namespace of the Pods.
    #[arg(long)]
    namespace: String,
}

/// Remembers which Pods it has seen (the unsharded replica's measure of a
/// synced cache; the same small set in every replica, so fair to all).
struct Seen(Arc<Mutex<HashSet<String>>>);

#[concord::async_trait]
impl Reconciler<Pod> for Seen {
    type Error = WriteError;

    async fn reconcile(&self, pod: Arc<Pod>, _ctx: &Context<Pod>) -> Result<Action, WriteError> {
        self.0.lock().unwrap().insert(pod.name_any());
        Ok(Action::await_change())
    }
}

/// Runs the replica until SIGTERM.
pub async fn run(args: Args) -> Result<()> {
    let mut timings = LeaderElectionConfig::default();
    timings.lease_duration = Duration::from_secs(10);
    timings.renew_deadline = Duration::from_secs(8);
    timings.retry_period = Duration::from_secs(1);
    let mut manager = Manager::builder("shard-bench-memory")
        .with_builtin_type::<Pod>()
        .with_args(args.manager)
        .with_leader_election_config(timings)
        .build()
        .await?;
    let api: Api<Pod> = Api::namespaced(manager.client().clone(), &args.namespace);
    let seen = Arc::new(Mutex::new(HashSet::new()));
    manager.controller("pods", api, Seen(seen.clone())).add()?;
    let shard = manager.sharding();
    let report = tokio::spawn(async move {
        // Counting the cached keys reads every cached object's uid in
        // `selector` mode: once a second, so the status line costs the
        // sharded replicas little of the CPU time the benchmark reports.
        let mut cached_keys = 0;
        for tick in 0u64.. {
            let (cached, owned, settled) = match &shard {
                Some(shard) => {
                    if tick % 4 == 0 {
                        cached_keys = shard.keys_cached();
                    }
                    (cached_keys, shard.keys_owned(), shard.settled())
                }
                None => {
                    let n = seen.lock().unwrap().len();
                    (n, n as u64, true)
                }
            };
            println!("cached={cached} owned={owned} settled={settled}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    let result = manager.run().await;
    report.abort();
    Ok(result?)
}
