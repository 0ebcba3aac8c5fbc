use async_trait::async_trait;

use super::Verdict;

/// Validates objects of type `K` before the API server stores (or deletes)
/// them: a validating admission webhook.
///
/// Every method admits by default, so implement only the operations you
/// care about. A validator sees the object *after* every mutating webhook
/// (defaulting included) has run.
///
/// ```no_run
/// use concord::webhook::{Validator, Verdict};
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// struct NoEmptyConfigMaps;
///
/// #[concord::async_trait]
/// impl Validator<ConfigMap> for NoEmptyConfigMaps {
///     async fn validate_create(&self, cm: &ConfigMap) -> Verdict {
///         if cm.data.as_ref().is_none_or(|d| d.is_empty()) {
///             return Verdict::deny("data must not be empty");
///         }
///         Verdict::allow()
///     }
/// }
/// ```
///
/// # Caveats
///
/// The server cuts a validator off shortly before the webhook's
/// `timeoutSeconds` and denies the request (see
/// [`WebhookOptions::with_timeout`](super::WebhookOptions::with_timeout)):
/// keep validation local and fast, and never call back into the API server
/// for the same object.
#[async_trait]
pub trait Validator<K: Send + Sync>: Send + Sync + 'static {
    /// Validates a new object.
    async fn validate_create(&self, object: &K) -> Verdict {
        let _ = object;
        Verdict::allow()
    }

    /// Validates a change from `old` to `new`: the place for immutable
    /// fields.
    async fn validate_update(&self, old: &K, new: &K) -> Verdict {
        let _ = (old, new);
        Verdict::allow()
    }

    /// Validates a deletion of `object` (only called when the webhook
    /// registers `DELETE`, see [`WebhookOptions::with_delete`](super::WebhookOptions::with_delete)).
    async fn validate_delete(&self, object: &K) -> Verdict {
        let _ = object;
        Verdict::allow()
    }
}

/// Fills defaults into objects of type `K` on create and update: a
/// mutating admission webhook. The framework computes the JSON patch the
/// API server needs from the object before and after
/// [`default`](Self::default).
///
/// ```no_run
/// use concord::webhook::Defaulter;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// struct Labelled;
///
/// impl Defaulter<ConfigMap> for Labelled {
///     fn default(&self, cm: &mut ConfigMap) {
///         cm.metadata.labels.get_or_insert_default()
///             .entry("team".into()).or_insert_with(|| "platform".into());
///     }
/// }
/// ```
///
/// # Caveats
///
/// Defaulting must be idempotent: the API server may call it again when a
/// later mutating webhook changes the object (`reinvocationPolicy`).
pub trait Defaulter<K>: Send + Sync + 'static {
    /// Fills in what the user left out.
    fn default(&self, object: &mut K);
}
