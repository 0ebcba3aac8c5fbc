use std::sync::Arc;
use std::time::Duration;

use crate::Context;

/// What a reconcile asks of its controller once it has run: to be run
/// again after a while, or only when something it watches changes.
///
/// The constructors are kube-rs's (`Action::requeue`,
/// `Action::await_change`); unlike kube-rs's, the requeue is readable
/// ([`requeue_after`](Self::requeue_after)), which an error policy or a
/// test may want to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Run the reconcile again after `duration`, even if nothing changes
    /// (sooner if something does).
    #[must_use]
    pub const fn requeue(duration: Duration) -> Self {
        Action {
            requeue_after: Some(duration),
        }
    }

    /// Run the reconcile again only when the object, or something mapped
    /// to it, changes.
    #[must_use]
    pub const fn await_change() -> Self {
        Action {
            requeue_after: None,
        }
    }

    /// When the reconcile is to run again without a change: `None` for
    /// [`await_change`](Self::await_change).
    pub const fn requeue_after(&self) -> Option<Duration> {
        self.requeue_after
    }
}

/// The operator author's logic for one resource type.
///
/// `reconcile` is called with the latest observed object whenever it or
/// something it owns or watches changes, and again when it asks to be
/// requeued. It should drive the world towards the object's spec and be
/// safe to run any number of times.
///
/// ```no_run
/// use std::sync::Arc;
/// use concord::{Action, Context, Reconciler};
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// struct Labeller;
///
/// #[concord::async_trait]
/// impl Reconciler<ConfigMap> for Labeller {
///     type Error = concord::WriteError;
///     async fn reconcile(&self, cm: Arc<ConfigMap>, ctx: &Context<ConfigMap>) -> Result<Action, Self::Error> {
///         ctx.set_label(&cm, "example.com/seen", "true").await?;
///         Ok(Action::await_change())
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Reconciler<K: kube::Resource>: Send + Sync + 'static {
    /// The error a reconcile can fail with; a failed reconcile is requeued
    /// with per-object exponential backoff.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Brings the world in line with `object`.
    async fn reconcile(&self, object: Arc<K>, ctx: &Context<K>) -> Result<Action, Self::Error>;
}
