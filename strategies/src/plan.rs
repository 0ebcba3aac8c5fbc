//! What a strategy is, as data: how its request is built, whether and how
//! it reads first, what a conflict means. Every strategy describes its
//! write as a [`Plan`]; one runner (`write_loop.rs`) carries every plan
//! out, so a write starts one way whatever the strategy.

use concord_featuregates::{ConflictPolicy, RetryPolicy, StrategyName};

use crate::LockTable;
use crate::request::Request;
use crate::write_loop::OnConflict;

/// A strategy's description of its writes, read by the one runner.
///
/// Its fields are the crate's own: a [`WriteStrategy`](crate::WriteStrategy)
/// is one of concord's strategies, never built elsewhere.
#[derive(Debug)]
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
        read: Read,
        lock: Option<&'a LockTable>,
        on_conflict: OnConflict<'a>,
    },
    /// Server-side apply, a field manager per intent (`apply.rs`), with a
    /// guarded fallback retried within the policy.
    Apply(&'a RetryPolicy),
    /// No strategy could be built: every write fails, naming why.
    Refused {
        policy: String,
        reason: &'static str,
    },
}

/// Whether a write reads the object before its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Never: the first request is built from the observed copy.
    Never,
    /// When the observed copy may lack stored fields (a typed object): a
    /// request that carries the whole object is built from the raw read.
    WhenIncomplete,
    /// Always (`locked`, inside its lock).
    Always,
}

impl<'a> Plan<'a> {
    /// Requests built by `request` from the observed copy, conflicts
    /// handled by `on_conflict`.
    pub(crate) fn new(
        name: StrategyName,
        verbs: &'static [&'static str],
        request: Request,
        on_conflict: OnConflict<'a>,
    ) -> Self {
        Plan {
            name,
            verbs,
            how: How::Loop {
                request,
                read: Read::Never,
                lock: None,
                on_conflict,
            },
        }
    }

    /// This plan reading the object first as `read` says, inside `lock`.
    pub(crate) fn reading(mut self, when: Read, under: Option<&'a LockTable>) -> Self {
        if let How::Loop { read, lock, .. } = &mut self.how {
            *read = when;
            *lock = under;
        }
        self
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
