//! Where a write finds a fresh copy after a conflict without asking the API
//! server: a watch cache (the framework's shared reflector store) that
//! implements [`FreshCopies`].
//!
//! The loop that uses it is in `write_loop.rs`: after a `409`, `strict` and
//! `update` ask for a copy newer than the one that conflicted, waiting at
//! most [`Target::with_fresh_wait`](crate::Target::with_fresh_wait) for the
//! watch to deliver it, and `GET` only when it does not.

use std::any::TypeId;
use std::fmt::Debug;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::core::{ApiResource, DynamicObject};
use serde_json::Value;

use crate::Observed;

/// How long a write waits, by default, for the watch cache to catch up after
/// a conflict before it `GET`s the object.
pub const DEFAULT_FRESH_WAIT: Duration = Duration::from_millis(50);

/// A source of recent copies of objects, usually a watch cache.
///
/// Implementations answer [`newer`](Self::newer) from memory; the strategies
/// never trust the answer blindly: the loop checks again that the copy's
/// `resourceVersion` is newer ([`is_newer`]) and that its uid is the
/// observed one, and `update` uses only [complete](Observed::is_complete)
/// copies (a typed cache may lack fields a `PUT` would then drop).
///
/// Using a copy is safe even when the cache is behind: the request re-sent
/// from it still carries `resourceVersion` (and uid), so a stale copy costs
/// one more `409`, never a lost write.
pub trait FreshCopies: Send + Sync + Debug {
    /// A copy of the object `namespace`/`name` whose `metadata.resourceVersion`
    /// is newer than `than`, waiting at most `wait` for one to arrive.
    /// `None` when the source does not hold the object, cannot compare
    /// versions, or has nothing newer in time: the caller then reads the
    /// object from the API server.
    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>>;
}

/// `json`, a `K` of `resource` taken from a cache, as an [`Observed`] copy:
/// complete only for a [`DynamicObject`], typed otherwise — so `update`
/// never builds a `PUT` from a cached copy whose Rust type may lack fields:
/// a custom resource's type lagging its schema, or a built-in type older
/// than the API server (the server's version is checked by
/// [`Writer`](crate::Writer) for the object it is given, not for copies a
/// cache hands back later). An `update` re-reading after a conflict from a
/// typed cache therefore sends a `GET`.
///
/// ```
/// use concord_strategies::cached_copy;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::core::{ApiResource, DynamicObject};
/// let pods = ApiResource::erase::<Pod>(&());
/// assert!(!cached_copy::<Pod>(serde_json::json!({}), &pods).is_complete());
/// assert!(cached_copy::<DynamicObject>(serde_json::json!({}), &pods).is_complete());
/// ```
pub fn cached_copy<K: 'static>(json: Value, _resource: &ApiResource) -> Observed {
    if TypeId::of::<K>() == TypeId::of::<DynamicObject>() {
        Observed::complete(json)
    } else {
        Observed::typed(json)
    }
}

/// Whether resourceVersion `candidate` is newer than `than`: `Some` only when
/// both parse as unsigned integers.
///
/// resourceVersions are opaque strings to clients; the API server backed by
/// etcd issues increasing integers, which is what makes a comparison
/// meaningful. Anything else (`None`) is treated as "cannot tell", and the
/// write falls back to a `GET`.
///
/// ```
/// use concord_strategies::is_newer;
/// assert_eq!(is_newer("12", "9"), Some(true));
/// assert_eq!(is_newer("9", "9"), Some(false));
/// assert_eq!(is_newer("abc", "9"), None);
/// ```
pub fn is_newer(candidate: &str, than: &str) -> Option<bool> {
    let candidate: u64 = candidate.parse().ok()?;
    let than: u64 = than.parse().ok()?;
    Some(candidate > than)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically_not_as_text() {
        assert_eq!(is_newer("10", "9"), Some(true));
        assert_eq!(is_newer("9", "10"), Some(false));
        assert_eq!(is_newer("10", ""), None);
        assert_eq!(is_newer("-1", "0"), None);
    }
}
