//! Request counters for the contenders that bypass concord's metrics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use concord::strategies::{MetricsSnapshot, Verb};

/// What the bare kube-rs contenders sent, counted like
/// [`WriteMetrics`](concord::strategies::WriteMetrics) counts concord's.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    requests: [AtomicU64; Verb::ALL.len()],
    conflicts: AtomicU64,
    retries: AtomicU64,
}

/// Requests, conflicts and retries of one contender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Requests by verb (see [`Verb::index`]).
    pub(crate) requests: [u64; Verb::ALL.len()],
    pub(crate) conflicts: u64,
    pub(crate) retries: u64,
    /// `apply` removals sent as its guarded JSON-patch fallback.
    pub(crate) fallbacks: u64,
    /// Re-reads after a conflict served from concord's watch cache; `None`
    /// for contenders that do not count them (not concord).
    pub(crate) cache_rereads: Option<u64>,
    /// Re-reads after a conflict sent as a `GET`, where counted.
    pub(crate) get_rereads: Option<u64>,
}

impl From<&MetricsSnapshot> for Counts {
    fn from(s: &MetricsSnapshot) -> Self {
        Counts {
            requests: s.requests,
            conflicts: s.conflicts,
            retries: s.retries,
            fallbacks: s.fell_back,
            cache_rereads: Some(s.rereads_from_cache),
            get_rereads: Some(s.rereads_by_get),
        }
    }
}

impl Tally {
    /// Count one request.
    pub(crate) fn request(&self, verb: Verb) {
        self.requests[verb.index()].fetch_add(1, Relaxed);
    }

    /// Count one `409 Conflict`.
    pub(crate) fn conflict(&self) {
        self.conflicts.fetch_add(1, Relaxed);
    }

    /// Count one attempt after the first.
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Relaxed);
    }

    /// The counts so far.
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            requests: std::array::from_fn(|i| self.requests[i].load(Relaxed)),
            conflicts: self.conflicts.load(Relaxed),
            retries: self.retries.load(Relaxed),
            fallbacks: 0,
            cache_rereads: None,
            get_rereads: None,
        }
    }
}
