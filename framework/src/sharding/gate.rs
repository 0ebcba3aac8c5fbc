//! The gate every reconcile of a sharded manager passes: it admits a key
//! only while this replica owns it, has claimed it in its Lease, and every
//! other live member has acknowledged a view in which it does not own it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use futures::Stream;
use futures::future::BoxFuture;
use tokio::sync::{Notify, watch};

use super::ranges::ShardKey;
use super::ring::{MemberId, View};
use super::selectors::Selectors;
use super::stats::ShardStats;
use seat::{Cached, Seat};

/// What a member has published: the view it acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Peer {
    pub(crate) id: MemberId,
    pub(crate) acked: View,
}

#[derive(Debug)]
struct State {
    /// The live members as last observed, this replica included.
    target: View,
    /// Every view that may be in our Lease on the server now: one after a
    /// successful write, more while a write's outcome is unknown.
    claims: Vec<View>,
    /// The other live members' acknowledged views, read after our last
    /// write; `None` until such a read succeeded.
    peers: Option<Vec<Peer>>,
    /// Reconciles may start and run until then: last renewal sent + renew deadline.
    fence: Instant,
    /// Keys in a reconcile now, with how many controllers hold each.
    in_flight: HashMap<String, u32>,
    /// Live Leases of the same ring name whose configuration differs from
    /// ours and whose scope overlaps it: while there is one, nothing starts.
    refused: Vec<String>,
    /// Live members whose Leases went unrenewed past their renew deadline:
    /// about to expire, so `selector` mode caches what their loss would
    /// bring here before it may start (see [`ShardGate::observed`]).
    suspects: Vec<MemberId>,
    /// `selector` mode: the buckets the published shard selector holds,
    /// bucket `i` as bit `i`, 0 while none is owned; `None` before the
    /// first (see [`ShardGate::publish_ranges`]).
    watched: Option<u128>,
    /// When the observed view or our claims last changed.
    moved_at: Instant,
    /// One entry per controller seat (see [`ShardGate::seat`]).
    seats: Vec<Seat>,
}

impl State {
    /// Whether the claim in our Lease differs from the observed view.
    fn behind(&self) -> bool {
        self.claims.len() != 1 || self.claims[0] != self.target
    }

    /// Whether every live peer acknowledged the view this replica observes.
    fn settled(&self) -> bool {
        self.peers
            .as_ref()
            .is_some_and(|peers| peers.iter().all(|peer| peer.acked == self.target))
    }

    /// Whether `key` may start on `me` now (see [`ShardGate::try_start`]).
    fn admits(&self, me: &str, key: &str) -> bool {
        Instant::now() < self.fence
            && self.refused.is_empty()
            && self.target.owns(me, key)
            && self.claims.iter().all(|claim| claim.owns(me, key))
            && self.peers.as_ref().is_some_and(|peers| {
                peers
                    .iter()
                    .all(|peer| peer.id == me || !peer.acked.owns(&peer.id, key))
            })
    }

    /// The entry of `seat` (a seat the gate handed out).
    fn seat(&mut self, seat: usize) -> &mut Seat {
        if self.seats.len() <= seat {
            self.seats.resize_with(seat + 1, Seat::default);
        }
        &mut self.seats[seat]
    }
}

/// A sharder for one resource type, started when this replica becomes the sharder.
pub(crate) type Labeller = Box<dyn FnOnce(Arc<ShardGate>) -> BoxFuture<'static, ()> + Send>;

/// Lists the `namespace/name` keys of one controller's store.
pub(crate) type Lister = Box<dyn Fn() -> Vec<String> + Send + Sync>;

/// The gate key of a `namespace/name` in one controller's store, if cached.
pub(crate) type Resolver = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// One replica's admission gate, shared by its controllers and its
/// membership loop.
pub(crate) struct ShardGate {
    me: MemberId,
    /// In `label` mode, the label selector of this replica's shard (set
    /// when the replica joins, before any controller starts).
    pub(crate) selector: OnceLock<String>,
    /// In `label` mode, the label key that carries the owner.
    pub(crate) label: OnceLock<String>,
    /// In `selector` mode, the field the API server hashes: keys then
    /// carry its hash and are placed by their bucket of the hash space.
    pub(crate) placement: OnceLock<ShardKey>,
    /// In `selector` mode, where this replica's shard selector is
    /// published for its caches' watches.
    pub(crate) selectors: OnceLock<Arc<Selectors>>,
    /// In `selector` mode, how long the ring must have stood still before
    /// the caches stop watching buckets this replica no longer needs.
    keep: OnceLock<Duration>,
    state: Mutex<State>,
    /// Signalled when a reconcile ends, so a pending drain is re-checked.
    drained: Notify,
    /// Bumped whenever keys may have become startable.
    wake: watch::Sender<u64>,
    pub(crate) stats: Arc<ShardStats>,
    /// Key listers, one per controller store, for the owned-keys and moves metrics.
    listers: Mutex<Vec<Lister>>,
    /// `selector` mode: the gate key of a cached `namespace/name`, one per
    /// controller store, so a question by name costs one store lookup.
    resolvers: Mutex<Vec<Resolver>>,
    /// `label` mode: the sharders to run when this replica holds the sharder Lease.
    labellers: Mutex<Vec<Labeller>>,
    generation: AtomicU64,
}

impl std::fmt::Debug for ShardGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardGate")
            .field("me", &self.me)
            .field("selector", &self.selector)
            .finish_non_exhaustive()
    }
}

/// Marks a key as in a reconcile on this replica until dropped.
#[derive(Debug)]
pub(crate) struct InFlight {
    gate: Arc<ShardGate>,
    key: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        if let Some(n) = state.in_flight.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                state.in_flight.remove(&self.key);
            }
        }
        drop(state);
        self.gate.drained.notify_one();
    }
}

impl ShardGate {
    pub(crate) fn new(me: MemberId) -> Self {
        let (wake, _) = watch::channel(0);
        ShardGate {
            selector: OnceLock::new(),
            label: OnceLock::new(),
            placement: OnceLock::new(),
            selectors: OnceLock::new(),
            keep: OnceLock::new(),
            me,
            state: Mutex::new(State {
                target: View::default(),
                claims: vec![View::default()],
                peers: None,
                fence: Instant::now(),
                in_flight: HashMap::new(),
                refused: Vec::new(),
                suspects: Vec::new(),
                watched: None,
                moved_at: Instant::now(),
                seats: Vec::new(),
            }),
            drained: Notify::new(),
            wake,
            stats: Arc::default(),
            listers: Mutex::new(Vec::new()),
            resolvers: Mutex::new(Vec::new()),
            labellers: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
        }
    }

    /// `label` mode: watch only objects whose `label` names this replica.
    pub(crate) fn set_label(&self, label: String) {
        let _ = self.selector.set(format!("{label}={}", self.me));
        let _ = self.label.set(label);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This replica's member id.
    pub(crate) fn me(&self) -> &str {
        &self.me
    }

    /// A seat for one controller: the gate keeps under it which of the
    /// controller's keys it has handled (see [`Self::offer`]).
    pub(crate) fn seat(&self) -> usize {
        let mut state = self.lock();
        state.seats.push(Seat::default());
        state.seats.len() - 1
    }

    /// Tells the gate whether a key is still in `seat`'s store.
    pub(crate) fn watch_seat(&self, seat: usize, cached: Cached) {
        self.lock().seat(seat).cached = Some(cached);
    }

    /// Admits `key` into a reconcile, or `None` when this replica must not
    /// reconcile it now (not its key, not yet handed over, or fenced). A
    /// refused key counts as not handled, in the same step, so the wake
    /// that follows any change of the gate's state offers it again.
    pub(crate) fn try_start(self: &Arc<Self>, seat: usize, key: &str) -> Option<InFlight> {
        let mut state = self.lock();
        if !state.admits(&self.me, key) {
            state.seat(seat).handled.insert(key.to_owned(), false);
            return None;
        }
        state.seat(seat).admitted(key);
        *state.in_flight.entry(key.to_owned()).or_insert(0) += 1;
        Some(InFlight {
            gate: self.clone(),
            key: key.to_owned(),
        })
    }

    /// The fence cancelled the reconcile of `key`: it counts as not
    /// handled. Whether it may start again already (the fence was restored
    /// before this call): then the caller requeues it itself, as no wake
    /// may follow.
    pub(crate) fn cancelled(&self, seat: usize, key: &str) -> bool {
        let mut state = self.lock();
        state.seat(seat).handled.insert(key.to_owned(), false);
        state.admits(&self.me, key)
    }

    /// On a wake, given every key in `seat`'s store: the keys to reconcile
    /// again — those tried before that may start now and were not handled
    /// since they came here (they moved here, or were refused or
    /// cancelled); a key not tried yet is left to the queue. A key
    /// the observed view gives to another member stops counting as
    /// handled; a key that stays ours counts as handled through the moments
    /// a handover makes every start wait (our claim unconfirmed, peers
    /// unread), so a view change never re-runs the reconciles of keys that
    /// stayed.
    pub(crate) fn offer(&self, seat: usize, keys: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut state = self.lock();
        // Out of the state while the state's admission is asked.
        let mut entry = std::mem::take(state.seat(seat));
        let mut present = HashSet::new();
        let mut again = Vec::new();
        for key in keys {
            match entry.handled.get_mut(&key) {
                // Not tried yet: the controller's queue still holds it.
                None => {}
                Some(handled) if !state.target.owns(&self.me, &key) => *handled = false,
                Some(handled) if !*handled && state.admits(&self.me, &key) => {
                    *handled = true;
                    again.push(key.clone());
                }
                Some(_) => {}
            }
            present.insert(key);
        }
        entry.handled.retain(|key, _| present.contains(key));
        entry.swept = entry.handled.len();
        *state.seat(seat) = entry;
        again
    }

    /// Whether `key` belongs to this replica in the view it acknowledged.
    pub(crate) fn owns(&self, key: &str) -> bool {
        let state = self.lock();
        state.claims.len() == 1 && state.claims[0].owns(&self.me, key)
    }

    /// Resolves when the fence passes: the last renewal is older than the
    /// renew deadline, so the Lease may expire soon and the key move.
    pub(crate) async fn fenced(&self) {
        loop {
            let fence = self.lock().fence;
            if Instant::now() >= fence {
                return;
            }
            tokio::time::sleep_until(fence.into()).await;
        }
    }

    /// Moves the fence. When it had passed and now lies ahead again (a
    /// renewal sent in time came back late), the keys refused or cancelled
    /// meanwhile are offered again: nothing else would retry them.
    pub(crate) fn set_fence(&self, until: Instant) {
        let now = Instant::now();
        let mut state = self.lock();
        let lapsed = state.fence <= now;
        state.fence = until;
        drop(state);
        if lapsed && until > now {
            self.wake();
        }
    }

    /// The view to write into our Lease next: the observed live view once
    /// no reconcile of a key it takes away is running, else the current
    /// claim. Recorded as a possible claim before the write is sent.
    pub(crate) fn next_claim(&self) -> View {
        let mut state = self.lock();
        let me = self.me.as_str();
        let drained = state.in_flight.keys().all(|k| state.target.owns(me, k));
        let next = if drained {
            state.target.clone()
        } else {
            state.claims.last().cloned().unwrap_or_default()
        };
        if !state.claims.contains(&next) {
            state.claims.push(next.clone());
        }
        next
    }

    /// Our Lease now holds `view`: it is the only claim, and peers must be
    /// read again before a newly claimed key may start.
    pub(crate) fn claimed(&self, view: &View) {
        let mut state = self.lock();
        let changed = state.claims.len() != 1 || &state.claims[0] != view;
        state.claims = vec![view.clone()];
        if changed {
            state.peers = None;
            state.moved_at = Instant::now();
        }
        drop(state);
        self.publish_ranges();
    }

    /// The claim we acknowledged, when only one can be on the server.
    pub(crate) fn acked(&self) -> Option<View> {
        let state = self.lock();
        (state.claims.len() == 1).then(|| state.claims[0].clone())
    }

    /// Records what a read of every membership Lease showed: the live
    /// members, what each acknowledged, the live Leases of another
    /// configuration that could reconcile our objects, and the live
    /// members whose Leases went unrenewed past their renew deadline.
    ///
    /// A suspect has stopped reconciling (it fences itself at its renew
    /// deadline) and its Lease is about to expire. Nothing about who may
    /// reconcile changes (its keys move only once its Lease has expired);
    /// `selector` mode widens the caches' ranges to what this replica
    /// would own without the suspects, so their objects are listed before
    /// the handover rather than in it. One read's view and suspects are
    /// taken together: the read that finds a suspect's Lease expired no
    /// longer lists it live, and the ranges must go from "would own
    /// without it" to "owns" without a narrower selector in between.
    pub(crate) fn observed(
        &self,
        target: View,
        peers: Vec<Peer>,
        refused: Vec<String>,
        mut suspects: Vec<MemberId>,
    ) {
        if !self.fetches_ahead() {
            suspects.clear();
        }
        suspects.sort();
        let mut state = self.lock();
        if state.target != target {
            state.moved_at = Instant::now();
        }
        let changed = state.target != target
            || state.peers.as_ref() != Some(&peers)
            || state.refused != refused;
        if state.suspects != suspects && !suspects.is_empty() {
            tracing::info!(
                ?suspects,
                "membership leases unrenewed past the renew deadline; caching what their expiry would move here"
            );
        }
        state.target = target;
        state.peers = Some(peers);
        state.refused = refused;
        state.suspects = suspects;
        drop(state);
        // Every read: a narrowing waits for the ring to stand still.
        self.publish_ranges();
        if changed {
            self.wake();
        }
    }

    /// Whether a reconcile of a key we no longer own is still running.
    pub(crate) fn draining(&self) -> bool {
        let state = self.lock();
        let me = self.me.as_str();
        state.in_flight.keys().any(|k| !state.target.owns(me, k))
    }

    /// Whether the claim in our Lease differs from the observed view.
    pub(crate) fn behind(&self) -> bool {
        self.lock().behind()
    }

    /// Whether every live peer acknowledged the view this replica observes.
    pub(crate) fn settled(&self) -> bool {
        self.lock().settled()
    }

    /// Waits until a reconcile ends.
    pub(crate) async fn reconcile_ended(&self) {
        self.drained.notified().await;
    }

    /// Tells every controller to offer its objects to the gate again.
    pub(crate) fn wake(&self) {
        let n = self.generation.fetch_add(1, Relaxed) + 1;
        self.wake.send_replace(n);
    }

    /// A stream that yields whenever keys may have become startable, for
    /// `Controller::reconcile_all_on`.
    pub(crate) fn wakes(&self) -> impl Stream<Item = ()> + Send + 'static {
        let rx = self.wake.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    }

    /// Registers a controller's store, listing `namespace/name` keys.
    pub(crate) fn add_lister(&self, lister: Lister) {
        self.listers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(lister);
    }

    /// Registers the sharder of one controller's resource (`label` mode).
    pub(crate) fn add_labeller(&self, labeller: Labeller) {
        self.labellers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(labeller);
    }

    /// Takes the registered sharders, to start them.
    pub(crate) fn take_labellers(&self) -> Vec<Labeller> {
        std::mem::take(
            &mut *self
                .labellers
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Every key in every registered store.
    pub(crate) fn known_keys(&self) -> Vec<String> {
        let listers = self.listers.lock().unwrap_or_else(PoisonError::into_inner);
        let mut keys: Vec<String> = listers.iter().flat_map(|list| list()).collect();
        keys.sort();
        keys.dedup();
        keys
    }

    /// The live Leases of another configuration whose scope overlaps ours,
    /// as last observed: while there is one, this replica starts nothing.
    pub(crate) fn refused(&self) -> Vec<String> {
        self.lock().refused.clone()
    }

    /// The members as last observed.
    pub(crate) fn target(&self) -> View {
        self.lock().target.clone()
    }
}

#[path = "gate_ranges.rs"]
mod ranges_impl;
#[path = "gate_seat.rs"]
mod seat;

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
