//! The loop that runs one controller's reconciles: it takes objects from
//! the controller's queue, runs each reconcile, and turns what a
//! reconcile asks for next into the queue's input.
//!
//! Everything that names an object goes through the queue (`cache/queue.rs`):
//! the watch's changes, a trigger (a mapped watch, a stream given to
//! `reconcile_on`, a shard handover) and a requeue the reconcile asked
//! for once its time comes. So the queue alone decides what runs: an
//! object is never reconciled twice at once, a change that comes while it
//! runs makes it run once more after, and at most the controller's
//! concurrency run at once (the queue hands out no more). The loop keeps
//! the one thing the queue does not: when each object asked to run again.
//!
//! - **Requeues.** An object has at most one requeue pending, the earliest
//!   asked for. It is dropped when the object runs, for whatever reason,
//!   before it is due: the reconcile that runs then says what comes next.
//! - **Held back.** An object whose reconcile must wait first (`hold`:
//!   the caches do not yet show the manager's own writes it depends on)
//!   goes back to the queue without running and frees its slot
//!   (`Slots::hold`). The change that ends
//!   the wait queues it as any change does, and it runs once, on the copy
//!   that change brought; the wait's end queues it only if no change did
//!   (the writes were a child's, or the predicate passed over the
//!   change). A wait that gives up asks for a requeue.
//! - **Stopping.** When `stop` completes, nothing more is taken, triggered,
//!   requeued or waited for; the reconciles running finish, and the loop
//!   returns.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, FuturesUnordered};
use futures::{FutureExt as _, StreamExt as _};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use crate::Action;
use crate::cache::key::{Key, key, lookup};

/// What the loop is given.
pub(crate) struct Runner<K: Resource, F, H> {
    /// The controller's queue, its end that hands objects out.
    pub(crate) objects: crate::cache::Announced<K>,
    /// Objects to reconcile again, named by other sources.
    pub(crate) triggers: Option<BoxStream<'static, ObjectRef<K>>>,
    /// One reconcile of an object, to the action it asks for next.
    pub(crate) reconcile: F,
    /// Whether an object handed out must wait before it runs: `None` to
    /// run it now, or the wait, which ends when it may run.
    pub(crate) hold: H,
}

/// How a wait that held an object back ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Released {
    /// What it waited for came: the object runs when queued again.
    Now,
    /// It gave up: the object is requeued after this long.
    After(std::time::Duration),
}

impl<K, F, Fut, H> Runner<K, F, H>
where
    K: Resource + Send + Sync + 'static,
    F: Fn(Arc<K>) -> Fut,
    Fut: Future<Output = Action>,
    H: Fn(&K) -> Option<BoxFuture<'static, Released>>,
{
    /// Runs until `stop` completes and the reconciles running then end.
    pub(crate) async fn run(self, stop: impl Future<Output = ()>) {
        let Runner {
            mut objects,
            mut triggers,
            reconcile,
            hold,
        } = self;
        let slots = objects.slots();
        let mut running = FuturesUnordered::new();
        // The waits of objects held back, one per object.
        let mut held = FuturesUnordered::new();
        let mut waiting: std::collections::HashSet<Key> = std::collections::HashSet::new();
        let mut requeues = Requeues::default();
        let mut stop = pin!(stop.fuse());
        let mut stopping = false;
        loop {
            let due = requeues.next_due();
            tokio::select! {
                biased;
                () = &mut stop, if !stopping => stopping = true,
                Some((object, action)) = running.next(), if !running.is_empty() => {
                    let object: Arc<K> = object;
                    let action: Action = action;
                    let meta = object.meta();
                    let name = meta.name.as_deref().unwrap_or_default();
                    slots.done(meta.namespace.as_deref(), name);
                    if let Some(after) = action.requeue_after() {
                        requeues.ask(key(meta.namespace.as_deref(), name), Instant::now() + after);
                    }
                }
                Some((key, released)) = held.next(), if !stopping && !held.is_empty() => {
                    let key: Key = key;
                    waiting.remove(&key);
                    match released {
                        Released::Now => slots.release(key.0.as_deref(), &key.1),
                        Released::After(after) => requeues.ask(key, Instant::now() + after),
                    }
                }
                Some(object) = objects.next(), if !stopping => {
                    let meta = object.meta();
                    let (namespace, name) = (meta.namespace.as_deref(), meta.name.as_deref().unwrap_or_default());
                    requeues.drop_for(namespace, name);
                    if let Some(wait) = hold(object.as_ref()) {
                        slots.hold(namespace, name);
                        let key = key(namespace, name);
                        // A second hold of an object still waiting keeps
                        // the first wait: it ends on the same writes.
                        if waiting.insert(key.clone()) {
                            held.push(wait.map(move |released| (key, released)));
                        }
                        continue;
                    }
                    let run = reconcile(object.clone());
                    running.push(run.map(move |action| (object, action)));
                }
                next = next_trigger(&mut triggers), if !stopping => match next {
                    Some(target) => slots.again(target.namespace.as_deref(), &target.name),
                    None => triggers = None,
                },
                () = sleep_until(due), if !stopping && due.is_some() => {
                    for (namespace, name) in requeues.take_due(Instant::now()) {
                        slots.again(namespace.as_deref(), &name);
                    }
                }
                // Nothing can come any more (the queue never ends while
                // the controller holds it).
                else => return,
            }
            if stopping && running.is_empty() {
                return;
            }
        }
    }
}

/// The next trigger, never when there are none.
async fn next_trigger<K>(
    triggers: &mut Option<BoxStream<'static, ObjectRef<K>>>,
) -> Option<ObjectRef<K>>
where
    K: Resource,
{
    match triggers {
        Some(stream) => stream.next().await,
        None => futures::future::pending().await,
    }
}

/// Sleeps until `due` (never when `None`).
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => futures::future::pending().await,
    }
}

/// The requeues asked for: at most one per object, the earliest.
#[derive(Default)]
struct Requeues {
    /// By when they are due; the number orders requeues due at once.
    due: BTreeMap<(Instant, u64), Key>,
    by_key: HashMap<Key, (Instant, u64)>,
    next: u64,
}

impl Requeues {
    /// `key` asks to run again at `at`: kept if it is the earliest.
    fn ask(&mut self, key: Key, at: Instant) {
        if let Some(&(pending, n)) = self.by_key.get(&key) {
            if pending <= at {
                return;
            }
            self.due.remove(&(pending, n));
        }
        self.next += 1;
        self.due.insert((at, self.next), key.clone());
        self.by_key.insert(key, (at, self.next));
    }

    /// `namespace`/`name` runs now: its pending requeue is dropped.
    fn drop_for(&mut self, namespace: Option<&str>, name: &str) {
        if self.by_key.is_empty() {
            return;
        }
        if let Some(when) = self.by_key.remove(lookup(&(namespace, name))) {
            self.due.remove(&when);
        }
    }

    /// When the earliest requeue is due.
    fn next_due(&self) -> Option<Instant> {
        self.due.first_key_value().map(|((at, _), _)| *at)
    }

    /// The requeues due by `now`, taken out.
    fn take_due(&mut self, now: Instant) -> Vec<Key> {
        let mut taken = Vec::new();
        while let Some(entry) = self.due.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            self.by_key.remove(&key);
            taken.push(key);
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_requeue_keeps_the_earliest_ask_and_drops_when_the_object_runs() {
        let now = Instant::now();
        let mut requeues = Requeues::default();
        let a = key(Some("ns"), "a");
        requeues.ask(a.clone(), now + Duration::from_secs(10));
        requeues.ask(a.clone(), now + Duration::from_secs(5));
        requeues.ask(a.clone(), now + Duration::from_secs(20));
        requeues.ask(key(None, "b"), now + Duration::from_secs(7));
        assert_eq!(requeues.next_due(), Some(now + Duration::from_secs(5)));
        assert_eq!(
            requeues.take_due(now + Duration::from_secs(6)),
            vec![a.clone()]
        );
        assert_eq!(requeues.next_due(), Some(now + Duration::from_secs(7)));
        requeues.drop_for(None, "b");
        assert_eq!(requeues.next_due(), None);
        assert!(requeues.take_due(now + Duration::from_secs(60)).is_empty());
        // Asked again after it was taken: pending again.
        requeues.ask(a.clone(), now + Duration::from_secs(1));
        assert_eq!(requeues.take_due(now + Duration::from_secs(1)), [a]);
    }
}
