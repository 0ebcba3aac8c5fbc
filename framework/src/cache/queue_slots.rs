//! The controller's reports to its queue: an object handed out is done
//! or held back, and an object is to be reconciled again.

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
            state.kept -= usize::from(object.is_some());
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
            self.0.lock().held.remove(lookup(&(namespace, name)));
            return;
        }
        let mut state = self.0.lock();
        if state.closed {
            return;
        }
        state.offer(key(namespace, name), None, Lane::Changed, true);
    }

    /// The controller holds `namespace`/`name`, just handed out, back
    /// before running it: its slot is free, and the object waits, queued
    /// by the next change of it, a requeue or a trigger (as any object
    /// not running is), or by [`release`](Self::release). A copy
    /// announced since it was handed out is queued now. Nothing for an
    /// object it did not take from the queue.
    pub(crate) fn hold(&self, namespace: Option<&str>, name: &str) {
        let mut state = self.0.lock();
        if !state.running.remove(lookup(&(namespace, name))) {
            return;
        }
        match state.parked.remove(lookup(&(namespace, name))) {
            Some((object, lane)) => {
                state.kept -= usize::from(object.is_some());
                state.push(key(namespace, name), object, lane);
            }
            None => {
                state.held.insert(key(namespace, name));
            }
        }
        state.wake();
    }

    /// What held `namespace`/`name` back is over: queued in the changed
    /// lane, unless something queued it since it was held (then it runs
    /// once, not twice). Nothing for an object not held, nor in a queue
    /// of copies (as [`again`](Self::again)).
    pub(crate) fn release(&self, namespace: Option<&str>, name: &str) {
        if self.0.lazy.is_none() {
            return;
        }
        let mut state = self.0.lock();
        if state.closed || !state.held.remove(lookup(&(namespace, name))) {
            return;
        }
        state.push(key(namespace, name), None, Lane::Changed);
        state.wake();
    }
}
