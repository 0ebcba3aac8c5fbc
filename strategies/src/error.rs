use concord_featuregates::StrategyName;

use crate::ObjectKey;

/// Why a write did not complete.
///
/// Every variant names the object; none is retried by the caller's strategy
/// any further — the variant tells the controller what to do next
/// (requeue on [`Error::Conflict`], give up on [`Error::Rejected`], forget
/// the object on [`Error::ObjectRecreated`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The object changed since it was read and the conflict policy is
    /// `requeue`: the controller should reconcile it afresh.
    #[error("conflict writing {object}: it changed since it was read")]
    Conflict {
        /// The object written.
        object: ObjectKey,
    },
    /// `409 Conflict` kept coming back until the retry policy ran out.
    #[error("conflict retries exhausted writing {object} after {attempts} attempts")]
    ConflictRetriesExhausted {
        /// The object written.
        object: ObjectKey,
        /// Attempts made, the first one included.
        attempts: u32,
    },
    /// The API server kept answering `429` or `5xx` until the retry policy
    /// ran out.
    #[error("transient failures exhausted retries writing {object} after {attempts} attempts")]
    TransientRetriesExhausted {
        /// The object written.
        object: ObjectKey,
        /// Attempts made, the first one included.
        attempts: u32,
        /// The last failure.
        #[source]
        source: Box<kube::Error>,
    },
    /// The object was deleted and another one created under the same name;
    /// the write was not made to the new object.
    #[error("{object} was recreated: observed uid {observed}, found uid {found}")]
    ObjectRecreated {
        /// The object written.
        object: ObjectKey,
        /// The uid the caller observed.
        observed: String,
        /// The uid the API server holds now, empty if unknown.
        found: String,
    },
    /// The object no longer exists (only an error for mutations other than
    /// finalizer removal, for which a missing object means done).
    #[error("{object} not found")]
    NotFound {
        /// The object written.
        object: ObjectKey,
    },
    /// A create found an object of that name already stored (only an
    /// error for strategies other than `lax`, for which it counts as done).
    #[error("{object} already exists")]
    AlreadyExists {
        /// The object created.
        object: ObjectKey,
    },
    /// The API server refused the write for good (400, 403, 422, ...); it is
    /// never retried.
    #[error("api server rejected the write to {object}")]
    Rejected {
        /// The object written.
        object: ObjectKey,
        /// The API server's answer.
        #[source]
        source: Box<kube::Error>,
    },
    /// The request could not be sent or its answer not read.
    #[error("request for {object} failed")]
    Request {
        /// The object written.
        object: ObjectKey,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The strategy cannot express this mutation (server-side apply and
    /// arbitrary closures).
    #[error("strategy {strategy} cannot carry out {what} on {object}")]
    UnsupportedMutation {
        /// The strategy asked.
        strategy: StrategyName,
        /// What it was asked to do.
        what: &'static str,
        /// The object written.
        object: ObjectKey,
    },
    /// One mutation mixed status changes with main-resource changes; the two
    /// go to different endpoints and must be separate writes.
    #[error("mutation of {object} mixes status and main-resource changes")]
    MixedSubresources {
        /// The object written.
        object: ObjectKey,
    },
    /// The observed object lacks a field the strategy needs (name, uid or
    /// resourceVersion).
    #[error("observed {object} has no {field}")]
    MissingField {
        /// The object written.
        object: ObjectKey,
        /// The missing field, e.g. `metadata.uid`.
        field: &'static str,
    },
    /// Converting between the typed object and JSON failed, or a typed
    /// closure received JSON it could not read.
    #[error("converting {object} to or from json failed")]
    Convert {
        /// The object written.
        object: ObjectKey,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A status change written through the main resource (the resource
    /// had no status subresource) is not in the stored object the server
    /// answered, and discovery still lists no status subresource: the
    /// server dropped or rewrote it (a subresource discovery does not show
    /// yet, pruning, a webhook). Never reported as written; a retry asks
    /// discovery again.
    #[error("the api server did not store the status change to {object}")]
    StatusNotStored {
        /// The object written.
        object: ObjectKey,
    },
    /// No strategy can be built for this name and conflict policy: an
    /// unknown strategy, or a policy the strategy cannot honour (a
    /// `requeue` policy on `apply`, `lax` or `locked`). Never a quiet
    /// downgrade to another strategy.
    #[error("strategy {strategy} cannot be built with conflict policy {policy}: {reason}")]
    UnsupportedStrategy {
        /// The strategy named.
        strategy: StrategyName,
        /// The conflict policy given, as debug text.
        policy: String,
        /// Why the combination is refused.
        reason: &'static str,
    },
    /// An owner reference the garbage collector would act on wrongly: an
    /// owner in another namespace than its child, or a namespaced owner of
    /// a cluster-scoped child. The collector treats such an owner as absent
    /// and deletes the child, so nothing is sent.
    #[error("{object} cannot be owned by {owner}: {rule}")]
    InvalidOwner {
        /// The child that was to be written.
        object: ObjectKey,
        /// The owner, as `namespace/name` or `name`.
        owner: String,
        /// The rule the pair breaks.
        rule: &'static str,
    },
}

impl Error {
    /// Whether the controller should requeue the object and reconcile it
    /// again (conflicts and transient failures), as opposed to a permanent
    /// failure.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Conflict { .. }
                | Error::ConflictRetriesExhausted { .. }
                | Error::TransientRetriesExhausted { .. }
                | Error::Request { .. }
                | Error::StatusNotStored { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_object_and_are_lowercase() {
        let object = ObjectKey::new("pods", Some("ns"), "p");
        let err = Error::ConflictRetriesExhausted {
            object,
            attempts: 5,
        };
        assert_eq!(
            err.to_string(),
            "conflict retries exhausted writing pods ns/p after 5 attempts"
        );
        assert!(err.is_retryable());
    }
}
