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
//! otherwise fails ([`Error::StatusNotStored`]).
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
use serde_json::Value;

use crate::session::Session;
use crate::{Error, Mutation, Verb};

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

impl Session<'_> {
    /// [`mutate`](Self::mutate), asking discovery before a main-resource
    /// change to `status` is refused: without a status subresource it is
    /// the main resource's to write.
    pub(crate) async fn mutate_learning(
        &mut self,
        mutation: &Mutation,
        object: &Value,
    ) -> Result<Option<Value>, Error> {
        match self.mutate(mutation, object) {
            Err(Error::UnsupportedMutation { .. }) if !self.status && !self.status_on_main => {
                if self.learn_status_subresource().await? {
                    return Err(self.status_refused());
                }
                self.status_on_main = true;
                self.mutate(mutation, object)
            }
            other => other,
        }
    }

    pub(crate) fn status_refused(&self) -> Error {
        Error::UnsupportedMutation {
            strategy: self.outcome.strategy,
            what: "a change to `status` in a main-resource mutation where the resource has a status subresource (use `Mutation::typed_status` or `Mutation::custom_status`)",
            object: self.key.clone(),
        }
    }

    /// Ask discovery whether the resource has a status subresource
    /// (`subresource.rs`), counted as a `GET`.
    pub(crate) async fn learn_status_subresource(&mut self) -> Result<bool, Error> {
        self.outcome.requests[Verb::Get.index()] += 1;
        let target = self.target;
        target
            .status_subresource
            .learn(&target.client, &self.resource)
            .await
            .map_err(|source| Error::Request {
                object: self.key.clone(),
                source: Box::new(source),
            })
    }

    /// A `404` from `/status`: if the resource has no status subresource,
    /// send this write's status through the main resource (once) and say
    /// so; otherwise the object is gone.
    pub(crate) async fn reroute_status(&mut self) -> Result<bool, Error> {
        if !self.status || self.rerouted || self.learn_status_subresource().await? {
            return Ok(false);
        }
        self.status = false;
        self.status_on_main = true;
        self.rerouted = true;
        Ok(true)
    }

    /// A status change sent through the main resource that the answer
    /// does not hold: when discovery now lists the status subresource
    /// (the resource gained it), a status write goes back to `/status`
    /// (`Ok(())`: send again) and a main-resource mutation is refused;
    /// otherwise it is [`Error::StatusNotStored`], never a quiet success.
    pub(crate) async fn status_not_held(&mut self) -> Result<(), Error> {
        if !self.learn_status_subresource().await? {
            return Err(Error::StatusNotStored {
                object: self.key.clone(),
            });
        }
        self.status_on_main = false;
        if !self.rerouted {
            return Err(self.status_refused());
        }
        self.status = true;
        Ok(())
    }
}

/// Whether `stored` holds the change from `before` to `after`: every
/// member that differs between the two has `after`'s value (or is absent
/// where `after` lacks it) in `stored`. Members neither changed are not
/// looked at, so another writer's change elsewhere does not count.
pub(crate) fn holds_change(
    before: Option<&Value>,
    after: Option<&Value>,
    stored: Option<&Value>,
) -> bool {
    if before == after {
        return true;
    }
    match (before, after) {
        (Some(Value::Object(before)), Some(Value::Object(after))) => {
            let stored = stored.and_then(Value::as_object);
            before.keys().chain(after.keys()).all(|key| {
                holds_change(
                    before.get(key),
                    after.get(key),
                    stored.and_then(|s| s.get(key)),
                )
            })
        }
        _ => stored == after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_change_is_held_where_the_changed_members_are_stored() {
        let before = json!({"phase": "A", "n": 1});
        let after = json!({"phase": "B", "n": 1, "new": {"x": 1}});
        let stored = json!({"phase": "B", "n": 2, "new": {"x": 1}, "theirs": true});
        assert!(holds_change(Some(&before), Some(&after), Some(&stored)));
        let dropped = json!({"phase": "A", "n": 1});
        assert!(!holds_change(Some(&before), Some(&after), Some(&dropped)));
        assert!(!holds_change(None, Some(&after), None));
        assert!(holds_change(Some(&before), None, None));
        assert!(!holds_change(Some(&before), None, Some(&before)));
    }
}
