//! A write that did not happen, as every contender's writer reports it.

use concord::strategies::Error;

/// A write that did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    /// Whether a controller would requeue it (conflicts, throttling, server
    /// errors) rather than give up (validation errors such as a 422).
    pub(crate) retryable: bool,
}

impl Failure {
    /// Classify a kube-rs error.
    pub(crate) fn from_kube(err: &kube::Error) -> Self {
        let retryable = match err {
            kube::Error::Api(s) => matches!(s.code, 409 | 429 | 500..=599),
            _ => true,
        };
        Failure { retryable }
    }

    /// Classify a concord error.
    pub(crate) fn from_concord(err: &Error) -> Self {
        let retryable = matches!(
            err,
            Error::Conflict { .. }
                | Error::ConflictRetriesExhausted { .. }
                | Error::TransientRetriesExhausted { .. }
                | Error::Request { .. }
        );
        Failure { retryable }
    }
}
