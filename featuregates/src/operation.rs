use std::fmt;
use std::str::FromStr;

/// The kind of change a reconciler asks for; the strategy table is keyed by
/// resource and operation.
///
/// ```
/// use concord_featuregates::Operation;
/// assert_eq!("remove-finalizer".parse(), Ok(Operation::RemoveFinalizer));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Operation {
    /// Adding a finalizer to `metadata.finalizers`.
    AddFinalizer,
    /// Removing a finalizer from `metadata.finalizers`.
    RemoveFinalizer,
    /// Setting or removing labels and annotations.
    Metadata,
    /// Changing the status subresource.
    Status,
    /// Any other mutation, expressed as a closure.
    Other,
    /// Creating or updating a whole child object the reconciler owns
    /// (`Context::apply_owned`): only server-side apply (`apply`) serves it,
    /// and a resource's or the global `default` does not cover it — its
    /// built-in strategy is `apply`.
    ApplyOwned,
    /// Creating an object (`Context::create`, `create_owned`): one `POST`.
    /// Served by `lax` (an object that already exists counts as done),
    /// `strict`, `update` and `guarded` (it is an error); a `default` does
    /// not cover it — its built-in strategy is `strict`.
    Create,
    /// Deleting an object (`Context::delete`): one `DELETE` with the
    /// copy's uid as a precondition, and its `resourceVersion` too under
    /// `strict`, `update` and `guarded` (`lax` deletes whatever the copy's
    /// object now holds). A `default` does not cover it — its built-in
    /// strategy is `strict`.
    Delete,
}

impl Operation {
    /// Every operation, in table order.
    pub const ALL: [Operation; 8] = [
        Operation::AddFinalizer,
        Operation::RemoveFinalizer,
        Operation::Metadata,
        Operation::Status,
        Operation::Other,
        Operation::ApplyOwned,
        Operation::Create,
        Operation::Delete,
    ];

    /// The configuration spelling of this operation.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::AddFinalizer => "add-finalizer",
            Operation::RemoveFinalizer => "remove-finalizer",
            Operation::Metadata => "metadata",
            Operation::Status => "status",
            Operation::Other => "other",
            Operation::ApplyOwned => "apply-owned",
            Operation::Create => "create",
            Operation::Delete => "delete",
        }
    }

    /// A dense index in `0..Operation::ALL.len()`, for table lookups without
    /// hashing.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Whether a resource's or the global `default` decides this
    /// operation's cell. It does not for `apply-owned`, `create` and
    /// `delete`: not every strategy serves them, so only a rule that names
    /// the operation does, else its built-in strategy.
    pub const fn follows_default(self) -> bool {
        !matches!(
            self,
            Operation::ApplyOwned | Operation::Create | Operation::Delete
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error returned when a string names no operation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown operation `{0}` (expected one of add-finalizer, remove-finalizer, metadata, status, other, apply-owned, create, delete)"
)]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| UnknownOperation(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_round_trip_and_index_densely() {
        for (i, op) in Operation::ALL.into_iter().enumerate() {
            assert_eq!(op.as_str().parse::<Operation>(), Ok(op));
            assert_eq!(op.index(), i);
        }
    }
}
