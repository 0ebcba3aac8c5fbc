use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// What the API server does when it cannot reach the webhook (or the
/// webhook times out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Refuse the request (the default): nothing unvalidated is stored.
    #[default]
    Fail,
    /// Admit the request as if the webhook were not there.
    Ignore,
}

impl FailurePolicy {
    /// The value of the configuration's `failurePolicy` field.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// How one admission webhook is registered with the API server; every
/// field lands in the generated configuration and the server honours the
/// timeout.
///
/// | field | default | why |
/// | --- | --- | --- |
/// | `failurePolicy` | `Fail` | an unreachable validator must not let invalid objects in |
/// | `sideEffects` | `None` | concord's webhooks only compute; dry-run requests are safe to send |
/// | `timeoutSeconds` | 10 | the API server's default; the server answers within 90% of it |
/// | `matchPolicy` | `Equivalent` | requests to any served version of the resource are converted and checked |
/// | operations | `CREATE`, `UPDATE` | `DELETE` only when asked for with [`with_delete`](Self::with_delete) |
#[derive(Clone, Debug, PartialEq)]
#[must_use]
pub struct WebhookOptions {
    pub(crate) failure_policy: FailurePolicy,
    pub(crate) timeout: Duration,
    pub(crate) namespace_selector: Option<LabelSelector>,
    pub(crate) delete: bool,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            failure_policy: FailurePolicy::Fail,
            timeout: Duration::from_secs(10),
            namespace_selector: None,
            delete: false,
        }
    }
}

impl WebhookOptions {
    /// The defaults of the table above.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `failurePolicy`.
    pub fn with_failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// Sets `timeoutSeconds` (the API server accepts 1 to 30; the value is
    /// clamped to that range and rounded up to whole seconds). The server
    /// cuts the handler off at 90% of it, so the API client gets the
    /// webhook's own "timed out" denial rather than the API server's
    /// failure policy.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.clamp(Duration::from_secs(1), Duration::from_secs(30));
        self
    }

    /// Only objects in namespaces matching `selector` are sent to the webhook.
    pub fn with_namespace_selector(mut self, selector: LabelSelector) -> Self {
        self.namespace_selector = Some(selector);
        self
    }

    /// Also send `DELETE` requests to the validator.
    pub fn with_delete(mut self, delete: bool) -> Self {
        self.delete = delete;
        self
    }

    /// `timeoutSeconds` as the configuration carries it.
    pub fn timeout_seconds(&self) -> i32 {
        let secs = self.timeout.as_secs() + u64::from(self.timeout.subsec_nanos() > 0);
        i32::try_from(secs.clamp(1, 30)).unwrap_or(30)
    }

    /// How long the server lets a handler run before answering with a
    /// denial: 90% of the timeout.
    pub fn deadline(&self) -> Duration {
        Duration::from_secs(u64::try_from(self.timeout_seconds()).unwrap_or(10)).mul_f64(0.9)
    }
}
