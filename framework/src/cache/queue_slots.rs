//! The controller's reports to its queue: an object handed out starts,
//! is done, or was missing from the controller's store.

use std::sync::Arc;

use kube::Resource;

use super::{Lane, Slots, Turn};
use crate::cache::key::{key, lookup};

impl<K: Resource> Slots<K> {
    /// The controller is starting the reconcile of `object`: whether it
    /// should run. `false` for a listed object the queue handed out when
    /// a changed object is now first in line (waiting, or handed out and
    /// not started) and the listed lane has not aged: the controller skips
    /// its reconcile, and when that is [`done`](Self::done) the object is
    /// queued again at the front of its lane, so handing out ahead never
    /// puts a listed object before a changed one. An object gives way once
    /// only: its next turn runs ([`Turn::Again`]). `true` for an object the
    /// queue did not hand out (a requeue the controller scheduled itself).
    pub(crate) fn start(&self, object: &Arc<K>) -> bool {
        let meta = object.meta();
        // As `ResourceExt::name_any`, borrowed.
        let name = meta
            .name
            .as_deref()
            .or(meta.generate_name.as_deref())
            .unwrap_or_default();
        let parts = (meta.namespace.as_deref(), name);
        // The controller holds its copy now: its store of handed-out
        // objects lets it go (a change announced meanwhile is not copied
        // into it for nothing).
        if let Some(lazy) = &self.0.lazy {
            (lazy.evict)(parts.0, name);
        }
        let mut state = self.0.lock();
        let Some(turn) = state.unstarted.remove(lookup(&parts)) else {
            return true;
        };
        if state.unstarted.is_empty() && state.fairness.ahead > 0 {
            // A batch ahead may be handed out now.
            state.wake();
        }
        if turn == Turn::Listed && state.changed_first() {
            // Kept, in a lazy queue too: handed out again, it goes back
            // into the controller's store without a second decode (a
            // change announced meanwhile drops it for the cache's copy).
            // At most the objects out of the queue give way at once.
            state
                .yielded
                .insert(key(parts.0, name), (Some(object.clone()), Lane::Listed));
            return false;
        }
        true
    }
}

impl<K> Slots<K> {
    /// The controller finished with `namespace`/`name`: its slot is free,
    /// and a copy announced meanwhile is queued. Nothing for an object it
    /// did not take from the queue (a requeue it scheduled itself).
    pub(crate) fn done(&self, namespace: Option<&str>, name: &str) {
        if let Some(lazy) = &self.0.lazy {
            (lazy.evict)(namespace, name);
        }
        let mut state = self.0.lock();
        if !state.running.remove(lookup(&(namespace, name))) {
            return;
        }
        let key = key(namespace, name);
        state.unstarted.remove(&key);
        let parked = state.parked.remove(&key);
        match (state.yielded.remove(&key), parked) {
            // Skipped: first in its lane again, as the newest copy (in the
            // changed lane if a change came meanwhile).
            (Some((object, lane)), None) => state.push_at(key, object, lane, true, true),
            (Some((_, lane)), Some((object, parked_lane))) => {
                let lane = lane.max(parked_lane);
                state.push_at(key, object, lane, lane == Lane::Listed, true);
            }
            (None, Some((object, lane))) => state.push(key, object, lane),
            (None, None) => {}
        }
        state.wake();
    }

    /// The controller found `namespace`/`name` missing from its store when
    /// it came to reconcile it. In a lazy queue that is an object the
    /// queue did not hand out (a requeue the controller scheduled, an
    /// owned object's change): if the cache holds it, it is queued, to be
    /// loaded and reconciled. Otherwise (deleted) its slot is freed.
    pub(crate) fn missing(&self, namespace: Option<&str>, name: &str) {
        let Some(lazy) = &self.0.lazy else {
            return self.done(namespace, name);
        };
        if !(lazy.holds)(namespace, name) {
            return self.done(namespace, name);
        }
        let key = key(namespace, name);
        let mut state = self.0.lock();
        if state.closed {
            return;
        }
        let lane = match state.parked.remove(&key) {
            Some((_, lane)) => lane,
            None => Lane::Changed,
        };
        state.running.remove(&key);
        state.unstarted.remove(&key);
        match state.waiting.get(&key) {
            Some(waiting) if waiting.lane >= lane => {}
            _ => state.push(key, None, lane),
        }
        state.wake();
    }
}
