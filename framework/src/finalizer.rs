//! The add / clean up / remove finalizer lifecycle ([`finalizer()`]),
//! each write through the strategy table.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use crate::Action;
use kube::ResourceExt;

use crate::{Context, object::AnyObject};

/// What the finalizer lifecycle asks the author's handler to do.
#[derive(Debug)]
pub enum Lifecycle<K> {
    /// The object is live and carries the finalizer: reconcile it.
    Apply(Arc<K>),
    /// The object is being deleted: clean up whatever it owns outside
    /// Kubernetes. The finalizer is removed once this returns `Ok`.
    Cleanup(Arc<K>),
}

/// Why the finalizer lifecycle failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizerError<E: std::error::Error + 'static> {
    /// Adding the finalizer failed.
    #[error("adding finalizer {finalizer} failed")]
    AddFinalizer {
        /// The finalizer.
        finalizer: String,
        /// The write error.
        #[source]
        source: concord_strategies::Error,
    },
    /// Removing the finalizer after a successful cleanup failed.
    #[error("removing finalizer {finalizer} failed")]
    RemoveFinalizer {
        /// The finalizer.
        finalizer: String,
        /// The write error.
        #[source]
        source: concord_strategies::Error,
    },
    /// The author's handler failed; the finalizer stays.
    #[error("reconcile handler failed")]
    Handler(#[source] E),
}

/// Runs the finalizer lifecycle around `handler`:
///
/// - a live object without `finalizer` gets it added (through the strategy
///   configured for `add-finalizer`), then goes on to
///   `handler(Lifecycle::Apply)` with the stored copy in the same call — it
///   never waits for the watch to bring the finalizer's change back, which
///   a predicate may filter;
/// - a live object with it goes to `handler(Lifecycle::Apply)`;
/// - an object being deleted goes to `handler(Lifecycle::Cleanup)`, and when
///   that succeeds the finalizer is removed (through the strategy configured
///   for `remove-finalizer`);
/// - an object being deleted without our finalizer is left alone.
///
/// # Guarantees
///
/// The finalizer is only removed after a successful cleanup, and only our
/// entry: other finalizers survive whenever the configured strategy is a
/// safe one (`strict`, `update`, `guarded`, `apply`, or `locked` within one
/// process).
///
/// No predicate strands an object: a new object is reconciled in the call
/// that adds the finalizer, and the start of an object's deletion while it
/// carries finalizers passes every [`Predicate`](crate::Predicate), so its
/// cleanup runs whatever filter the controller was built with.
///
/// # Errors
///
/// [`FinalizerError`] naming the step that failed.
pub async fn finalizer<K, F, Fut, E>(
    ctx: &Context<K>,
    finalizer: &str,
    object: Arc<K>,
    handler: F,
) -> Result<Action, FinalizerError<E>>
where
    K: AnyObject,
    F: FnOnce(Lifecycle<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
    E: std::error::Error + 'static,
{
    let ours = object.finalizers().iter().any(|f| f == finalizer);
    let deleting = object.meta().deletion_timestamp.is_some();
    match (deleting, ours) {
        (false, false) => {
            let written = ctx
                .add_finalizer(&object, finalizer)
                .await
                .map_err(|source| FinalizerError::AddFinalizer {
                    finalizer: finalizer.to_owned(),
                    source,
                })?;
            // Reconcile the stored copy now rather than wait for the watch
            // to bring the finalizer's own change back: a predicate (a
            // generation one, or any of the author's) may well drop that
            // metadata-only event, and the object would wait for its next
            // spec change.
            match written.object {
                Some(stored) => handler(Lifecycle::Apply(Arc::new(stored)))
                    .await
                    .map_err(FinalizerError::Handler),
                None => Ok(Action::await_change()),
            }
        }
        (false, true) => handler(Lifecycle::Apply(object))
            .await
            .map_err(FinalizerError::Handler),
        (true, true) => {
            let action = handler(Lifecycle::Cleanup(object.clone()))
                .await
                .map_err(FinalizerError::Handler)?;
            ctx.remove_finalizer(&object, finalizer)
                .await
                .map_err(|source| FinalizerError::RemoveFinalizer {
                    finalizer: finalizer.to_owned(),
                    source,
                })?;
            Ok(action)
        }
        (true, false) => Ok(Action::await_change()),
    }
}
