use std::time::Duration;

use concord_featuregates::StrategyName;

/// The HTTP verbs a strategy uses, as counted in [`Outcome`] and
/// [`WriteMetrics`](crate::WriteMetrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// `GET` of the object.
    Get,
    /// `PATCH` with a merge or JSON patch.
    Patch,
    /// `PUT` of the whole object.
    Update,
    /// `PATCH` with a server-side apply configuration.
    Apply,
    /// `POST` of a new object.
    Create,
    /// `DELETE` of an object.
    Delete,
}

impl Verb {
    /// Every verb, in index order.
    pub const ALL: [Verb; 6] = [
        Verb::Get,
        Verb::Patch,
        Verb::Update,
        Verb::Apply,
        Verb::Create,
        Verb::Delete,
    ];

    /// The metrics-label spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Patch => "patch",
            Verb::Update => "update",
            Verb::Apply => "apply",
            Verb::Create => "create",
            Verb::Delete => "delete",
        }
    }

    /// A dense index in `0..Verb::ALL.len()`.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// Why a write sent another request than its strategy's usual one, as
/// counted in [`MetricsSnapshot::fallbacks`](crate::MetricsSnapshot) and
/// the `reason` label of `concord_write_fallbacks_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fallback {
    /// `apply` sent a guarded JSON patch: a mutation one apply request
    /// cannot carry (several changes, a status change, a condition on an
    /// atomic list), or the removal of an entry another manager co-owns.
    GuardedPatch,
    /// `guarded` (or `apply`'s guarded patch) sent `strict`'s
    /// `resourceVersion`-preconditioned patch: its JSON patch would have
    /// exceeded the API server's limit of 10,000 operations, or the server
    /// refused it for its size (`413`).
    OperationLimit,
}

impl Fallback {
    /// Every reason, in index order.
    pub const ALL: [Fallback; 2] = [Fallback::GuardedPatch, Fallback::OperationLimit];

    /// The metrics-label spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Fallback::GuardedPatch => "guarded_patch",
            Fallback::OperationLimit => "operation_limit",
        }
    }

    /// A dense index in `0..Fallback::ALL.len()`.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// How a write went: what it cost and what it met on the way.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Outcome {
    /// The strategy that carried the write out.
    pub strategy: StrategyName,
    /// Requests sent, by verb (see [`Verb::index`]).
    pub requests: [u32; Verb::ALL.len()],
    /// `409 Conflict` answers (and failed JSON-patch `test` guards).
    pub conflicts: u32,
    /// Attempts after the first, for any reason.
    pub retries: u32,
    /// `429 Too Many Requests` answers.
    pub throttled: u32,
    /// Wall time from the call to its return, backoff included.
    pub elapsed: Duration,
    /// Nothing needed changing, so no write was sent.
    pub unchanged: bool,
    /// The object was gone while its finalizers were being removed, or
    /// before a delete of it (its uid was no longer stored), which counts as
    /// done.
    pub gone: bool,
    /// The write sent another request than its strategy's usual one:
    /// `apply` a guarded JSON patch, `guarded` the `resourceVersion`-
    /// preconditioned patch; why is in [`fallback`](Self::fallback).
    pub fell_back: bool,
    /// Why the write [fell back](Self::fell_back), the last reason if
    /// several.
    pub fallback: Option<Fallback>,
    /// Re-reads after a conflict served from the target's
    /// [fresh copies](crate::Target::with_fresh_copies) (no request).
    pub rereads_from_cache: u32,
    /// Re-reads after a conflict that sent a `GET` (also counted in
    /// [`requests`](Self::requests) under [`Verb::Get`]).
    pub rereads_by_get: u32,
    /// The write started from the copy this process's previous write of the
    /// same object stored, newer than the copy it was given (see
    /// [`Strict`](crate::Strict), "Taking turns"): a conflict avoided.
    pub rebased_on_own_write: bool,
}

impl Outcome {
    /// An empty outcome for `strategy`.
    pub fn new(strategy: StrategyName) -> Self {
        Outcome {
            strategy,
            requests: [0; Verb::ALL.len()],
            conflicts: 0,
            retries: 0,
            throttled: 0,
            elapsed: Duration::ZERO,
            unchanged: false,
            gone: false,
            fell_back: false,
            fallback: None,
            rereads_from_cache: 0,
            rereads_by_get: 0,
            rebased_on_own_write: false,
        }
    }

    /// Record that the write fell back, for `reason`.
    pub(crate) fn fall_back(&mut self, reason: Fallback) {
        self.fell_back = true;
        self.fallback = Some(reason);
    }

    /// Requests sent with `verb`.
    pub fn requests(&self, verb: Verb) -> u32 {
        self.requests[verb.index()]
    }

    /// Requests sent in all.
    pub fn total_requests(&self) -> u32 {
        self.requests.iter().sum()
    }
}

/// A completed write: the object as the API server stored it and how the
/// write went.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Written<K> {
    /// The stored object; `None` only when the object was gone during
    /// finalizer removal ([`Outcome::gone`]), or after a delete that removed
    /// it (a delete that leaves it terminating, for its finalizers, hands
    /// it back with its `deletionTimestamp`). When nothing changed, the
    /// freshest copy the strategy saw.
    pub object: Option<K>,
    /// What the write cost.
    pub outcome: Outcome,
}

impl<K> Written<K> {
    /// A completed write.
    pub fn new(object: Option<K>, outcome: Outcome) -> Self {
        Written { object, outcome }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_requests_sums_every_verb() {
        let mut o = Outcome::new(StrategyName::Strict);
        o.requests[Verb::Get.index()] = 1;
        o.requests[Verb::Patch.index()] = 2;
        assert_eq!(o.total_requests(), 3);
        assert_eq!(o.requests(Verb::Patch), 2);
    }
}
