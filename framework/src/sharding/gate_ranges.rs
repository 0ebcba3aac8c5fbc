//! `selector` mode's part of the gate: gate keys that carry the API
//! server's hash, the shard selector the caches watch with, and lookups
//! of a cached object's key by name.

use std::sync::{Arc, PoisonError};

use super::super::ranges::{self, ShardKey};
use super::super::ring::{MemberId, View};
use super::super::selectors::Selectors;
use super::{Resolver, ShardGate};

impl ShardGate {
    /// `selector` mode: keys carry the server's hash of `key`'s field, and
    /// the caches watch the ranges this replica owns through `selectors`.
    pub(crate) fn set_ranges(&self, key: ShardKey, selectors: Arc<Selectors>) {
        let _ = self.placement.set(key);
        let _ = self.selectors.set(selectors);
    }

    /// The gate key of an object: `namespace/name`, and in `selector` mode
    /// `/` and the server's hash of the placement field after it.
    pub(crate) fn key_of(&self, namespace: &str, name: &str, uid: &str) -> String {
        match self.placement.get() {
            Some(key) => key.key(namespace, name, uid),
            None => format!("{namespace}/{name}"),
        }
    }

    /// `selector` mode: publishes the ranges of every bucket this replica
    /// owns in the observed view, in a view it may have acknowledged, or in
    /// the observed view without the suspected members, so a new owner's
    /// cache fills before it may start (before a crashed member's Lease
    /// expires, too) and an old owner's keeps the objects it drains until
    /// it acknowledged their loss.
    pub(super) fn publish_ranges(&self) {
        let (Some(key), Some(selectors)) = (self.placement.get(), self.selectors.get()) else {
            return;
        };
        let state = self.lock();
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
        let owned = ranges::ranges_of(&self.me, &views);
        drop(state);
        // Owning no bucket yet (not joined): the first bucket, which
        // caches a few objects more and changes nothing about who
        // reconciles them.
        let owned = if owned.is_empty() {
            vec![(0, 1u128 << (64 - ranges::BUCKETS.trailing_zeros()))]
        } else {
            owned
        };
        if let Some(selector) = ranges::selector(*key, &owned)
            && selectors.publish(&selector)
        {
            tracing::debug!(
                ranges = owned.len(),
                "shard selector changed; restarting the sharded watches"
            );
        }
    }

    /// Records the live members suspected gone: their Leases went
    /// unrenewed past the renew deadline. Nothing about who may reconcile
    /// changes (a suspect's keys move only once its Lease has expired);
    /// `selector` mode widens the caches' ranges to what this replica would
    /// own without the suspects, so their objects are listed before the
    /// handover rather than in it. Nothing at all in the other modes.
    pub(crate) fn suspected(&self, mut suspects: Vec<MemberId>) {
        if !self.fetches_ahead() {
            return;
        }
        suspects.sort();
        let mut state = self.lock();
        if state.suspects == suspects {
            return;
        }
        if !suspects.is_empty() {
            tracing::info!(
                ?suspects,
                "membership leases unrenewed past the renew deadline; caching what their expiry would move here"
            );
        }
        state.suspects = suspects;
        drop(state);
        self.publish_ranges();
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
