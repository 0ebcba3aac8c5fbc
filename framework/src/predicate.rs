//! Which watch events reach a controller's queue.

use std::fmt;
use std::sync::Arc;

use kube::{Resource, ResourceExt};

type Test<K> = dyn Fn(Option<&K>, &K) -> bool + Send + Sync;

/// Decides, for each object the shared watch delivers, whether a
/// controller queues it: `old` is the copy the cache held before (`None`
/// for an object it did not hold: created, or first listed), `new` the one
/// it holds now. The default ([`Predicate::always`]) queues every change.
///
/// Predicates compose with [`and`](Self::and) and [`or`](Self::or); they
/// filter watch events only: a requeue the reconciler asked for
/// ([`Action::requeue`](crate::Action::requeue)) and a retry after an
/// error are never filtered, and neither is the start of a deletion of an
/// object that holds a finalizer (see [`passes`](Self::passes)).
///
/// ```
/// use concord::Predicate;
/// use k8s_openapi::api::core::v1::Pod;
/// // Spec changes, and label changes (a selector moved).
/// let predicate = Predicate::<Pod>::generation_changed().or(Predicate::labels_changed());
/// # let _ = predicate;
/// ```
///
/// # Caveats
///
/// The comparison is with the copy the cache held, so several changes
/// made between two watch events are judged together, and an object the
/// cache lost and listed again (a relist after the watch expired) is
/// compared with its copy before the gap.
pub struct Predicate<K>(Arc<Test<K>>);

impl<K> Clone for Predicate<K> {
    fn clone(&self) -> Self {
        Predicate(self.0.clone())
    }
}

impl<K> fmt::Debug for Predicate<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Predicate")
    }
}

impl<K: Resource + 'static> Predicate<K> {
    /// A predicate over `(old, new)`; `old` is `None` for an object the
    /// cache did not hold.
    pub fn new(test: impl Fn(Option<&K>, &K) -> bool + Send + Sync + 'static) -> Self {
        Predicate(Arc::new(test))
    }

    /// Every event (the default).
    pub fn always() -> Self {
        Predicate::new(|_, _| true)
    }

    /// New objects, and objects whose `metadata.generation` moved (the API
    /// server moves it on spec changes, not on status or metadata ones) or
    /// whose deletion started, as controller-runtime's
    /// `GenerationChangedPredicate` (which does not pass the deletion).
    ///
    /// # Caveats
    ///
    /// Objects without a generation (ConfigMaps, Secrets) pass only when
    /// new or deleted.
    pub fn generation_changed() -> Self {
        Predicate::new(|old: Option<&K>, new: &K| match old {
            None => true,
            Some(old) => {
                old.meta().generation != new.meta().generation
                    || old.meta().deletion_timestamp != new.meta().deletion_timestamp
            }
        })
    }

    /// New objects, and objects whose labels changed.
    pub fn labels_changed() -> Self {
        Predicate::new(|old: Option<&K>, new: &K| {
            old.is_none_or(|old| old.labels() != new.labels())
        })
    }

    /// New objects, and objects whose annotations changed.
    pub fn annotations_changed() -> Self {
        Predicate::new(|old: Option<&K>, new: &K| {
            old.is_none_or(|old| old.annotations() != new.annotations())
        })
    }

    /// Events both `self` and `other` pass.
    #[must_use]
    pub fn and(self, other: Predicate<K>) -> Self {
        Predicate::new(move |old, new| (self.0)(old, new) && (other.0)(old, new))
    }

    /// Events `self` or `other` passes.
    #[must_use]
    pub fn or(self, other: Predicate<K>) -> Self {
        Predicate::new(move |old, new| (self.0)(old, new) || (other.0)(old, new))
    }

    /// Whether the change from `old` to `new` is queued: what the test
    /// says, except that the start of a deletion of an object carrying
    /// finalizers always passes.
    ///
    /// # Guarantees
    ///
    /// A finalizer's cleanup cannot be filtered away: an object whose
    /// `deletionTimestamp` was just set while it holds a finalizer reaches
    /// the reconciler whatever the predicate says (a controller-runtime
    /// predicate that drops it leaves the object terminating for ever).
    pub fn passes(&self, old: Option<&K>, new: &K) -> bool {
        deletion_started(old, new) || (self.0)(old, new)
    }
}

/// Whether `new` began its deletion since `old` (or is first seen
/// deleting) and holds a finalizer someone must remove.
fn deletion_started<K: Resource>(old: Option<&K>, new: &K) -> bool {
    new.meta().deletion_timestamp.is_some()
        && !new.finalizers().is_empty()
        && old.is_none_or(|old| old.meta().deletion_timestamp.is_none())
}

/// Events the predicate refuses: `!Predicate::labels_changed()`.
impl<K: Resource + 'static> std::ops::Not for Predicate<K> {
    type Output = Predicate<K>;

    fn not(self) -> Predicate<K> {
        Predicate::new(move |old, new| !(self.0)(old, new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    fn pod(generation: i64, label: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.generation = Some(generation);
        pod.metadata.labels = Some([("l".to_owned(), label.to_owned())].into());
        pod
    }

    #[test]
    fn generation_changed_passes_new_objects_and_spec_changes_only() {
        let p = Predicate::<Pod>::generation_changed();
        assert!(p.passes(None, &pod(1, "a")));
        assert!(!p.passes(Some(&pod(1, "a")), &pod(1, "b")));
        assert!(p.passes(Some(&pod(1, "a")), &pod(2, "a")));
        let mut deleted = pod(1, "a");
        deleted.metadata.deletion_timestamp =
            Some(serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap());
        assert!(p.passes(Some(&pod(1, "a")), &deleted));
    }

    #[test]
    fn no_predicate_filters_the_start_of_a_finalized_deletion() {
        let nothing = Predicate::<Pod>::new(|_, _| false);
        let mut deleting = pod(1, "a");
        deleting.metadata.deletion_timestamp =
            Some(serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap());
        assert!(
            !nothing.passes(Some(&pod(1, "a")), &deleting),
            "without a finalizer the predicate decides"
        );
        deleting.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
        assert!(nothing.passes(Some(&pod(1, "a")), &deleting));
        assert!(nothing.passes(None, &deleting));
        assert!(
            !nothing.passes(Some(&deleting), &deleting),
            "only the start of the deletion is forced through"
        );
        assert!(!(!Predicate::<Pod>::always()).passes(Some(&deleting), &deleting));
    }

    #[test]
    fn predicates_compose() {
        let either = Predicate::<Pod>::generation_changed().or(Predicate::labels_changed());
        assert!(either.passes(Some(&pod(1, "a")), &pod(1, "b")));
        assert!(!either.passes(Some(&pod(1, "a")), &pod(1, "a")));
        let both = Predicate::<Pod>::generation_changed().and(Predicate::labels_changed());
        assert!(!both.passes(Some(&pod(1, "a")), &pod(2, "a")));
        assert!(both.passes(Some(&pod(1, "a")), &pod(2, "b")));
        assert!(Predicate::<Pod>::always().passes(Some(&pod(1, "a")), &pod(1, "a")));
        assert!(!(!Predicate::<Pod>::always()).passes(None, &pod(1, "a")));
        let custom =
            Predicate::<Pod>::new(|_, new| new.labels().get("l").is_some_and(|v| v == "b"));
        assert!(custom.passes(None, &pod(1, "b")));
    }
}
