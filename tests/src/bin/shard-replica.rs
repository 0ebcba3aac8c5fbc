//! One replica of a small Argo-like operator, run as its own process by the
//! `locked` sharding test (`tests/tests/sharding/locked.rs`): two code paths each record their own finalizer
//! once on every ConfigMap labelled `shard-test/ready`, through whatever
//! strategy `--config` names (`locked` unsharded, `strict` sharded; `locked`
//! with `--shards` is refused at start-up). On SIGTERM it stops
//! gracefully and prints its metrics.
//!
//! ```text
//! shard-replica --kubeconfig KUBECONFIG --namespace NS --config strict.yaml --shards hash --leader-election-namespace NS
//! ```

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use concord::{
    Action, Context, Manager, ManagerArgs, Mutation, Reconciler, WriteError,
    manager::LeaderElectionConfig,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::{Resource, ResourceExt};

/// Objects carrying this label are processed.
const READY: &str = "shard-test/ready";

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
    /// Namespace of the ConfigMaps to process.
    #[arg(long)]
    namespace: String,
    /// Adds path `b`'s controller before path `a`'s, so that this replica
    /// reaches each object's `b` first.
    #[arg(long)]
    b_first: bool,
}

// ANCHOR: path
/// One code path: adds `finalizer` and the `done` label in one write, once —
/// the mutation does nothing on an object already marked `done`, as Argo's
/// completed label ends a pod's processing.
struct Path {
    finalizer: &'static str,
    done: &'static str,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Path {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        if !cm.labels().contains_key(READY) || cm.labels().contains_key(self.done) {
            return Ok(Action::await_change());
        }
        let (finalizer, done) = (self.finalizer, self.done);
        let once = Mutation::typed::<ConfigMap, _>(move |cm| {
            if cm.labels().contains_key(done) {
                return;
            }
            cm.meta_mut()
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(finalizer.to_owned());
            cm.labels_mut().insert(done.to_owned(), "true".to_owned());
        });
        ctx.write(&cm, once).await?;
        Ok(Action::await_change())
    }
}
// ANCHOR_END: path

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut timings = LeaderElectionConfig::default();
    // Short enough for a test, long enough that a burst of 600 writes on a
    // loaded machine does not delay a renewal past the deadline.
    timings.lease_duration = Duration::from_secs(10);
    timings.renew_deadline = Duration::from_secs(8);
    timings.retry_period = Duration::from_secs(1);
    let mut manager = Manager::builder("argo-shard")
        .with_args(cli.manager)
        .with_leader_election_config(timings)
        .build()
        .await?;
    let api: Api<ConfigMap> = Api::namespaced(manager.client().clone(), &cli.namespace);
    let a = Path {
        finalizer: "a.shard-test/recorded",
        done: "shard-test/a-done",
    };
    let b = Path {
        finalizer: "b.shard-test/recorded",
        done: "shard-test/b-done",
    };
    // A bounded number of reconciles in flight, as production operators
    // run: an unbounded burst queues the membership renewals behind it at
    // the API server (same user, same flow) past the renew deadline.
    let mut paths = [("path-a", a), ("path-b", b)];
    if cli.b_first {
        paths.reverse();
    }
    for (name, path) in paths {
        manager
            .controller(name, api.clone(), path)
            .with_concurrency(8)
            .add()?;
    }
    let metrics = manager.metrics();
    manager.run().await?;
    print!("{}", metrics.render());
    Ok(())
}
