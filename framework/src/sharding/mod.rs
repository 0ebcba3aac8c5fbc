//! Scaling out: one manager's objects divided among its replicas.
//!
//! Each replica holds a membership Lease; every object key maps to one live
//! member by rendezvous hashing ([`ring`]); a key moves from one replica to
//! another only after the old owner drained it and acknowledged the new
//! view in its Lease ([`gate`], [`member`]). The book chapter *Scaling out*
//! describes the protocol and its failure cases.

mod gate;
mod handle;
pub(crate) mod hooks;
mod member;
mod mode;
mod ring;
mod sharder;
mod stats;

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;

pub use handle::ShardHandle;
pub use mode::ShardingMode;
pub(crate) use stats::ShardStats;

use crate::leader::LeaderElector;
use crate::{Error, LeaderElectionConfig};
use gate::ShardGate;
use member::Membership;

/// The label key that carries an object's owner in `label` mode.
pub(crate) fn shard_label(manager: &str) -> String {
    format!("shard.concord.dev/{}", member::sanitize(manager))
}

/// Checks the timings the membership Leases are renewed with.
///
/// # Errors
///
/// [`Error::ShardingConfig`] naming the timing at fault.
pub(crate) fn validate(config: &LeaderElectionConfig) -> Result<(), Error> {
    let bad = |m: &str| Err(Error::ShardingConfig(m.to_owned()));
    if config.lease_duration.as_secs() < 1 {
        return bad("the lease duration must be at least 1 s (Leases count whole seconds)");
    }
    if config.renew_deadline >= config.lease_duration {
        return bad(
            "the renew deadline must be shorter than the lease duration, or a replica could still work after its lease expired",
        );
    }
    if config.retry_period >= config.renew_deadline {
        return bad("the retry period must be shorter than the renew deadline");
    }
    Ok(())
}

/// The sharding settings as `--explain` prints them.
pub(crate) fn explain(
    mode: ShardingMode,
    manager: &str,
    namespace: &str,
    config: &LeaderElectionConfig,
) -> String {
    if !mode.is_on() {
        return "sharding: off (--shards=off)\n".into();
    }
    let mut text = format!(
        "sharding: {mode} (--shards={mode})\n  membership leases: {namespace}/{}-shard-<member>, label {}={}\n  lease duration {:?}, renew deadline {:?}, retry period {:?}\n  assignment: rendezvous hashing of namespace/name over the live members\n",
        member::sanitize(manager),
        member::MANAGER_LABEL,
        member::sanitize(manager),
        config.lease_duration,
        config.renew_deadline,
        config.retry_period,
    );
    if mode == ShardingMode::Label {
        text.push_str(&format!(
            "  shard label: {}=<member>, written by the sharder (the replica holding {namespace}/{}-sharder)\n",
            shard_label(manager),
            member::sanitize(manager),
        ));
    }
    text
}

/// One replica's sharding: its gate and its membership.
pub(crate) struct Sharding {
    gate: Arc<ShardGate>,
    /// Taken when the membership loop starts in a task of its own.
    membership: Option<Membership>,
    /// `label` mode: the election of the replica that labels objects.
    sharder: Option<LeaderElector>,
}

impl Sharding {
    pub(crate) fn new(
        mode: ShardingMode,
        client: Client,
        namespace: &str,
        manager: &str,
        identity: String,
        config: LeaderElectionConfig,
    ) -> Self {
        let me = member::id_of(&identity);
        let label = (mode == ShardingMode::Label).then(|| shard_label(manager));
        let gate = Arc::new(ShardGate::new(me, label));
        let sharder = (mode == ShardingMode::Label).then(|| {
            LeaderElector::new(
                Api::<Lease>::namespaced(client.clone(), namespace),
                format!("{}-sharder", member::sanitize(manager)),
                identity.clone(),
                config,
            )
        });
        let membership = Membership::new(
            Api::<Lease>::namespaced(client, namespace),
            gate.clone(),
            identity,
            member::sanitize(manager),
            config,
        );
        Sharding {
            gate,
            membership: Some(membership),
            sharder,
        }
    }

    pub(crate) fn gate(&self) -> Arc<ShardGate> {
        self.gate.clone()
    }

    pub(crate) fn handle(&self) -> ShardHandle {
        ShardHandle {
            gate: self.gate.clone(),
        }
    }

    /// The sharding metrics.
    pub(crate) fn stats(&self) -> Arc<ShardStats> {
        self.gate.stats.clone()
    }

    pub(crate) async fn join(&mut self) -> Result<(), Error> {
        match self.membership.as_mut() {
            Some(membership) => membership.join().await,
            None => Ok(()),
        }
    }

    /// Holds the membership until `done` and, in `label` mode, runs the
    /// sharder while this replica holds the sharder Lease.
    ///
    /// # Errors
    ///
    /// [`Error::ShardMembership`] or, for the sharder, [`Error::LeaderElection`].
    pub(crate) async fn hold(&mut self, done: &mut watch::Receiver<bool>) -> Result<(), Error> {
        let membership = self.hold_membership(done);
        let Some(mut elector) = self.sharder.take() else {
            return membership.await;
        };
        let mut sharder_done = done.clone();
        let gate = self.gate.clone();
        let sharder = async move {
            if !elector.acquire(&mut sharder_done).await {
                return Ok(());
            }
            tracing::info!(lease = %elector.lease_name(), "this replica is the sharder");
            let labellers = gate.take_labellers();
            let work = futures::future::join_all(labellers.into_iter().map(|l| l(gate.clone())));
            tokio::select! {
                held = elector.hold(&mut sharder_done) => held,
                _ = work => elector.hold(&mut sharder_done).await,
            }
        };
        let (member, sharder) = tokio::join!(membership, sharder);
        member.and(sharder)
    }

    /// Runs the membership loop in a task of its own, so that renewals
    /// keep their cadence however long the controllers' task is busy
    /// between two yields; the task is aborted if this future is dropped
    /// (as the rest of the replica is), so an abandoned manager does not
    /// keep its Lease alive.
    fn hold_membership(
        &mut self,
        done: &watch::Receiver<bool>,
    ) -> impl std::future::Future<Output = Result<(), Error>> + use<> {
        let membership = self.membership.take();
        let mut done = done.clone();
        let task = membership.map(|mut membership| {
            let lease = membership.lease();
            let task = tokio::spawn(async move { membership.hold(&mut done).await });
            (lease, AbortOnDrop(task))
        });
        async move {
            let Some((lease, mut task)) = task else {
                return Ok(());
            };
            (&mut task.0).await.unwrap_or_else(|error| {
                Err(Error::ShardMembership {
                    lease,
                    message: format!("the membership task ended abnormally: {error}"),
                })
            })
        }
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
