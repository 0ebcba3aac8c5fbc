//! A subscriber's queue of announced objects: two lanes, coalesced by
//! object, handed to the controller only when it has a free slot.
//!
//! - **Lanes.** An object the watch delivers as created or changed after
//!   the cache synced ([`Lane::Changed`]) is taken before one a list or a
//!   relist delivered ([`Lane::Listed`]), so a new object is not queued
//!   behind an initial list of thousands.
//! - **Aging.** The listed lane is taken next once changed objects have
//!   been taken ahead of it [`Fairness::max_passes`] times in a row or for
//!   [`Fairness::max_wait`],
//!   so a steady stream of changes cannot starve it (the starvation
//!   controller-runtime's priority queue users hit,
//!   kubernetes-sigs/controller-runtime#3496).
//! - **Coalescing.** However many times an object changes before its
//!   controller takes it, the queue holds it once, as its newest copy, in
//!   the place it was first announced (promoted to the changed lane if a
//!   change follows a listing). An object announced while it is being
//!   reconciled is held aside and queued when that reconcile ends: it runs
//!   once more after, never twice at once and never twice more.
//! - **Slots.** At most [`Fairness::slots`] objects are out of the queue at
//!   once (taken and not yet [`Slots::done`]); with no limit, an object
//!   out is still never handed out a second time before it is done. The
//!   controller's loop (`runner.rs`) takes an object the moment a slot
//!   frees, so the order here is the order reconciles start in.
//! - **Held back.** The controller may give an object it took back
//!   before running it ([`Slots::hold`]: the caches do not yet show the
//!   manager's own writes it depends on). Its slot frees; the next change
//!   of it queues it as any change would, and [`Slots::release`] queues it
//!   only if no change did, so the change that ends the wait does not run
//!   it twice.
//! - **Asked for again.** A requeue, a mapped watch's trigger or a shard
//!   handover names an object by key ([`Slots::again`]); it is queued in
//!   the changed lane as a watch event would be, held aside while the
//!   object runs, and coalesced with a copy that waits.
//! - **The first list holds no copies.** Until the cache's first list is
//!   complete, kube-runtime's store buffers the listed objects (its own
//!   copies) and the queue hands out nothing; an object of that
//!   list is queued without a copy of its own
//!   ([`Announcer::announce_first_listed`]) and gets the store's once the
//!   list is in ([`Announcer::fill`]). Without that the queue would hold a
//!   second copy of every object through the list, doubling the process's
//!   peak.
//! - **A compact cache's queue holds keys.** Its objects are decoded when
//!   the queue hands them out ([`Lazy`]); the reconcile holds that copy
//!   and nothing else keeps one. An object deleted before its turn is not
//!   handed out. It also keeps the watch's copy of a change (the copy the
//!   cache just encoded, at the version it stored), up to 4 copies per
//!   slot, and hands that out without decoding; a trigger or a requeue, a
//!   listed object and a change queued past that bound are decoded at
//!   their turn, so a storm of changes holds no more decoded copies than
//!   the bound.
//!
//! Its length is bounded by the number of distinct objects, not by the
//! number of watch events. Nothing is lost: the controller is always handed
//! the newest copy the watch delivered (a compact cache's: the newest it
//! holds when the object's turn comes).

use std::collections::{HashMap, HashSet, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::Stream;

use crate::Predicate;

use super::key::Key;

/// How an object came to be announced, which decides its lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Lane {
    /// Delivered by a list or relist (watcher `InitApply`): taken after
    /// changed objects, subject to aging.
    Listed,
    /// Created or changed after the cache synced (watcher `Apply`).
    Changed,
}

/// How the queue shares the controller's slots between its lanes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fairness {
    /// Objects out of the queue at once; 0 for no limit.
    pub(crate) slots: usize,
    /// Changed objects taken in a row while listed ones wait, before a
    /// listed one is taken.
    pub(crate) max_passes: u32,
    /// How long the listed lane may wait unserved while changed objects are
    /// taken.
    pub(crate) max_wait: Duration,
}

impl Fairness {
    /// Listed objects get at least one take in 8 while changes flood in.
    pub(crate) const MAX_PASSES: u32 = 8;
    /// And at least one take every 2 s.
    pub(crate) const MAX_WAIT: Duration = Duration::from_secs(2);

    /// `slots` at once, with the default aging bounds.
    pub(crate) fn with_slots(slots: usize) -> Self {
        Fairness {
            slots,
            max_passes: Self::MAX_PASSES,
            max_wait: Self::MAX_WAIT,
        }
    }
}

struct Waiting<K> {
    /// `None` for an object of the first list until [`Announcer::fill`].
    object: Option<Arc<K>>,
    lane: Lane,
    /// Which push of this key into a lane is current; older entries of
    /// the key in a lane are skipped when they come up.
    ticket: u64,
}

struct State<K> {
    fairness: Fairness,
    changed: VecDeque<(Key, u64)>,
    listed: VecDeque<(Key, u64)>,
    waiting: HashMap<Key, Waiting<K>>,
    /// How many of `waiting` are in the listed lane.
    listed_len: usize,
    /// Taken and not yet done.
    running: HashSet<Key>,
    /// Announced while running: queued when done, in the lane held here
    /// (without a copy in a lazy queue).
    parked: HashMap<Key, (Option<Arc<K>>, Lane)>,
    /// Handed out, then held back before running ([`Slots::hold`]):
    /// queued again by the next offer that passes, or by
    /// [`Slots::release`].
    held: HashSet<Key>,
    /// How many copies `waiting` and `parked` hold.
    kept: usize,
    next_ticket: u64,
    /// Changed objects taken in a row while listed ones waited.
    passes: u32,
    /// The first of those takes: since when the listed lane is passed
    /// over (a wait for a free slot passes nothing over).
    passed_since: Option<Instant>,
    waker: Option<Waker>,
    /// The receiver was dropped: announcements go nowhere.
    closed: bool,
    /// Objects of the first list wait for the store's copies: nothing is
    /// handed out.
    unfilled: bool,
}

impl<K> State<K> {
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    fn listed_is_empty(&self) -> bool {
        self.listed_len == 0
    }

    fn is_current(&self, key: &Key, ticket: u64, lane: Lane) -> bool {
        self.waiting
            .get(key)
            .is_some_and(|w| w.ticket == ticket && w.lane == lane)
    }

    /// Offers `object` under `key` in `lane`, if the predicate `passes`
    /// it: held aside while it runs (queued when done), refreshing a copy
    /// already waiting (moved to the changed lane if that is `lane`), or
    /// queued. A copy already held aside or waiting is refreshed even if
    /// the predicate refuses this one.
    fn offer(&mut self, key: Key, object: Option<Arc<K>>, lane: Lane, passes: bool) {
        if let Some(parked) = self.parked.get_mut(&key) {
            put(&mut self.kept, &mut parked.0, object);
            parked.1 = parked.1.max(lane);
            return;
        }
        if self.running.contains(&key) {
            if passes {
                self.kept += usize::from(object.is_some());
                self.parked.insert(key, (object, lane));
            }
            return;
        }
        match self.waiting.get_mut(&key) {
            Some(waiting) if waiting.lane >= lane => {
                put(&mut self.kept, &mut waiting.object, object)
            }
            Some(_) => self.push(key, object, lane),
            None if passes => self.push(key, object, lane),
            None => return,
        }
        self.wake();
    }

    /// Queues `object` under `key` at the back of `lane` (no longer held
    /// back, if it was).
    fn push(&mut self, key: Key, object: Option<Arc<K>>, lane: Lane) {
        if !self.held.is_empty() {
            self.held.remove(&key);
        }
        if lane == Lane::Listed && self.listed_is_empty() {
            self.passes = 0;
            self.passed_since = None;
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let queue = match lane {
            Lane::Changed => &mut self.changed,
            Lane::Listed => &mut self.listed,
        };
        queue.push_back((key.clone(), ticket));
        self.kept += usize::from(object.is_some());
        let replaced = self.waiting.insert(
            key,
            Waiting {
                object,
                lane,
                ticket,
            },
        );
        if let Some(replaced) = replaced {
            self.kept -= usize::from(replaced.object.is_some());
            if replaced.lane == Lane::Listed {
                self.listed_len -= 1;
            }
        }
        if lane == Lane::Listed {
            self.listed_len += 1;
        }
    }

    /// The head of `lane`, removed from the queue (without a copy in a
    /// lazy queue).
    fn pop(&mut self, lane: Lane) -> Option<(Key, Option<Arc<K>>)> {
        loop {
            let (key, ticket) = match lane {
                Lane::Changed => self.changed.pop_front()?,
                Lane::Listed => self.listed.pop_front()?,
            };
            if self.is_current(&key, ticket, lane) {
                let waiting = self.waiting.remove(&key)?;
                self.kept -= usize::from(waiting.object.is_some());
                if lane == Lane::Listed {
                    self.listed_len -= 1;
                }
                // Filled, or lazy: nothing is taken while `unfilled`.
                return Some((key, waiting.object));
            }
        }
    }

    /// Whether the listed lane has been passed over long enough to be
    /// taken next.
    fn listed_aged(&self) -> bool {
        self.passes >= self.fairness.max_passes
            || self
                .passed_since
                .is_some_and(|since| since.elapsed() >= self.fairness.max_wait)
    }

    /// Whether the controller may be handed another object: a slot is
    /// free.
    fn has_room(&self) -> bool {
        let slots = self.fairness.slots;
        slots == 0 || self.running.len() < slots
    }

    /// The next object by lane and aging.
    fn take(&mut self) -> Option<(Key, Option<Arc<K>>)> {
        let listed_waits = !self.listed_is_empty();
        let aged = listed_waits && self.listed_aged();
        if !aged && let Some(taken) = self.pop(Lane::Changed) {
            if listed_waits {
                self.passes = self.passes.saturating_add(1);
                self.passed_since.get_or_insert_with(Instant::now);
            }
            return Some(taken);
        }
        let taken = self.pop(Lane::Listed)?;
        self.passes = 0;
        self.passed_since = None;
        Some(taken)
    }
}

/// Puts `object` in `slot`, counting the copies held in `kept`.
fn put<K>(kept: &mut usize, slot: &mut Option<Arc<K>>, object: Option<Arc<K>>) {
    *kept += usize::from(object.is_some());
    *kept -= usize::from(slot.is_some());
    *slot = object;
}

struct Shared<K> {
    state: Mutex<State<K>>,
    lazy: Option<Lazy<K>>,
}

/// A callback on an object's namespace and name.
type ByKey<T> = Box<dyn Fn(Option<&str>, &str) -> T + Send + Sync>;

/// What a compact cache's queue is given to hand out objects it holds by
/// key.
pub(crate) struct Lazy<K> {
    /// The copy to hand out, decoded; `None` for an object the cache no
    /// longer holds.
    pub(crate) load: ByKey<Option<Arc<K>>>,
    /// Whether the cache holds the object.
    pub(crate) holds: ByKey<bool>,
    /// How many copies of changes the queue may keep: a copy kept is the
    /// watch's, handed out without decoding (0 for a decoded cache, whose
    /// own copy costs nothing to hand out).
    pub(crate) keep: usize,
}

impl<K> Lazy<K> {
    /// A compact cache's queue keeps up to this many copies of changes
    /// per slot (16 slots when unlimited): 64 decoded objects at the
    /// default concurrency.
    pub(crate) const KEEP_PER_SLOT: usize = 4;
}

impl<K> Shared<K> {
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The watch's end of a queue, with the subscriber's predicate.
pub(crate) struct Announcer<K> {
    shared: Arc<Shared<K>>,
    predicate: Option<Predicate<K>>,
}

/// The controller's end: a stream of the newest copy of each announced
/// object, one per free slot.
pub(crate) struct Announced<K>(Arc<Shared<K>>);

/// The controller's report that it finished with an object it took,
/// freeing its slot.
pub(crate) struct Slots<K>(Arc<Shared<K>>);

/// A new, empty queue taking what `predicate` passes (everything when
/// `None`), sharing `fairness.slots` between its lanes.
#[cfg(test)]
pub(crate) fn queue<K>(
    predicate: Option<Predicate<K>>,
    fairness: Fairness,
) -> (Announcer<K>, Announced<K>) {
    queue_with(predicate, fairness, None)
}

/// A new, empty queue; a lazy one (`lazy` set) keeps keys and hands out
/// what `lazy.load` returns for them.
pub(crate) fn queue_with<K>(
    predicate: Option<Predicate<K>>,
    fairness: Fairness,
    lazy: Option<Lazy<K>>,
) -> (Announcer<K>, Announced<K>) {
    let shared = Arc::new(Shared {
        lazy,
        state: Mutex::new(State {
            fairness,
            changed: VecDeque::new(),
            listed: VecDeque::new(),
            waiting: HashMap::new(),
            listed_len: 0,
            running: HashSet::new(),
            parked: HashMap::new(),
            held: HashSet::new(),
            kept: 0,
            next_ticket: 0,
            passes: 0,
            passed_since: None,
            waker: None,
            closed: false,
            unfilled: false,
        }),
    });
    (
        Announcer {
            shared: shared.clone(),
            predicate,
        },
        Announced(shared),
    )
}

impl<K> Announced<K> {
    /// The handle through which the controller frees its slots.
    pub(crate) fn slots(&self) -> Slots<K> {
        Slots(self.0.clone())
    }
}

impl<K> Stream for Announced<K> {
    type Item = Arc<K>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Arc<K>>> {
        let mut state = self.0.lock();
        loop {
            if !state.has_room() || state.unfilled {
                break;
            }
            let Some((key, object)) = state.take() else {
                break;
            };
            // A lazy queue holds keys (decoded now) and some changes'
            // copies, which the cache may have deleted since.
            let object = match (object, &self.0.lazy) {
                (Some(object), Some(lazy)) => {
                    (lazy.holds)(key.0.as_deref(), &key.1).then_some(object)
                }
                (Some(object), None) => Some(object),
                (None, Some(lazy)) => (lazy.load)(key.0.as_deref(), &key.1),
                (None, None) => None,
            };
            // `None`: deleted before its turn.
            let Some(object) = object else { continue };
            // Tracked with no limit too: an object is never handed out
            // while it runs.
            state.running.insert(key);
            return Poll::Ready(Some(object));
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl<K> Drop for Announced<K> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.closed = true;
        state.changed.clear();
        state.listed.clear();
        state.waiting.clear();
        state.listed_len = 0;
        state.parked.clear();
        state.held.clear();
        state.kept = 0;
    }
}

#[path = "queue_announcer.rs"]
mod announcer;
#[path = "queue_slots.rs"]
mod slots;

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
