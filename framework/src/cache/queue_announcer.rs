//! The watch's end of a queue: announcing objects as the cache's watch
//! delivers them, and filling the first list's objects once it is in.

use std::sync::Arc;

use kube::{Resource, ResourceExt};

use super::{Announcer, Lane};

impl<K: Resource + 'static> Announcer<K> {
    /// Whether the subscriber has a predicate, which judges each object
    /// against the copy it replaced.
    pub(crate) fn judges(&self) -> bool {
        self.predicate.is_some()
    }

    /// Announces `object` (which replaced `old` in the cache) in `lane`,
    /// replacing a copy of it still waiting (and moving it to the changed
    /// lane if that is `lane`); an object the predicate refuses is not
    /// queued (but a copy already waiting is refreshed). `false` once the
    /// controller has stopped.
    pub(crate) fn announce(&self, old: Option<&K>, object: Arc<K>, lane: Lane) -> bool {
        let passes = self
            .predicate
            .as_ref()
            .is_none_or(|p| p.passes(old, object.as_ref()));
        let mut state = self.shared.lock();
        if state.closed {
            return false;
        }
        let key = (object.namespace(), object.name_any());
        let object = match &self.shared.lazy {
            None => Some(object),
            // A change's copy, while the queue keeps few.
            Some(lazy) if lane == Lane::Changed && state.kept < lazy.keep => Some(object),
            Some(_) => None,
        };
        state.offer(key, object, lane, passes);
        true
    }

    /// Announces `object`, delivered by the cache's first list, in the
    /// listed lane without keeping it: the store holds its own copy once
    /// the list is in, and [`fill`](Self::fill) puts that one in the queue.
    /// Until then the queue hands out nothing. `false` once the controller
    /// has stopped.
    pub(crate) fn announce_first_listed(&self, object: &K) -> bool {
        let passes = self
            .predicate
            .as_ref()
            .is_none_or(|p| p.passes(None, object));
        let mut state = self.shared.lock();
        if state.closed {
            return false;
        }
        state.unfilled = true;
        let key = (object.namespace(), object.name_any());
        let state = &mut *state;
        match state.waiting.get_mut(&key) {
            Some(waiting) => super::put(&mut state.kept, &mut waiting.object, None),
            None if passes => state.push(key, None, Lane::Listed),
            None => {}
        }
        true
    }

    /// The first list is in: each object it queued gets the copy
    /// `stored` returns for its namespace and name (the store's), and one
    /// the store no longer holds leaves the queue. The queue hands out
    /// again.
    pub(crate) fn fill(&self, stored: impl Fn(Option<&str>, &str) -> Option<Arc<K>>) {
        let mut state = self.shared.lock();
        if !state.unfilled {
            return;
        }
        if self.shared.lazy.is_some() {
            // Keys: an object the cache no longer holds is skipped when
            // its turn comes.
            state.unfilled = false;
            state.wake();
            return;
        }
        let mut gone = 0;
        let mut filled = 0;
        state.waiting.retain(|(namespace, name), waiting| {
            if waiting.object.is_none() {
                waiting.object = stored(namespace.as_deref(), name);
                filled += usize::from(waiting.object.is_some());
            }
            let keep = waiting.object.is_some();
            if !keep && waiting.lane == Lane::Listed {
                gone += 1;
            }
            keep
        });
        state.listed_len -= gone;
        state.kept += filled;
        state.unfilled = false;
        state.wake();
    }

    /// How many objects wait to be taken (parked ones included).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        let state = self.shared.lock();
        state.waiting.len() + state.parked.len()
    }
}
