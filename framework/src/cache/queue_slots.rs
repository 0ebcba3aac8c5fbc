//! The controller's reports to its queue: an object handed out is done,
//! and an object is to be reconciled again.

use std::sync::Arc;

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
    /// waits. A queue of copies is given `load`'s copy; a lazy queue
    /// decodes the object when its turn comes. Nothing when the cache no
    /// longer holds it.
    pub(crate) fn again(
        &self,
        namespace: Option<&str>,
        name: &str,
        load: impl FnOnce() -> Option<Arc<K>>,
    ) {
        let object = match &self.0.lazy {
            Some(lazy) if (lazy.holds)(namespace, name) => None,
            Some(_) => return,
            None => match load() {
                Some(object) => Some(object),
                None => return,
            },
        };
        let mut state = self.0.lock();
        if state.closed {
            return;
        }
        state.offer(key(namespace, name), object, Lane::Changed, true);
    }
}
