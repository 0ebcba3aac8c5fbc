use std::path::PathBuf;

use crate::{Operation, Origin, StrategyName};

/// One mistake found while loading the configuration. A
/// [`ConfigError`](crate::ConfigError) carries every problem found, and each
/// names where the bad value came from.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// A configuration file could not be read.
    #[error("cannot read config file `{}`: {reason}", path.display())]
    UnreadableFile {
        /// The file.
        path: PathBuf,
        /// The operating system's explanation.
        reason: String,
    },
    /// A configuration file is not UTF-8 text.
    #[error("config file `{}` is not valid UTF-8 (bad byte at offset {offset})", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The offset of the first invalid byte.
        offset: usize,
    },
    /// A configuration file is not well-formed YAML, or not a YAML mapping.
    #[error("malformed YAML in config file `{}`: {message}", path.display())]
    MalformedYaml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column when it knows them.
        message: String,
    },
    /// A key that the schema does not know.
    #[error("unknown key `{key}`, expected one of {expected} ({origin})")]
    UnknownKey {
        /// The unknown key (the last path segment).
        key: String,
        /// The keys allowed here.
        expected: &'static str,
        /// Where it was found.
        origin: Origin,
    },
    /// A value of the wrong YAML type.
    #[error("expected {expected}, found {found} ({origin})")]
    WrongType {
        /// What the schema wants here.
        expected: &'static str,
        /// What was found.
        found: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A gate name that is not registered.
    #[error("unknown feature gate `{name}` ({origin})")]
    UnknownGate {
        /// The unknown name.
        name: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A locked gate set against its default.
    #[error("feature gate `{name}` is locked to {} and cannot be set to {value} ({origin})", !value)]
    LockedGate {
        /// The gate.
        name: &'static str,
        /// The value asked for.
        value: bool,
        /// Where it was asked for.
        origin: Origin,
    },
    /// A gate value that is not a boolean.
    #[error("feature gate `{name}` must be true or false, found {found} ({origin})")]
    NotBoolean {
        /// The gate.
        name: String,
        /// The value found.
        found: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A `--feature-gates` item without `=value`.
    #[error("missing bool value for `{name}` ({origin})")]
    MissingGateValue {
        /// The gate named without a value.
        name: String,
        /// The flag or variable.
        origin: Origin,
    },
    /// A strategy name that is not one of lax, strict, update, locked, apply, guarded.
    #[error(
        "unknown strategy `{name}`, expected one of lax, strict, update, locked, apply, guarded ({origin})"
    )]
    UnknownStrategy {
        /// The unknown name.
        name: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A resource key in none of the accepted forms.
    #[error(
        "unknown resource form `{form}`, expected plural[.group] (`pods`, `workloads.kueue.x-k8s.io`), group/version/Kind (`apps/v1/Deployment`, `v1/Pod`) or group/Kind (`apps/Deployment`) ({origin})"
    )]
    UnknownResourceForm {
        /// The key as written.
        form: String,
        /// Where it was found.
        origin: Origin,
    },
    /// An operation name that is not known.
    #[error(
        "unknown operation `{name}`, expected one of add-finalizer, remove-finalizer, metadata, status, other, apply-owned, create, delete ({origin})"
    )]
    UnknownOperation {
        /// The unknown name.
        name: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A strategy chosen for an operation it cannot carry out.
    #[error(
        "strategy `{strategy}` cannot serve operation `{operation}`: {} ({origin})",
        unservable_because(.operation)
    )]
    UnservableOperation {
        /// The strategy.
        strategy: StrategyName,
        /// The operation.
        operation: Operation,
        /// The rule that chose it.
        origin: Origin,
    },
    /// A conflict policy given to a strategy that never meets `409 Conflict`.
    #[error(
        "strategy `{strategy}` takes no conflict policy, only strict, update and guarded do ({origin})"
    )]
    UnexpectedConflictPolicy {
        /// The strategy.
        strategy: StrategyName,
        /// Where the policy was given.
        origin: Origin,
    },
    /// A conflict policy that is neither `retry` nor `requeue`.
    #[error("unknown conflict policy `{name}`, expected retry or requeue ({origin})")]
    UnknownConflictPolicy {
        /// The unknown name.
        name: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A retry setting out of range or unparsable.
    #[error("invalid retry setting: {message} ({origin})")]
    InvalidRetry {
        /// What is wrong.
        message: String,
        /// Where it was found.
        origin: Origin,
    },
    /// A strategy rule whose keys do not fit together.
    #[error("invalid strategy rule: {message} ({origin})")]
    InvalidRule {
        /// What is wrong.
        message: &'static str,
        /// Where it was found.
        origin: Origin,
    },
}

impl Problem {
    /// Where the offending value came from, when the problem is about one
    /// value (file-level problems name their file in the message instead).
    pub fn origin(&self) -> Option<&Origin> {
        match self {
            Problem::UnreadableFile { .. }
            | Problem::NotUtf8 { .. }
            | Problem::MalformedYaml { .. } => None,
            Problem::UnknownKey { origin, .. }
            | Problem::WrongType { origin, .. }
            | Problem::UnknownGate { origin, .. }
            | Problem::LockedGate { origin, .. }
            | Problem::NotBoolean { origin, .. }
            | Problem::MissingGateValue { origin, .. }
            | Problem::UnknownStrategy { origin, .. }
            | Problem::UnknownResourceForm { origin, .. }
            | Problem::UnknownOperation { origin, .. }
            | Problem::UnservableOperation { origin, .. }
            | Problem::UnexpectedConflictPolicy { origin, .. }
            | Problem::UnknownConflictPolicy { origin, .. }
            | Problem::InvalidRetry { origin, .. }
            | Problem::InvalidRule { origin, .. } => Some(origin),
        }
    }
}

/// Why a strategy cannot serve `operation` (see [`StrategyDescription::serves`](crate::StrategyDescription::serves)).
fn unservable_because(operation: &Operation) -> &'static str {
    match operation {
        Operation::ApplyOwned => {
            "only server-side apply (`apply`) can create or update a whole owned child"
        }
        Operation::Create | Operation::Delete => {
            "only `lax`, `strict`, `update` and `guarded` create and delete objects"
        }
        _ => "server-side apply cannot express an arbitrary closure",
    }
}
