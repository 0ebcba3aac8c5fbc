//! `selector` mode's part of the gate: gate keys that carry the API
//! server's hash, the shard selector the caches watch with, and lookups
//! of a cached object's key by name.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use super::super::ranges::{self, ShardKey};
use super::super::ring::View;
use super::super::selectors::Selectors;
use super::{Resolver, ShardGate};

impl ShardGate {
    /// `selector` mode: keys carry the server's hash of `key`'s field, and
    /// the caches watch the ranges this replica owns through `selectors`,
    /// keeping buckets it no longer needs until the ring has stood still
    /// for `keep`.
    pub(crate) fn set_ranges(&self, key: ShardKey, selectors: Arc<Selectors>, keep: Duration) {
        let _ = self.placement.set(key);
        let _ = self.selectors.set(selectors);
        let _ = self.keep.set(keep);
    }

    /// The gate key of an object: `namespace/name`, and in `selector` mode
    /// `/` and the server's hash of the placement field after it.
    pub(crate) fn key_of(&self, namespace: &str, name: &str, uid: &str) -> String {
        match self.placement.get() {
            Some(key) => key.key(namespace, name, uid),
            None => format!("{namespace}/{name}"),
        }
    }

    /// `selector` mode: publishes the ranges the caches watch. They hold
    /// every bucket this replica owns in the observed view, in a view it
    /// may have acknowledged, or in the observed view without the
    /// suspected members, so a new owner's cache fills before it may start
    /// (before a crashed member's Lease expires, too) and an old owner's
    /// keeps the objects it drains until it acknowledged their loss.
    ///
    /// A new selector restarts the sharded watches, and their list
    /// replaces the caches. Buckets are added at once, and so are many
    /// buckets no longer needed dropped (more than a quarter of those
    /// needed: at start, or when a member joins). A few (those a crash or
    /// a leave makes the survivors trade to stay within one bucket of
    /// even) are dropped only once every peer acknowledged the view and
    /// the ring has stood still for the `keep` given at start (the lease
    /// duration), so the moments a handover's moved objects are
    /// reconciled never pay for a relist of the whole shard only to cache
    /// a bucket or two less.
    pub(super) fn publish_ranges(&self) {
        let (Some(key), Some(selectors)) = (self.placement.get(), self.selectors.get()) else {
            return;
        };
        let keep = self.keep.get().copied().unwrap_or_default();
        let mut state = self.lock();
        let mut views: Vec<&View> = vec![&state.target];
        views.extend(state.claims.iter());
        // The view once the suspects' Leases have expired: fetched ahead.
        let without_suspects = (!state.suspects.is_empty()).then(|| {
            View::new(
                state
                    .target
                    .members()
                    .iter()
                    .filter(|m| !state.suspects.contains(m))
                    .cloned(),
            )
        });
        views.extend(without_suspects.as_ref());
        let wanted = super::super::ring::buckets_of(&self.me, &views);
        let still = !state.behind() && state.settled() && state.moved_at.elapsed() >= keep;
        // Many buckets no longer needed (at start, or when a member
        // joins) are dropped at once: keeping them costs memory, and the
        // relist is the one the new ranges cost anyway.
        let next = match state.watched {
            Some(watched) if wanted != 0 && !still => {
                let many = (watched & !wanted).count_ones() * 4 > wanted.count_ones();
                if many { wanted } else { wanted | watched }
            }
            _ => wanted,
        };
        if state.watched == Some(next) {
            return;
        }
        state.watched = Some(next);
        drop(state);
        // Owning no bucket yet (not joined): the first bucket, which
        // caches a few objects more and changes nothing about who
        // reconciles them (and is not kept once buckets are owned).
        let next = if next == 0 { 1 } else { next };
        let owned = ranges::ranges_of_buckets(next);
        if let Some(selector) = ranges::selector(*key, &owned)
            && selectors.publish(&selector)
        {
            self.stats.selector_changes.fetch_add(1, Relaxed);
            tracing::debug!(
                ranges = owned.len(),
                "shard selector changed; restarting the sharded watches"
            );
        }
    }

    /// Whether this replica's caches watch ranges (`selector` mode), so
    /// a suspected member's objects can be fetched ahead of its expiry.
    pub(crate) fn fetches_ahead(&self) -> bool {
        self.placement.get().is_some() && self.selectors.get().is_some()
    }

    /// Registers how one controller's store resolves `namespace/name`.
    pub(crate) fn add_resolver(&self, resolver: Resolver) {
        self.resolvers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(resolver);
    }

    /// The gate key of a cached `namespace/name` (`selector` mode).
    pub(crate) fn resolve(&self, key: &str) -> Option<String> {
        let resolvers = self
            .resolvers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        resolvers.iter().find_map(|resolve| resolve(key))
    }
}
