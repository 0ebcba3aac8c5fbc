//! The controller's reports to its queue: an object handed out is done,
//! and an object is to be reconciled again.

use super::{Lane, Slots};
use crate::cache::key::{key, lookup};

impl<K> Slots<K> {
    /// The controller finished with `namespace`/`name`: its slot is free,
    /// and a copy announced meanwhile is queued. Nothing for an object it
    /// did not take from the queue.
    pub(crate) fn done(&self, namespace: Option<&str>, name: &str) {
        let mut state = self.0.lock();
        if !state.running.remove(lookup(&(namespace, name))) {
            return;
        }
        if let Some((object, lane)) = state.parked.remove(lookup(&(namespace, name))) {
            state.push(key(namespace, name), object, lane);
        }
        state.wake();
    }

    /// The controller asks for `namespace`/`name` to be reconciled again
    /// (a requeue it scheduled, a trigger that names the object, a shard
    /// handover): offered in the changed lane as a watch event would be,
    /// so it is held aside while it runs and coalesced with a copy that
    /// waits, and looked up when its turn comes. Nothing when the cache
    /// no longer holds it, nor in a queue of copies (only tests make one:
    /// it has no copy to hand out).
    pub(crate) fn again(&self, namespace: Option<&str>, name: &str) {
        let Some(lazy) = &self.0.lazy else {
            return;
        };
        if !(lazy.holds)(namespace, name) {
            return;
        }
        let mut state = self.0.lock();
        if state.closed {
            return;
        }
        state.offer(key(namespace, name), None, Lane::Changed, true);
    }
}
