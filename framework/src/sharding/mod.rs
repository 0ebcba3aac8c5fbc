//! Scaling out: one manager's objects divided among its replicas.
//!
//! Each replica holds a membership Lease of its deployment's ring
//! (`config.rs`: the ring name, manager, mode and watched scope); every
//! object key maps to one live
//! member by rendezvous hashing (`ring.rs`); a key moves from one replica to
//! another only after the old owner drained it and acknowledged the new
//! view in its Lease (`gate.rs`, `member.rs`). The book chapter *Scaling out*
//! describes the protocol and its failure cases.
//!
//! An operator turns it on with `--shards` ([`ShardingMode`]) and
//! `--shard-by` ([`ShardKey`]), and asks what its replica owns through
//! [`ShardHandle`].

mod config;
mod deadline;
mod gate;
mod handle;
pub(crate) mod hooks;
mod member;
mod mode;
mod names;
mod probe;
mod ranges;
mod ring;
mod selectors;
mod sharder;
mod sightings;
mod stats;

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::core::ApiResource;
use tokio::sync::watch;

pub(crate) use deadline::{with_write_deadline, write_deadline};
pub use handle::ShardHandle;
pub use mode::ShardingMode;
#[doc(inline)]
pub use ranges::ShardKey;
pub(crate) use selectors::{MARKER as SELECTOR_MARKER, Selectors, with_shard_selectors};
pub(crate) use stats::ShardStats;

use crate::leader::LeaderElector;
use crate::{Error, leader::LeaderElectionConfig};
use config::RingConfig;
use gate::ShardGate;
use member::Membership;

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
    ring: &str,
    namespace: &str,
    config: &LeaderElectionConfig,
) -> String {
    if !mode.is_on() {
        return "sharding: off (--shards=off)\n".into();
    }
    let ring = RingConfig::new(ring, manager, mode);
    let mut text = format!(
        "sharding: {mode} (--shards={mode})\n  ring: {} (--shard-ring, else --leader-election-id), one per configuration: ring version {}, mode, manager and the scope the controllers watch\n  membership leases: {namespace}/{}-<configuration fingerprint>-<member>, label {}={}\n  lease duration {:?}, renew deadline {:?}, retry period {:?}\n  assignment: rendezvous hashing of namespace/name over the live members of the same configuration\n",
        ring.ring,
        config::RING_VERSION,
        ring.ring_id(),
        names::RING_LABEL,
        ring.ring_id(),
        config.lease_duration,
        config.renew_deadline,
        config.retry_period,
    );
    if mode.may_select() {
        text.push_str(
            "  shard selector: the API server's shardSelector (KEP-5866) over the buckets of the hash space each replica owns; no object is written\n",
        );
    }
    if mode == ShardingMode::Auto {
        text.push_str(
            "  mode chosen at start: selector where a list with shardSelector comes back filtered, else label\n",
        );
    }
    if matches!(mode, ShardingMode::Label | ShardingMode::Auto) {
        text.push_str(&format!(
            "  shard label: {}=<member>, written by the sharder (the replica holding {namespace}/{}-<configuration fingerprint>-sharder)\n",
            ring.label_key(),
            ring.ring_id(),
        ));
    }
    text
}

/// One replica's sharding: its gate and its membership.
pub(crate) struct Sharding {
    gate: Arc<ShardGate>,
    mode: ShardingMode,
    leases: Api<Lease>,
    identity: String,
    timings: LeaderElectionConfig,
    /// The ring's configuration; its scope grows with every controller
    /// added, until the replica joins.
    ring: RingConfig,
    /// Created at [`join`](Self::join); taken when the membership loop
    /// starts in a task of its own.
    membership: Option<Membership>,
    /// `label` mode: the election of the replica that labels objects.
    sharder: Option<LeaderElector>,
    /// `selector` mode: what the server hashes (`--shard-by`).
    key: ShardKey,
    /// `selector` or `auto` mode: where the caches' selectors are published
    /// for the manager's client (see [`selectors`]).
    selectors: Option<Arc<Selectors>>,
    /// The collection paths the controllers watch, asked at start whether
    /// the server serves shard selectors on them.
    paths: Vec<String>,
    /// `--shards=auto` or `selector`: the server was asked.
    probed: bool,
}

impl Sharding {
    /// Sharding for a replica of `manager` in the ring named `ring`, its
    /// membership Leases in `namespace`; in `selector` or `auto` mode, its
    /// caches' selectors published to `selectors`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        mode: ShardingMode,
        key: ShardKey,
        client: Client,
        namespace: &str,
        manager: &str,
        ring: &str,
        identity: String,
        timings: LeaderElectionConfig,
        selectors: Option<Arc<Selectors>>,
    ) -> Self {
        let me = names::id_of(&identity);
        Sharding {
            gate: Arc::new(ShardGate::new(me)),
            mode,
            leases: Api::<Lease>::namespaced(client, namespace),
            identity,
            timings,
            ring: RingConfig::new(ring, manager, mode),
            membership: None,
            sharder: None,
            key,
            selectors,
            paths: Vec::new(),
            probed: mode.may_select(),
        }
    }

    /// Adds what one controller watches (`resource` in `namespace`, listed
    /// at `path`) to the ring's scope.
    pub(crate) fn watch(&mut self, resource: &ApiResource, namespace: Option<&str>, path: &str) {
        self.ring.watch(resource, namespace);
        if !self.paths.iter().any(|p| p == path) {
            self.paths.push(path.to_owned());
        }
    }

    /// Settles the mode (`auto`: asks the server) and says which, once, in
    /// the log and the `concord_shard_mode` metric.
    ///
    /// # Errors
    ///
    /// [`Error::ShardingConfig`] naming `--shards` or `--shard-by` when the
    /// server cannot serve what they ask.
    async fn choose(&mut self) -> Result<(), Error> {
        let client = self.leases.clone().into_client();
        // With no controller yet, the Leases' own collection answers.
        let paths = if self.paths.is_empty() {
            vec![self.leases.resource_url().to_owned()]
        } else {
            self.paths.clone()
        };
        let chosen = probe::choose(&client, self.mode, self.key, &paths).await?;
        self.mode = chosen.mode;
        self.ring.mode = ring_mode(chosen.mode, self.key);
        self.gate.stats.set_mode(chosen.mode.as_str());
        tracing::info!(mode = %chosen.mode, reason = %chosen.reason, "shard placement: {}", chosen.mode);
        if chosen.mode == ShardingMode::Selector
            && let Some(selectors) = &self.selectors
        {
            self.gate
                .set_ranges(self.key, selectors.clone(), self.timings.lease_duration);
        }
        Ok(())
    }

    /// The mode settled at start (`auto` until then).
    pub(crate) fn mode(&self) -> ShardingMode {
        self.mode
    }

    /// Whether the mode was asked of the server (`--shards=auto` or
    /// `selector`), rather than set by the flag alone.
    pub(crate) fn probed(&self) -> bool {
        self.probed
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

    /// Joins the ring of the configuration the controllers added so far
    /// make: creates this replica's Lease and reads the others.
    ///
    /// # Errors
    ///
    /// [`Error::ShardMembership`] when the Lease cannot be created.
    pub(crate) async fn join(&mut self) -> Result<(), Error> {
        self.choose().await?;
        if self.mode == ShardingMode::Label {
            self.gate.set_label(self.ring.label_key());
            self.sharder = Some(LeaderElector::new(
                self.leases.clone(),
                self.ring.sharder_lease(),
                self.identity.clone(),
                self.timings,
            ));
        }
        let mut membership = Membership::new(
            self.leases.clone(),
            self.gate.clone(),
            self.identity.clone(),
            self.ring.clone(),
            self.timings,
        );
        membership.join().await?;
        self.membership = Some(membership);
        Ok(())
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
        // A lost membership ends the replica at once, sharder or not: the
        // fence has stopped its reconciles, and nothing may outlive it.
        tokio::pin!(membership, sharder);
        tokio::select! {
            member = &mut membership => match member {
                Err(error) => Err(error),
                Ok(()) => sharder.await,
            },
            held = &mut sharder => membership.await.and(held),
        }
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
            (lease, crate::task::AbortOnDrop(task))
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

/// The mode a ring's configuration records: `selector` rings by namespace
/// and by uid are different rings.
fn ring_mode(mode: ShardingMode, key: ShardKey) -> String {
    match (mode, key) {
        (ShardingMode::Selector, ShardKey::Namespace) => "selector/namespace".into(),
        _ => mode.as_str().into(),
    }
}
