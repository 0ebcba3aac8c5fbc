//! Membership: one Lease per replica, renewed like the leader-election
//! Lease, carrying the view the replica acknowledged; and the loop that
//! renews it, reads everyone else's, and acknowledges new views once the
//! keys they take away are drained.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::core::ObjectMeta;
use tokio::sync::watch;

use super::config::RingConfig;
use super::gate::{Peer, ShardGate};
use super::names::{ACKED_ANNOTATION, CONFIG_ANNOTATION, MEMBER_LABEL, RING_LABEL, lease_name};
use super::ring::View;
use super::sightings::Sightings;
use crate::task::AbortOnDrop;
use crate::{Error, leader::LeaderElectionConfig};

mod kinship;
use kinship::{Kinship, kinship};

/// One replica's membership in the ring of a sharded manager.
pub(crate) struct Membership {
    api: Api<Lease>,
    gate: Arc<ShardGate>,
    identity: String,
    ring: RingConfig,
    lease_name: String,
    /// Leases of another configuration already reported, so each is
    /// logged once.
    reported: HashSet<String>,
    config: LeaderElectionConfig,
    /// Other Leases: resourceVersion last seen and since when (own clock).
    seen: HashMap<String, (String, Instant)>,
    ours: Option<Lease>,
    renewed: Instant,
    written: Instant,
    behind_since: Option<Instant>,
    /// When the first live peer's Lease can next be found expired (or,
    /// in `selector` mode, past its renew deadline: suspected).
    next_expiry: Option<Instant>,
    /// When the owned-keys gauge was last counted.
    accounted: Option<Instant>,
    /// The watch of the Leases (from `join`), and the guard that stops it.
    sightings: Option<(Arc<Sightings>, AbortOnDrop<()>)>,
}

impl Membership {
    pub(crate) fn new(
        api: Api<Lease>,
        gate: Arc<ShardGate>,
        identity: String,
        ring: RingConfig,
        config: LeaderElectionConfig,
    ) -> Self {
        let lease_name = lease_name(&ring.lease_prefix(), gate.me());
        Membership {
            api,
            gate,
            identity,
            ring,
            lease_name,
            reported: HashSet::new(),
            config,
            seen: HashMap::new(),
            ours: None,
            renewed: Instant::now(),
            written: Instant::now(),
            behind_since: None,
            next_expiry: None,
            accounted: None,
            sightings: None,
        }
    }

    /// `namespace/name` of this replica's Lease.
    pub(crate) fn lease(&self) -> String {
        format!(
            "{}/{}",
            self.api.namespace().unwrap_or("default"),
            self.lease_name
        )
    }

    fn lost(&self, message: &str) -> Error {
        Error::ShardMembership {
            lease: self.lease(),
            message: message.into(),
        }
    }

    /// Creates this replica's Lease, claiming nothing, and reads the others.
    ///
    /// # Errors
    ///
    /// [`Error::ShardMembership`] when the Lease cannot be created.
    pub(crate) async fn join(&mut self) -> Result<(), Error> {
        let sent = Instant::now();
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.lease_name.clone()),
                labels: Some(BTreeMap::from([
                    (RING_LABEL.to_owned(), self.ring.ring_id()),
                    (MEMBER_LABEL.to_owned(), self.gate.me().to_owned()),
                ])),
                annotations: Some(BTreeMap::from([
                    (ACKED_ANNOTATION.to_owned(), String::new()),
                    (CONFIG_ANNOTATION.to_owned(), self.ring.annotation()),
                ])),
                ..Default::default()
            },
            spec: Some(self.spec()),
        };
        let created = self
            .api
            .create(&PostParams::default(), &lease)
            .await
            .map_err(|e| self.lost(&format!("creating the membership lease failed: {e}")))?;
        self.ours = Some(created);
        self.sightings = Some(Sightings::watch(self.api.clone(), self.lease_name.clone()));
        self.renewed = sent;
        self.written = sent;
        self.gate.claimed(&View::default());
        self.gate.set_fence(sent + self.config.renew_deadline);
        // A replica that cannot read the ring would own nothing forever:
        // refuse to start instead, and take the Lease back.
        if let Err(error) = self.read().await {
            self.leave().await;
            return Err(self.lost(&format!(
                "listing the membership leases failed: {error}; a sharded replica needs list and \
                 watch on leases besides create, get, update and delete (Permissions::sharding)"
            )));
        }
        tracing::info!(
            lease = %self.lease(),
            member = self.gate.me(),
            ring = %self.ring.ring,
            scope = ?self.ring.scope,
            "joined the shard ring"
        );
        Ok(())
    }

    /// Renews the Lease and acknowledges views until `done` (the
    /// controllers have stopped; the Lease is then deleted so the others
    /// take over at once) or until renewal fails for the renew deadline.
    ///
    /// # Errors
    ///
    /// [`Error::ShardMembership`] when the Lease could not be renewed in time;
    /// no reconcile runs past that point.
    pub(crate) async fn hold(&mut self, done: &mut watch::Receiver<bool>) -> Result<(), Error> {
        let fast = self.config.retry_period / 5;
        loop {
            let previous = self.gate.acked();
            let claim = self.gate.next_claim();
            let changed = previous.as_ref() != Some(&claim);
            if changed || self.written.elapsed() >= self.config.retry_period {
                self.write(previous, claim, changed).await;
            }
            if self.renewed.elapsed() > self.config.renew_deadline {
                self.gate.set_fence(Instant::now());
                return Err(self.lost("the lease could not be renewed within the renew deadline"));
            }
            let moved = match self.read().await {
                Ok(moved) => moved,
                Err(error) => {
                    tracing::warn!(%error, lease = %self.lease(), "listing membership leases failed");
                    false
                }
            };
            self.account();
            // A new view with nothing to drain: acknowledge it at once rather
            // than a pause later (at most once per change of the view, so a
            // failing write cannot spin).
            if moved && !self.gate.draining() {
                continue;
            }
            // Poll faster while a handover is under way, so moved keys start
            // soon; and read again the moment a peer's Lease may expire.
            let mut pause = if self.gate.behind() || !self.gate.settled() {
                fast
            } else {
                self.config.retry_period
            };
            if let Some(expiry) = self.next_expiry {
                pause = pause.min(expiry.saturating_duration_since(Instant::now()));
            }
            // And at once when a peer joins, leaves or acknowledges a view.
            let sightings = self.sightings.as_ref().map(|(s, _)| s.clone());
            let stop = tokio::select! {
                _ = tokio::time::sleep(pause) => false,
                () = watched_change(sightings.as_deref()) => false,
                _ = self.gate.reconcile_ended(), if self.gate.draining() => false,
                () = stopped(done) => true,
            };
            if stop {
                self.leave().await;
                return Ok(());
            }
        }
    }

    async fn write(&mut self, previous: Option<View>, claim: View, changed: bool) {
        let Some(mut lease) = self.ours.clone() else {
            return;
        };
        let sent = Instant::now();
        lease.spec = Some(self.spec());
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(ACKED_ANNOTATION.to_owned(), claim.to_string());
        match self
            .api
            .replace(&self.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(stored) => {
                self.ours = Some(stored);
                self.renewed = sent;
                self.written = sent;
                self.gate.set_fence(sent + self.config.renew_deadline);
                self.gate.claimed(&claim);
                if changed {
                    self.acknowledged(previous.as_ref(), &claim);
                }
            }
            Err(error) => {
                tracing::warn!(%error, lease = %self.lease(), "renewing the membership lease failed");
                if let Ok(fresh) = self.api.get(&self.lease_name).await {
                    let ours = fresh
                        .spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.as_deref())
                        == Some(self.identity.as_str());
                    if ours {
                        self.ours = Some(fresh);
                    }
                }
            }
        }
    }

    fn acknowledged(&mut self, previous: Option<&View>, claim: &View) {
        let stats = &self.gate.stats;
        stats.ring_version.fetch_add(1, Relaxed);
        if let Some(since) = self.behind_since.take() {
            let micros = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
            stats.drain_micros_last.store(micros, Relaxed);
            stats.drain_micros_total.fetch_add(micros, Relaxed);
            stats.drains.fetch_add(1, Relaxed);
        }
        let me = self.gate.me();
        let moved = match previous {
            Some(before) => self
                .gate
                .known_keys()
                .iter()
                .filter(|k| before.owns(me, k) != claim.owns(me, k))
                .count(),
            None => 0,
        };
        stats.moves.fetch_add(moved as u64, Relaxed);
        tracing::info!(
            lease = %self.lease(),
            view = %claim.fingerprint(),
            members = claim.members().len(),
            moved,
            "acknowledged a new shard view"
        );
        self.gate.wake();
    }

    /// Reads every membership Lease in the namespace (a consistent read,
    /// after our own write) and tells the gate who of our configuration is
    /// live and what each acknowledged, and which live Leases of another
    /// configuration share our ring's name and scope. Whether the live
    /// members differ from the last read.
    async fn read(&mut self) -> Result<bool, kube::Error> {
        let params = ListParams::default().labels(MEMBER_LABEL);
        let list = self.api.list(&params).await?;
        let me = self.gate.me().to_owned();
        let own = self.lease();
        let mut live = vec![me.clone()];
        let mut peers = Vec::new();
        let mut names = Vec::new();
        let mut refused = Vec::new();
        let mut suspects = Vec::new();
        self.next_expiry = None;
        for lease in &list.items {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            let Some(id) = lease
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MEMBER_LABEL))
            else {
                continue;
            };
            let kin = match kinship(&self.ring, &mut self.reported, &own, lease) {
                Kinship::Unrelated => continue,
                Kinship::Member if *id == me => continue,
                kin => kin,
            };
            names.push(name.clone());
            let version = lease.metadata.resource_version.clone().unwrap_or_default();
            // First seen by the watch, or by this LIST: whichever came first.
            let sighted = self
                .sightings
                .as_ref()
                .and_then(|(s, _)| s.first_seen(&name, &version));
            let first = sighted.unwrap_or_else(Instant::now);
            let entry = self
                .seen
                .entry(name.clone())
                .or_insert_with(|| (version.clone(), first));
            if entry.0 != version {
                *entry = (version.clone(), first);
            } else {
                entry.1 = entry.1.min(first);
            }
            let spec = lease.spec.clone().unwrap_or_default();
            let duration = Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(15).max(1)).unwrap_or(15),
            );
            let held = spec.holder_identity.is_some_and(|h| !h.is_empty());
            let unchanged = entry.1.elapsed();
            if held && unchanged <= duration {
                // Expired once unchanged for longer than its duration: the
                // first instant a read can find it so.
                let expiry = entry.1 + duration + Duration::from_millis(1);
                match kin {
                    Kinship::Member => {}
                    Kinship::Overlapping => {
                        refused.push(name.clone());
                    }
                    Kinship::Disjoint | Kinship::Unrelated => continue,
                }
                self.next_expiry = Some(self.next_expiry.map_or(expiry, |e| e.min(expiry)));
                if kin == Kinship::Overlapping {
                    continue;
                }
                // Unrenewed past the renew deadline, a member has stopped
                // reconciling (it fences itself there) and its Lease will
                // expire: `selector` mode fetches what it would gain now
                // (read again at that instant to find it so).
                if self.gate.fetches_ahead() {
                    if unchanged > self.config.renew_deadline {
                        suspects.push(id.clone());
                    } else {
                        let at = entry.1 + self.config.renew_deadline + Duration::from_millis(1);
                        self.next_expiry = Some(self.next_expiry.map_or(at, |e| e.min(at)));
                    }
                }
                live.push(id.clone());
                let acked = lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ACKED_ANNOTATION))
                    .map(|a| View::parse(a))
                    .unwrap_or_default();
                peers.push(Peer {
                    id: id.clone(),
                    acked,
                });
            } else if unchanged > duration * 2 {
                self.collect(&name, &version).await;
            }
        }
        self.seen.retain(|name, _| names.contains(name));
        self.reported.retain(|name| names.contains(name));
        self.gate
            .stats
            .refused_members
            .store(refused.len() as u64, Relaxed);
        peers.sort_by(|a, b| a.id.cmp(&b.id));
        let target = View::new(live);
        let moved = self.gate.target() != target;
        if self.gate.acked().as_ref() == Some(&target) {
            self.behind_since = None;
        } else {
            self.behind_since.get_or_insert_with(Instant::now);
        }
        self.gate
            .stats
            .members
            .store(target.members().len() as u64, Relaxed);
        self.gate.observed(target, peers, refused, suspects);
        Ok(moved)
    }

    /// Deletes the Lease of a member long expired, unless it was renewed.
    async fn collect(&self, name: &str, version: &str) {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(version.to_owned()),
                uid: None,
            }),
            ..Default::default()
        };
        match self.api.delete(name, &params).await {
            Ok(_) => tracing::info!(lease = name, "removed the lease of a member that expired"),
            Err(error) => tracing::debug!(%error, lease = name, "removing an expired lease failed"),
        }
    }

    /// Counts the keys this replica owns, for the gauge: once per retry
    /// period at most, and not while a handover is under way. Counting
    /// lists the key of every cached object (in `selector` mode, each
    /// uid read from its JSON): tens of milliseconds on a worker thread at
    /// 10,000 objects, which the fast polls of a handover would spend
    /// every tenth of a second while the moved keys wait to start.
    fn account(&mut self) {
        let due = self
            .accounted
            .is_none_or(|at| at.elapsed() >= self.config.retry_period);
        if !due || self.gate.behind() || !self.gate.settled() {
            return;
        }
        self.accounted = Some(Instant::now());
        let Some(acked) = self.gate.acked() else {
            return;
        };
        let me = self.gate.me();
        let owned = self
            .gate
            .known_keys()
            .iter()
            .filter(|k| acked.owns(me, k))
            .count();
        self.gate.stats.keys_owned.store(owned as u64, Relaxed);
    }

    async fn leave(&mut self) {
        self.gate.set_fence(Instant::now());
        match self
            .api
            .delete(&self.lease_name, &DeleteParams::default())
            .await
        {
            Ok(_) => tracing::info!(lease = %self.lease(), "left the shard ring"),
            Err(error) => {
                tracing::warn!(%error, lease = %self.lease(), "deleting the membership lease failed; it will expire")
            }
        }
    }

    fn spec(&self) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(15),
            ),
            acquire_time: self
                .ours
                .as_ref()
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.acquire_time.clone())
                .or_else(|| Some(now.clone())),
            renew_time: Some(now),
            ..Default::default()
        }
    }
}

/// Resolves at the watch's next change worth a read; never without a watch.
async fn watched_change(sightings: Option<&Sightings>) {
    match sightings {
        Some(sightings) => sightings.changed().await,
        None => std::future::pending().await,
    }
}

/// Resolves once `done` is true (or its sender is gone).
async fn stopped(done: &mut watch::Receiver<bool>) {
    let _ = done.wait_for(|done| *done).await;
}
