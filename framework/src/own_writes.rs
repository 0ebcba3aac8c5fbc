//! Read your own writes: what the manager wrote, remembered per object
//! until its caches have caught up, so that no reconcile decides on a
//! cache older than the manager's own last write (the idea of KEP-5647,
//! on comparable `resourceVersion`s, KEP-5504).
//!
//! Every write, create and delete made through the manager's writers
//! records the object's expected state: the `resourceVersion` the API
//! server answered, or that it is gone. The record also goes to the object
//! being reconciled when the write was made (its owner, for a child it
//! created or deleted). A reconcile of an object waits, bounded, until the
//! caches hold its own and its children's recorded states; the watch drops
//! each record as it delivers the recorded state or a newer one.
//!
//! Versions are compared as integers where both parse as such (the API
//! server backed by etcd issues increasing integers), and by equality
//! otherwise: never guessed.

use std::collections::HashMap;
use std::hash::BuildHasher as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use concord_strategies::is_newer;
use tokio::sync::Notify;

/// An object written: its resource (`plural.group`), namespace and name.
pub(crate) type WriteKey = (String, Option<String>, String);

/// A [`WriteKey`]'s parts, borrowed: the ledger is asked about every
/// object a controller takes, and an owned key is three strings.
pub(crate) trait WriteParts {
    fn parts(&self) -> (&str, Option<&str>, &str);
}

impl WriteParts for WriteKey {
    fn parts(&self) -> (&str, Option<&str>, &str) {
        (&self.0, self.1.as_deref(), &self.2)
    }
}

impl WriteParts for (&str, Option<&str>, &str) {
    fn parts(&self) -> (&str, Option<&str>, &str) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn WriteParts + 'a> for WriteKey {
    fn borrow(&self) -> &(dyn WriteParts + 'a) {
        self
    }
}

// The borrowed parts hash as the owned key does (a tuple hashes its fields
// in order, an `Option` its variant then its value, a `String` as its
// `str`), as `Borrow` requires.
impl std::hash::Hash for dyn WriteParts + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn WriteParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn WriteParts + '_ {}

tokio::task_local! {
    /// The object a controller is reconciling on this task: the owner
    /// of what it writes.
    static RECONCILING: WriteKey;
}

/// The object being reconciled on this task, if any.
pub(crate) fn reconciling() -> Option<WriteKey> {
    RECONCILING.try_with(Clone::clone).ok()
}

/// Runs `work` as the reconcile of `key`: its writes are recorded as
/// `key`'s.
pub(crate) async fn as_reconcile_of<F: std::future::Future>(key: WriteKey, work: F) -> F::Output {
    RECONCILING.scope(key, work).await
}

/// What the manager expects the caches to show of an object it wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// The object at this `resourceVersion` or later.
    Version(String),
    /// The object gone (or replaced by another of the same name: `uid` was
    /// the deleted one's).
    Gone { uid: Option<String> },
}

/// What a cache holds of an object, for [`Expect::met_by`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// No cache of the resource exists: nothing can be stale.
    Uncached,
    /// The cache does not hold it.
    Absent,
    /// The cache holds it at this version, with this uid.
    Held {
        version: String,
        uid: Option<String>,
    },
}

impl Expect {
    /// Whether a cache showing `seen` has caught up with this write.
    pub(crate) fn met_by(&self, seen: &Seen) -> bool {
        match (self, seen) {
            (_, Seen::Uncached) => true,
            (Expect::Version(_), Seen::Absent) => false,
            (Expect::Version(want), Seen::Held { version, .. }) => {
                version == want || is_newer(version, want) == Some(true)
            }
            (Expect::Gone { .. }, Seen::Absent) => true,
            (Expect::Gone { uid }, Seen::Held { uid: held, .. }) => {
                uid.is_some() && held.is_some() && uid != held
            }
        }
    }
}

struct Record {
    expect: Expect,
    at: Instant,
}

#[derive(Default)]
struct State {
    records: HashMap<WriteKey, Record>,
    /// The writes made while reconciling each object (its children).
    children: HashMap<WriteKey, Vec<WriteKey>>,
    /// The version each object's last own write stored, to tell the watch
    /// events this manager caused (kept as long as a record).
    caused: HashMap<WriteKey, (String, Instant)>,
    /// The records' count after the last sweep.
    swept: usize,
}

/// How many channels the waits for records are woken through.
const WAKE_CHANNELS: usize = 64;

/// The ledger of one manager's writes.
pub(crate) struct OwnWrites {
    state: Mutex<State>,
    /// Woken when the watch drops a record: the channel of its key
    /// ([`channel`](Self::channel)), so a drop wakes the waits for that
    /// object, its owner's and a few others', not every wait.
    caught_up: Box<[Notify]>,
    /// How a key picks its channel.
    channels: std::hash::RandomState,
    /// How long a record is kept when no watch event drops it (a cache
    /// that relisted past the object, a watch that never comes).
    keep: Duration,
    /// Records held now, for the gauge.
    held: AtomicU64,
    /// Whether a controller skips the events of the manager's own writes
    /// (`skip_own_writes`): only then is each write's version kept for
    /// [`caused`](Self::caused), a map as large as a minute of writes.
    own_events_asked: AtomicBool,
}

impl Default for OwnWrites {
    fn default() -> Self {
        OwnWrites::new(Duration::from_secs(60))
    }
}

impl OwnWrites {
    pub(crate) fn new(keep: Duration) -> Self {
        OwnWrites {
            state: Mutex::new(State::default()),
            caught_up: (0..WAKE_CHANNELS).map(|_| Notify::new()).collect(),
            channels: std::hash::RandomState::new(),
            keep,
            held: AtomicU64::new(0),
            own_events_asked: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// From now on, keeps each write's version so that [`caused`](Self::caused)
    /// can tell the watch events this manager's writes caused. A
    /// controller that skips them asks when it is added; the events of
    /// writes made before the first one asked are not recognised, and are
    /// reconciled.
    pub(crate) fn tell_own_events(&self) {
        self.own_events_asked.store(true, Relaxed);
    }

    /// How many records are held.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Relaxed)
    }

    /// Remembers that `key` was written to `expect`, made while
    /// reconciling `during` (if any); `waited` says whether a cache that
    /// will show it exists, so that reconciles may wait for it (otherwise
    /// only the event it causes is remembered).
    pub(crate) fn record(
        &self,
        key: WriteKey,
        expect: Expect,
        during: Option<WriteKey>,
        waited: bool,
    ) {
        let tell = self.own_events_asked.load(Relaxed);
        let mut state = self.lock();
        if !waited {
            if let (true, Expect::Version(version)) = (tell, expect) {
                state.caused.insert(key, (version, Instant::now()));
                self.sweep(&mut state);
            }
            return;
        }
        if let Some(owner) = during.filter(|owner| *owner != key) {
            let children = state.children.entry(owner).or_default();
            if !children.contains(&key) {
                children.push(key.clone());
            }
        }
        if let (true, Expect::Version(version)) = (tell, &expect) {
            state
                .caused
                .insert(key.clone(), (version.clone(), Instant::now()));
        }
        state.records.insert(
            key,
            Record {
                expect,
                at: Instant::now(),
            },
        );
        self.sweep(&mut state);
        self.held.store(state.records.len() as u64, Relaxed);
    }

    /// The watch of a cache of `key`'s resource applied `seen` (or
    /// deleted it: [`Seen::Absent`]): a record it meets is dropped.
    pub(crate) fn observed(&self, key: &WriteKey, seen: &Seen) {
        let mut state = self.lock();
        let met = state
            .records
            .get(key)
            .is_some_and(|r| r.expect.met_by(seen));
        if met {
            state.records.remove(key);
            self.held.store(state.records.len() as u64, Relaxed);
            drop(state);
            self.caught_up[self.channel(key)].notify_waiters();
        }
    }

    /// The channel through which a dropped record of `key` wakes the
    /// waits for it.
    fn channel(&self, key: &(dyn WriteParts + '_)) -> usize {
        // The remainder is below `WAKE_CHANNELS`: it fits a `usize`.
        (self.channels.hash_one(key) % WAKE_CHANNELS as u64) as usize
    }

    /// The channels a wait for a reconcile of `key` listens on: its own
    /// key's and its children's. Fixed for the wait: the runner waits
    /// only for an object it holds back, which is not reconciling and so
    /// gains no children meanwhile (a record nothing wakes the wait for
    /// would still be found by its look every 50 ms).
    fn channels_of(&self, key: &WriteKey) -> Vec<usize> {
        let state = self.lock();
        let mut channels = vec![self.channel(key)];
        for child in state.children.get(key).into_iter().flatten() {
            let channel = self.channel(child);
            if !channels.contains(&channel) {
                channels.push(channel);
            }
        }
        channels
    }

    /// The records a reconcile of `key` waits for: its own and those of
    /// the writes made while reconciling it; `None` when there are none.
    fn pending(&self, key: &WriteKey) -> Vec<(WriteKey, Expect)> {
        let mut state = self.lock();
        let now = Instant::now();
        let keep = self.keep;
        // Nothing is copied for an object with no record and no children:
        // the common case, for which a reconcile pays one lock.
        let children = state.children.get(key).map_or(&[][..], Vec::as_slice);
        let found: Vec<(WriteKey, Expect)> = std::iter::once(key)
            .chain(children)
            .filter_map(|k| {
                let record = state.records.get(k)?;
                (now.duration_since(record.at) < keep).then(|| (k.clone(), record.expect.clone()))
            })
            .collect();
        // Children whose records went are forgotten.
        let State {
            records, children, ..
        } = &mut *state;
        if let Some(list) = children.get_mut(key) {
            list.retain(|child| records.contains_key(child));
            if list.is_empty() {
                children.remove(key);
            }
        }
        found
    }

    /// Whether `seen` does not yet show a write a reconcile of `key`
    /// depends on. A record it shows is dropped, even when its watch
    /// event was missed (a relist).
    pub(crate) fn behind(&self, key: &WriteKey, seen: impl Fn(&WriteKey) -> Seen) -> bool {
        let mut behind = false;
        for (k, expect) in self.pending(key) {
            let seen = seen(&k);
            if expect.met_by(&seen) {
                self.observed(&k, &seen);
            } else {
                behind = true;
            }
        }
        behind
    }

    /// Waits until `seen` shows every write a reconcile of `key` depends
    /// on, at most `limit`: `Ok(None)` when none was behind, `Ok(Some)`
    /// with the time waited once the caches caught up, `Err` with that
    /// time when they did not.
    ///
    /// The watch drops a record as it delivers what it expects and wakes
    /// the waits listening on the record's channel; a wait so woken only
    /// looks whether its records are gone. It asks `seen` (which may read
    /// a cached object's JSON) first and every 50 ms, for a record no
    /// watch event will drop.
    pub(crate) async fn wait_for(
        &self,
        key: &WriteKey,
        limit: Duration,
        seen: impl Fn(&WriteKey) -> Seen,
    ) -> Result<Option<Duration>, Duration> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + limit;
        let mut first = true;
        let mut look = true;
        let channels = self.channels_of(key);
        loop {
            let mut woken: Vec<_> = channels
                .iter()
                .map(|&c| Box::pin(self.caught_up[c].notified()))
                .collect();
            for notified in &mut woken {
                notified.as_mut().enable();
            }
            let behind = if look {
                self.behind(key, &seen)
            } else {
                self.has_pending(key)
            };
            if !behind {
                return Ok((!first).then(|| started.elapsed()));
            }
            first = false;
            // Woken by the watch, or every 50 ms to look again.
            let next = (tokio::time::Instant::now() + Duration::from_millis(50)).min(deadline);
            // Never empty: a key has its own channel.
            let any = futures::future::select_all(woken);
            look = tokio::time::timeout_at(next, any).await.is_err();
            if look && tokio::time::Instant::now() >= deadline {
                return Err(started.elapsed());
            }
        }
    }

    /// Whether a record a reconcile of `key` depends on is held (asked
    /// without building an owned key).
    pub(crate) fn has_pending(&self, key: &(dyn WriteParts + '_)) -> bool {
        let state = self.lock();
        if state.records.is_empty() {
            return false;
        }
        let now = Instant::now();
        let fresh = |record: &Record| now.duration_since(record.at) < self.keep;
        state.records.get(key).is_some_and(fresh)
            || state.children.get(key).is_some_and(|children| {
                children
                    .iter()
                    .any(|child| state.records.get(child).is_some_and(fresh))
            })
    }

    /// Whether the watch event that brought `key` at `version` is this
    /// manager's own last write of it.
    pub(crate) fn caused(&self, key: &WriteKey, version: &str) -> bool {
        let state = self.lock();
        state
            .caused
            .get(key)
            .is_some_and(|(own, at)| own == version && at.elapsed() < self.keep)
    }

    /// Whether a copy `seen` of `key` is at least as new as the
    /// manager's own last write of it.
    pub(crate) fn is_current(&self, key: &WriteKey, seen: &Seen) -> bool {
        let state = self.lock();
        state
            .records
            .get(key)
            .is_none_or(|r| r.at.elapsed() >= self.keep || r.expect.met_by(seen))
    }

    /// Drops records older than `keep` once they have doubled since the
    /// last sweep (amortised, so the ledger stays within twice the writes
    /// not yet observed).
    fn sweep(&self, state: &mut State) {
        const SWEEP_FROM: usize = 256;
        let len = state.records.len().max(state.caused.len());
        if len < SWEEP_FROM || len < 2 * state.swept {
            return;
        }
        let keep = self.keep;
        state.records.retain(|_, r| r.at.elapsed() < keep);
        state.caused.retain(|_, (_, at)| at.elapsed() < keep);
        let State {
            records, children, ..
        } = state;
        children.retain(|_, list| {
            list.retain(|child| records.contains_key(child));
            !list.is_empty()
        });
        state.swept = state.records.len().max(state.caused.len());
    }
}

/// The gauge of the records held, for the metrics endpoint.
#[derive(Debug)]
pub(crate) struct RecordsHeld(pub(crate) std::sync::Arc<OwnWrites>);

impl std::fmt::Debug for OwnWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnWrites")
            .field("held", &self.held())
            .finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for RecordsHeld {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        let family = encoder.encode_descriptor(
            "concord_own_write_records",
            "The manager's own writes its caches do not show yet (read your own writes).",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        prometheus_client::metrics::gauge::ConstGauge::new(self.0.held() as i64).encode(family)
    }
}

#[cfg(test)]
#[path = "own_writes_tests.rs"]
mod tests;
