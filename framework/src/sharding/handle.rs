//! A read-only view of one replica's place in the ring.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::gate::ShardGate;

/// What one replica of a sharded manager knows about the ring: its member
/// id, the live members, and which objects it owns. Get it from
/// [`Manager::sharding`](crate::Manager::sharding).
#[derive(Clone, Debug)]
pub struct ShardHandle {
    pub(crate) gate: Arc<ShardGate>,
}

impl ShardHandle {
    /// This replica's member id (the suffix of its Lease name, and its
    /// label value in `label` mode).
    pub fn member(&self) -> &str {
        self.gate.me()
    }

    /// The live members this replica last observed, itself included, sorted.
    pub fn members(&self) -> Vec<String> {
        self.gate.target().members().to_vec()
    }

    /// Whether this replica owns the object `namespace/name` in the view it
    /// acknowledged (for a cluster-scoped object, `namespace` is empty).
    ///
    /// In `selector` mode ownership follows the server's hash of the
    /// object's uid: an object this replica does not cache is not its own.
    pub fn owns(&self, namespace: &str, name: &str) -> bool {
        let key = format!("{namespace}/{name}");
        if self.gate.placement.get().is_none() {
            return self.gate.owns(&key);
        }
        self.gate.resolve(&key).is_some_and(|k| self.gate.owns(&k))
    }

    /// Whether this replica owns the object of this uid (`selector` mode:
    /// by the hash the API server ranges over; the other modes by name).
    pub fn owns_object(&self, namespace: &str, name: &str, uid: &str) -> bool {
        self.gate.owns(&self.gate.key_of(namespace, name, uid))
    }

    /// How this replica's objects are placed: `hash`, `label` or
    /// `selector` (once chosen at start, in `auto` mode).
    pub fn mode(&self) -> String {
        self.gate.stats.mode().to_owned()
    }

    /// Whether every live member has acknowledged the view this replica
    /// observes, and this replica has too: no handover is under way.
    pub fn settled(&self) -> bool {
        !self.gate.behind() && self.gate.settled()
    }

    /// How many views this replica has acknowledged.
    pub fn ring_version(&self) -> u64 {
        self.gate.stats.ring_version.load(Relaxed)
    }

    /// Objects in this replica's caches that it owns (refreshed every
    /// retry period).
    pub fn keys_owned(&self) -> u64 {
        self.gate.stats.keys_owned.load(Relaxed)
    }

    /// Objects in this replica's caches (in `label` mode, its shard only).
    pub fn keys_cached(&self) -> usize {
        self.gate.known_keys().len()
    }

    /// The Leases of this ring's name, live as last observed, whose
    /// configuration (ring version, `--shards` mode, manager or watched
    /// scope) differs from this replica's while their scope overlaps it.
    /// This replica shares no ring with them and, while there is one,
    /// reconciles nothing: either could own any object.
    pub fn refused_members(&self) -> Vec<String> {
        self.gate.refused()
    }

    /// The label key that carries each object's owner in `label` mode
    /// (`shard.concord.dev/<ring>`), once this replica has joined its ring.
    pub fn label_key(&self) -> Option<String> {
        self.gate.label.get().cloned()
    }

    /// In `selector` mode, the `shardSelector` this replica's caches watch
    /// with now (the buckets of the hash space it owns, or is handing
    /// over); `None` in the other modes.
    pub fn shard_selector(&self) -> Option<String> {
        self.gate.placement.get()?;
        self.gate.selectors.get()?.current()
    }

    /// Objects that moved to or from this replica so far.
    pub fn moves(&self) -> u64 {
        self.gate.stats.moves.load(Relaxed)
    }

    /// In `selector` mode, how many times this replica's shard selector
    /// has changed, each restarting its sharded watches with a list of
    /// its new shard (`concord_shard_selector_changes_total`).
    pub fn selector_changes(&self) -> u64 {
        self.gate.stats.selector_changes.load(Relaxed)
    }
}
