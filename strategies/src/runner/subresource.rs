//! The status subresource in a write: a change to `status` through the
//! main resource where discovery says it has none, and whether the answer
//! stored it (what discovery said is kept by `target/status_subresource.rs`).

use serde_json::Value;

use crate::runner::session::Session;
use crate::{Error, Mutation, Verb};

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
