//! What each strategy does, as data: the one place that says it.
//!
//! Configuration checks, the write runner, create and delete, RBAC and the
//! framework's start-up checks read a strategy's [`StrategyDescription`]
//! and never match on its name, so a new strategy is one new description
//! (and its tests): [`StrategyName`] and the enums here are exhaustive, so
//! the compiler names each place that must decide something about a new
//! strategy.

use crate::{Operation, StrategyName};

/// Everything concord asks of a strategy outside building its requests.
///
/// ```
/// use concord_featuregates::{Operation, RequestShape, StrategyName};
///
/// let update = StrategyName::Update.description();
/// assert_eq!(update.request, RequestShape::Put);
/// assert!(update.request.sends_whole_object());
/// assert!(update.accepts_requeue());
/// assert!(!StrategyName::Apply.description().serves(Operation::Other));
/// ```
// ANCHOR: description
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrategyDescription {
    /// The strategy described.
    pub name: StrategyName,
    /// What each request carries on the wire.
    pub request: RequestShape,
    /// Whether the object is read before the first request.
    pub reads: Reads,
    /// Whether the read and the request happen inside a lock of the object
    /// held by this process: an order among this process's writes only.
    pub locks: bool,
    /// What a `409 Conflict` (or a tripped guard) means.
    pub on_conflict: ConflictHandling,
    /// Whether a write's decision can depend on fields it does not write
    /// (`Mutation::depending_on`): the request carries a precondition that
    /// covers them.
    pub tests_dependencies: bool,
    /// Whether it carries arbitrary closures ([`Operation::Other`]); a
    /// strategy that can only express typed intents does not.
    pub carries_closures: bool,
    /// How it creates and deletes whole objects ([`Operation::Create`],
    /// [`Operation::Delete`]).
    pub whole_objects: WholeObjects,
    /// The RBAC verbs it needs on the written resource, besides the `list`
    /// and `watch` a controller needs anyway.
    pub verbs: &'static [&'static str],
}
// ANCHOR_END: description

/// What each request of a strategy carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestShape {
    /// A JSON merge patch, no precondition (`lax`).
    MergePatch,
    /// A JSON merge patch guarded by the observed uid only (`locked`).
    MergePatchWithUid,
    /// A JSON merge patch carrying the observed `resourceVersion` and uid
    /// (`strict`).
    MergePatchWithVersion,
    /// The whole object, `PUT` with its `resourceVersion` and uid
    /// (`update`).
    Put,
    /// A patch whose preconditions are exactly the fields and entries it
    /// writes, and the uid (`guarded`).
    GuardedPatch,
    /// Server-side apply, a field manager per intent (`apply`).
    ServerSideApply,
}

impl RequestShape {
    /// Whether the request carries the whole object, so a field the copy
    /// it was built from lacks would be dropped.
    pub const fn sends_whole_object(self) -> bool {
        matches!(self, RequestShape::Put)
    }

    /// Whether the server checks a precondition of any kind (uid,
    /// `resourceVersion`, field values, field ownership).
    pub const fn has_precondition(self) -> bool {
        !matches!(self, RequestShape::MergePatch)
    }
}

/// Whether a strategy reads the object before its first request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// Never: the first request is built from the observed copy.
    Never,
    /// When the observed copy may lack stored fields (a typed object) and
    /// the request carries the whole object.
    WhenIncomplete,
    /// Always, inside its lock.
    Always,
}

/// How a strategy creates and deletes whole objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WholeObjects {
    /// A create that meets an object of its name is an error, and a delete
    /// carries the copy's uid and `resourceVersion`: a copy that changed
    /// since it was read is a conflict (`strict`, `update`, `guarded`).
    Exact,
    /// A create that meets an object of its name counts as done, and a
    /// delete carries the copy's uid only, deleting whatever the object
    /// holds now (`lax`).
    Lenient,
    /// Not served (`locked`, `apply`).
    NotServed,
}

/// What a strategy does when the server reports a conflict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConflictHandling {
    /// Hands it back: the strategy has no version to re-read against
    /// (`lax`, `locked`). It takes only a retry policy, whose bounds it
    /// ignores.
    HandsBack,
    /// Re-reads and tries again within a retry policy, or hands it back at
    /// once under `requeue` (`strict`, `update`, `guarded`).
    PolicyDecides,
    /// Retries its guarded fallback within a retry policy; it cannot hand
    /// a conflict back to requeue (`apply`).
    RetriesFallback,
}

impl StrategyName {
    /// What this strategy does: the one place concord says it.
    pub const fn description(self) -> StrategyDescription {
        let get_patch: &'static [&'static str] = &["get", "patch"];
        match self {
            StrategyName::Lax => StrategyDescription {
                name: self,
                request: RequestShape::MergePatch,
                reads: Reads::Never,
                locks: false,
                on_conflict: ConflictHandling::HandsBack,
                tests_dependencies: false,
                carries_closures: true,
                whole_objects: WholeObjects::Lenient,
                verbs: get_patch,
            },
            StrategyName::Strict => StrategyDescription {
                name: self,
                request: RequestShape::MergePatchWithVersion,
                reads: Reads::Never,
                locks: false,
                on_conflict: ConflictHandling::PolicyDecides,
                tests_dependencies: true,
                carries_closures: true,
                whole_objects: WholeObjects::Exact,
                verbs: get_patch,
            },
            StrategyName::Update => StrategyDescription {
                name: self,
                request: RequestShape::Put,
                reads: Reads::WhenIncomplete,
                locks: false,
                on_conflict: ConflictHandling::PolicyDecides,
                tests_dependencies: true,
                carries_closures: true,
                whole_objects: WholeObjects::Exact,
                verbs: &["get", "update"],
            },
            StrategyName::Locked => StrategyDescription {
                name: self,
                // The uid guards against a recreated object; deliberately
                // no resourceVersion, which would make this `strict`.
                request: RequestShape::MergePatchWithUid,
                reads: Reads::Always,
                locks: true,
                on_conflict: ConflictHandling::HandsBack,
                tests_dependencies: false,
                carries_closures: true,
                whole_objects: WholeObjects::NotServed,
                verbs: get_patch,
            },
            StrategyName::Apply => StrategyDescription {
                name: self,
                request: RequestShape::ServerSideApply,
                reads: Reads::Never,
                locks: false,
                on_conflict: ConflictHandling::RetriesFallback,
                tests_dependencies: false,
                carries_closures: false,
                whole_objects: WholeObjects::NotServed,
                verbs: get_patch,
            },
            StrategyName::Guarded => StrategyDescription {
                name: self,
                request: RequestShape::GuardedPatch,
                reads: Reads::Never,
                locks: false,
                on_conflict: ConflictHandling::PolicyDecides,
                tests_dependencies: true,
                carries_closures: true,
                whole_objects: WholeObjects::Exact,
                verbs: get_patch,
            },
        }
    }
}

impl StrategyDescription {
    /// Whether the strategy takes a [`ConflictPolicy`](crate::ConflictPolicy)
    /// of its own: only a strategy whose conflicts the policy decides.
    pub const fn takes_conflict_policy(&self) -> bool {
        matches!(self.on_conflict, ConflictHandling::PolicyDecides)
    }

    /// Whether the strategy can hand a conflict back for the reconciler to
    /// requeue ([`ConflictPolicy::Requeue`](crate::ConflictPolicy::Requeue)).
    pub const fn accepts_requeue(&self) -> bool {
        self.takes_conflict_policy()
    }

    /// Whether the strategy can carry out `operation`.
    ///
    /// Creating or updating a whole owned child ([`Operation::ApplyOwned`])
    /// is served by server-side apply alone.
    pub const fn serves(&self, operation: Operation) -> bool {
        match operation {
            Operation::Other => self.carries_closures,
            Operation::ApplyOwned => matches!(self.request, RequestShape::ServerSideApply),
            Operation::Create | Operation::Delete => {
                !matches!(self.whole_objects, WholeObjects::NotServed)
            }
            Operation::AddFinalizer
            | Operation::RemoveFinalizer
            | Operation::Metadata
            | Operation::Status => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_description_names_its_strategy() {
        for name in StrategyName::ALL {
            assert_eq!(name.description().name, name);
        }
    }

    #[test]
    fn only_the_whole_object_strategy_reads_an_incomplete_copy_first() {
        for name in StrategyName::ALL {
            let d = name.description();
            assert_eq!(
                d.reads == Reads::WhenIncomplete,
                d.request.sends_whole_object(),
                "{name}"
            );
        }
    }

    #[test]
    fn a_lock_comes_with_a_read_inside_it() {
        for name in StrategyName::ALL {
            let d = name.description();
            assert_eq!(d.locks, d.reads == Reads::Always, "{name}");
        }
    }

    #[test]
    fn a_dependency_is_tested_only_where_a_conflict_is_met_and_decided() {
        for name in StrategyName::ALL {
            let d = name.description();
            if d.tests_dependencies {
                assert!(d.takes_conflict_policy(), "{name}");
                assert!(d.request.has_precondition(), "{name}");
            }
        }
    }
}
