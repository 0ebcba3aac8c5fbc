//! Whether a resource has the status subresource, and whether a write
//! through the main resource stored the status change it carried.
//!
//! A custom resource may have no status subresource: `/status` answers
//! `404` and the main resource stores `status` as any other field. Where
//! the subresource exists, the main resource keeps the stored status and
//! drops a change to it without a word. So status goes through the main
//! resource only where discovery (`GET /apis/<group>/<version>`) does not
//! list `<plural>/status`, and a status write sent there checks that the
//! answer holds its change; when it does not, discovery is asked again:
//! a status write then goes to `/status` if the subresource appeared, and
//! otherwise fails ([`Error::StatusNotStored`](crate::Error::StatusNotStored)).
//! A 404 from `/status` alone proves nothing (the object may be gone);
//! discovery tells the two apart.
//!
//! What discovery said is kept on the [`Target`](crate::Target) (shared by
//! its clones), and asked again on every surprise: a `404` from `/status`,
//! a main-resource write whose status change is not in the answer, a
//! main-resource change to `status` about to be refused. A CRD that gains
//! or loses the subresource meanwhile therefore costs one more request,
//! never a dropped change reported as written.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use kube::core::ApiResource;

/// Not asked yet.
const UNKNOWN: u8 = 0;
/// Discovery lists `<plural>/status`.
const PRESENT: u8 = 1;
/// Discovery lists the resource without `<plural>/status`.
const ABSENT: u8 = 2;

/// What discovery last said of a resource's status subresource.
#[derive(Clone, Debug, Default)]
pub(crate) struct StatusSubresource(Arc<AtomicU8>);

impl StatusSubresource {
    /// Whether the subresource exists, if discovery was asked.
    pub(crate) fn known(&self) -> Option<bool> {
        match self.0.load(Relaxed) {
            PRESENT => Some(true),
            ABSENT => Some(false),
            _ => None,
        }
    }

    /// Ask discovery whether `resource` has the status subresource, and
    /// keep the answer. A resource discovery does not list (not yet, or
    /// no longer, served) counts as having it and is not kept: its status
    /// then goes to `/status`, as before anything was known.
    pub(crate) async fn learn(
        &self,
        client: &kube::Client,
        resource: &ApiResource,
    ) -> Result<bool, kube::Error> {
        let list = if resource.group.is_empty() {
            client.list_core_api_resources(&resource.version).await?
        } else {
            client
                .list_api_group_resources(&resource.api_version)
                .await?
        };
        let status = format!("{}/status", resource.plural);
        let listed = |name: &str| list.resources.iter().any(|r| r.name == name);
        if !listed(&resource.plural) {
            self.0.store(UNKNOWN, Relaxed);
            return Ok(true);
        }
        let present = listed(&status);
        self.0
            .store(if present { PRESENT } else { ABSENT }, Relaxed);
        Ok(present)
    }
}
