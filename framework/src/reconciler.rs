use std::sync::Arc;

use kube::runtime::controller::Action;

use crate::Context;

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
