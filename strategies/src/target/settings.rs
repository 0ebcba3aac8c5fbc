use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use concord_featuregates::RetryPolicy;
use kube::Client;
use kube::core::ApiResource;
use serde_json::Value;

#[cfg(feature = "testing")]
use crate::BeforeWrite;
use crate::target::fresh::DEFAULT_FRESH_WAIT;
use crate::target::status_subresource::StatusSubresource;
use crate::{FreshCopies, WriteMetrics, WriteTurns};

/// The field manager concord writes under unless told otherwise.
pub const DEFAULT_FIELD_MANAGER: &str = "concord";

/// Where writes go: a client and a resource type, plus the settings every
/// strategy shares (field manager, metrics, transient-failure retries).
///
/// One `Target` serves every object of its resource, namespaced or
/// cluster-scoped: the namespace and name come from the object written.
///
/// ```no_run
/// # async fn demo() -> Result<(), kube::Error> {
/// use concord_strategies::Target;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::core::ApiResource;
///
/// let client = kube::Client::try_default().await?;
/// let pods = Target::new(client, ApiResource::erase::<Pod>(&())).with_field_manager("my-operator");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Target {
    pub(crate) client: Client,
    pub(crate) resource: ApiResource,
    pub(crate) field_manager: String,
    pub(crate) metrics: Option<Arc<WriteMetrics>>,
    pub(crate) transient: RetryPolicy,
    pub(crate) fresh: Option<Arc<dyn FreshCopies>>,
    pub(crate) fresh_wait: Duration,
    pub(crate) turns: WriteTurns,
    /// What discovery said of the resource's status subresource
    /// (`subresource.rs`), shared by the target's clones.
    pub(crate) status_subresource: StatusSubresource,
    #[cfg(feature = "testing")]
    pub(crate) before_write: Option<Arc<dyn BeforeWrite>>,
}

impl Target {
    /// Writes to `resource` through `client`.
    pub fn new(client: Client, resource: ApiResource) -> Self {
        Target {
            client,
            resource,
            field_manager: DEFAULT_FIELD_MANAGER.to_owned(),
            metrics: None,
            transient: RetryPolicy::transient(),
            fresh: None,
            fresh_wait: DEFAULT_FRESH_WAIT,
            turns: WriteTurns::default(),
            status_subresource: StatusSubresource::default(),
            #[cfg(feature = "testing")]
            before_write: None,
        }
    }

    /// Write under this field manager; `apply` derives its per-intent
    /// managers from it (`<manager>/finalizer/<name>`).
    #[must_use]
    pub fn with_field_manager(mut self, manager: impl Into<String>) -> Self {
        self.field_manager = manager.into();
        self
    }

    /// Record every write in `metrics`.
    #[must_use]
    pub fn with_metrics(mut self, metrics: Arc<WriteMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Retry `429` and `5xx` answers within `policy` (the server's
    /// Retry-After is honoured up to the policy's cap). Defaults to
    /// [`RetryPolicy::transient`]; the layering is in `retry.rs`.
    #[must_use]
    pub fn with_transient_retry(mut self, policy: RetryPolicy) -> Self {
        self.transient = policy;
        self
    }

    /// After a `409`, look for a copy newer than the one that conflicted in
    /// `copies` (usually the controller's watch cache) before sending a
    /// `GET`. Without it every re-read is a `GET`.
    #[must_use]
    pub fn with_fresh_copies(mut self, copies: Arc<dyn FreshCopies>) -> Self {
        self.fresh = Some(copies);
        self
    }

    /// How long a re-read waits for the [fresh copies](Self::with_fresh_copies)
    /// to catch up before it `GET`s the object (default
    /// [`DEFAULT_FRESH_WAIT`](crate::DEFAULT_FRESH_WAIT), 50 ms). Zero asks
    /// once without waiting.
    #[must_use]
    pub fn with_fresh_wait(mut self, wait: Duration) -> Self {
        self.fresh_wait = wait;
        self
    }

    /// Take turns (see [`Strict`](crate::Strict), "Taking turns") in
    /// `turns`, with every target given the same. A target starts with
    /// turns of its own, shared by its clones only: two targets that write
    /// the same objects from one process (a `locked` writer beside a
    /// `strict` one) must share theirs, or a `locked` write's read-to-request
    /// window is open to the other's writes. A manager gives one table to
    /// every target it builds.
    #[must_use]
    pub fn with_turns(mut self, turns: WriteTurns) -> Self {
        self.turns = turns;
        self
    }

    /// The turns this target's writes take, to share with another target
    /// ([`with_turns`](Self::with_turns)).
    pub fn turns(&self) -> &WriteTurns {
        &self.turns
    }

    /// Call `hook` after a write body is computed and before it is sent.
    /// Meant for tests that need a competing write at exactly that point;
    /// only with the `testing` feature, and kept off the API docs.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    #[must_use]
    pub fn with_before_write(mut self, hook: Arc<dyn BeforeWrite>) -> Self {
        self.before_write = Some(hook);
        self
    }

    /// The resource written.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    /// The base field manager.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }
}

/// `resource` in the version `object` was read in: a copy read through
/// another served version of the same group is written, re-read and
/// compared through that version, since its fields (and the `apiVersion`
/// a `PUT` carries) are that version's. A copy without `apiVersion`, or
/// naming another group, is the target's version.
pub(crate) fn in_version_of(resource: &ApiResource, object: &Value) -> ApiResource {
    let Some(api_version) = object.get("apiVersion").and_then(Value::as_str) else {
        return resource.clone();
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    if group != resource.group || version == resource.version || version.is_empty() {
        return resource.clone();
    }
    ApiResource {
        version: version.to_owned(),
        api_version: api_version.to_owned(),
        ..resource.clone()
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("resource", &self.resource)
            .field("field_manager", &self.field_manager)
            .field("metrics", &self.metrics.is_some())
            .field("transient", &self.transient)
            .field("fresh", &self.fresh)
            .field("fresh_wait", &self.fresh_wait)
            .field("turns", &self.turns.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_copy_is_written_through_the_version_it_was_read_in() {
        let v1 = ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        };
        let read = |api_version: Value| in_version_of(&v1, &json!({"apiVersion": api_version}));
        assert_eq!(read(json!("example.com/v2")).api_version, "example.com/v2");
        assert_eq!(read(json!("example.com/v2")).version, "v2");
        assert_eq!(read(json!("example.com/v2")).plural, "widgets");
        assert_eq!(read(json!("example.com/v1")), v1);
        assert_eq!(read(json!("other.com/v2")), v1, "another group is not ours");
        assert_eq!(read(json!(null)), v1);
    }
}
