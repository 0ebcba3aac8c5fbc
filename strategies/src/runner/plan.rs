//! What a strategy is, as data: how its request is built, whether and how
//! it reads first, what a conflict means. Every strategy describes its
//! write as a [`Plan`]; one runner (`runner/write_loop.rs`) carries every plan
//! out, so a write starts one way whatever the strategy.

use concord_featuregates::{
    ConflictHandling, ConflictPolicy, Reads, RequestShape, RetryPolicy, StrategyName,
};

use crate::LockTable;
use crate::body::request::Request;

/// A strategy's description of its writes, read by the one runner.
///
/// Its fields are the crate's own: a [`WriteStrategy`](crate::WriteStrategy)
/// is one of concord's strategies, never built elsewhere (the trait is
/// sealed), so the type is public only to name it in the sealed trait.
#[derive(Debug)]
#[allow(unreachable_pub)]
pub struct Plan<'a> {
    pub(crate) name: StrategyName,
    pub(crate) verbs: &'static [&'static str],
    pub(crate) how: How<'a>,
}

/// How the runner carries a plan out.
#[derive(Debug)]
pub(crate) enum How<'a> {
    /// Build every request from the freshest copy with `request`.
    Loop {
        request: Request,
        read: Reads,
        lock: Option<&'a LockTable>,
        on_conflict: OnConflict<'a>,
    },
    /// Server-side apply, a field manager per intent (`strategy/apply.rs`), with a
    /// guarded fallback retried within the policy.
    Apply(&'a RetryPolicy),
    /// No strategy could be built: every write fails, naming why.
    Refused {
        policy: String,
        reason: &'static str,
    },
}

/// What a strategy does on `409 Conflict` (or a tripped guard).
#[derive(Clone, Copy, Debug)]
pub(crate) enum OnConflict<'p> {
    /// Hand it back as [`Error::Conflict`]: the strategy has no version to
    /// re-read against (`lax`, `locked`) or its policy says requeue.
    Fail,
    /// Re-read and try again within the policy.
    Reread(&'p ConflictPolicy),
}

impl<'a> Plan<'a> {
    /// The plan of the strategy called `name`, read from its
    /// [description](concord_featuregates::StrategyDescription): its
    /// request, its read, its lock and what a conflict means. `policy` is
    /// the strategy's conflict policy (ignored by one that hands conflicts
    /// back), `lock` the table a locking strategy holds its lock in.
    pub(crate) fn of(
        name: StrategyName,
        policy: &'a ConflictPolicy,
        lock: Option<&'a LockTable>,
    ) -> Self {
        let description = name.description();
        let request = match description.request {
            RequestShape::MergePatch => Request::Merge,
            RequestShape::MergePatchWithUid => Request::MergeWithUid,
            RequestShape::MergePatchWithVersion => Request::MergeWithVersion,
            RequestShape::Put => Request::Put,
            RequestShape::GuardedPatch => Request::Guarded,
            RequestShape::ServerSideApply => {
                return match policy {
                    ConflictPolicy::Retry(retry) => Plan {
                        name,
                        verbs: description.verbs,
                        how: How::Apply(retry),
                    },
                    _ => Plan::refused(name, format!("{policy:?}"), REQUEUE_REFUSED),
                };
            }
        };
        let on_conflict = match description.on_conflict {
            ConflictHandling::HandsBack => OnConflict::Fail,
            ConflictHandling::PolicyDecides | ConflictHandling::RetriesFallback => {
                OnConflict::Reread(policy)
            }
        };
        Plan {
            name,
            verbs: description.verbs,
            how: How::Loop {
                request,
                read: description.reads,
                lock: lock.filter(|_| description.locks),
                on_conflict,
            },
        }
    }

    /// A plan whose every write fails with [`Error::UnsupportedStrategy`](crate::Error::UnsupportedStrategy).
    pub(crate) fn refused(name: StrategyName, policy: String, reason: &'static str) -> Self {
        Plan {
            name,
            verbs: &[],
            how: How::Refused { policy, reason },
        }
    }

    /// Whether a conflict is handed back at once under this plan.
    pub(crate) fn requeues(&self) -> bool {
        matches!(
            self.how,
            How::Loop {
                on_conflict: OnConflict::Reread(ConflictPolicy::Requeue),
                ..
            }
        )
    }
}

/// The policy of a strategy that hands every conflict back (`lax`,
/// `locked`): it has no version to re-read against.
pub(crate) const HANDED_BACK: &ConflictPolicy = &ConflictPolicy::Requeue;

/// Why a strategy that cannot hand a conflict back is refused `requeue`.
pub(crate) const REQUEUE_REFUSED: &str =
    "only `strict`, `update` and `guarded` can hand a conflict back to requeue";
