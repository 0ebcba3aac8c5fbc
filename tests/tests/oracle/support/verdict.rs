//! How a case ended.

/// How a case ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Stored exactly the race plus the mutation's effect.
    Exact,
    /// Failed as it should (recreated object, stale decision, a mutation
    /// the strategy refuses) and stored nothing.
    Refused(String),
    /// Anything else: the message says what differs.
    Violation(String),
}
