//! Turns: the writes of this process that may re-read after a conflict
//! (`strict`, `update` and `guarded` under either conflict policy, `apply`'s
//! guarded requests) take turns per object, `locked` holds the turn from its
//! read to its request, and each starts from the copy the previous turn
//! stored when that copy is newer than its own.
//!
//! Two tasks of one controller writing the same object at the same moment
//! (Argo's two code paths) would otherwise both build a request from the
//! same cached copy: one is stored, the other meets a `409`, re-reads and
//! sends again — three requests where `lax` sends two. Taking turns, the
//! second builds its request from the first one's answer and sends once.
//!
//! Safe by construction: the copy is the API server's own answer, the
//! request built from it carries its `resourceVersion` and uid as always,
//! and a write from anywhere else in between still meets a `409`. Nothing
//! is kept once no write of the object is running or waiting.

use std::sync::Arc;

use serde_json::Value;

use crate::ObjectKey;
use crate::model::observed::meta;
use crate::target::fresh::is_newer;
use crate::target::lock_table::{Held, Table};

/// The turns that writes of one object take (see [`Strict`](crate::Strict),
/// "Taking turns"): a [`Target`](crate::Target) has its own, shared by its
/// clones and by every target given the same ([`Target::with_turns`](crate::Target::with_turns));
/// a manager gives one to every target it builds, so all its writes take
/// turns with each other and none with another manager's.
///
/// ```
/// use concord_strategies::{Target, WriteTurns};
/// # fn demo(pods: Target, workloads: Target) {
/// let turns = WriteTurns::default();
/// let pods = pods.with_turns(turns.clone());
/// let workloads = workloads.with_turns(turns);
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct WriteTurns(Arc<Table<Option<Value>>>);

impl WriteTurns {
    /// Objects whose turn is held or awaited right now.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no turn is held or awaited.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One object's turn, held until dropped.
pub(crate) struct Turn {
    held: Held<Option<Value>>,
}

/// Wait for the turn of `key` in `turns`.
///
/// A turn is held for one request (a `locked` write holds it from its read
/// to its request), so the wait is bounded by those requests' timeouts. A
/// write never goes without its turn: a `locked` write's request carries
/// no version, so another write of this process landing between its read
/// and its request would be lost.
pub(crate) async fn take(key: ObjectKey, turns: &WriteTurns) -> Turn {
    Turn {
        held: turns.0.lock(key).await,
    }
}

impl Turn {
    /// The copy an earlier turn stored, if it is of the same object (uid),
    /// in the same API version, as `current` and newer than it.
    ///
    /// Turns are keyed by resource, not version: writes through two
    /// versions of one resource are writes of one stored object and take
    /// turns. But a copy is handed on only in the version it was read in
    /// — another version's fields may be named and shaped differently. A
    /// `current` without `apiVersion` (an item of a list, which the API
    /// server sends without one) is in the version its writer sends,
    /// `writes_in`.
    pub(crate) fn newer_than(&self, current: &Value, writes_in: &str) -> Option<Value> {
        let copy = self.held.as_ref()?;
        let version = current
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or(writes_in);
        let same = meta(copy, "uid").is_some()
            && meta(copy, "uid") == meta(current, "uid")
            && copy.get("apiVersion").and_then(Value::as_str) == Some(version);
        let newer = meta(copy, "resourceVersion")
            .zip(meta(current, "resourceVersion"))
            .and_then(|(copy, current)| is_newer(copy, current));
        (same && newer == Some(true)).then(|| copy.clone())
    }

    /// Leave `stored`, the API server's answer to a stored write (never a
    /// copy of the caller's or a cache's), for the next turn, unless it is
    /// older than what an earlier turn left.
    pub(crate) fn leave(&mut self, stored: &Value) {
        let older = self.held.as_ref().is_some_and(|kept| {
            meta(kept, "resourceVersion")
                .zip(meta(stored, "resourceVersion"))
                .and_then(|(kept, stored)| is_newer(kept, stored))
                == Some(true)
        });
        if !older {
            *self.held = Some(stored.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A copy as a list item comes: without `apiVersion`.
    fn copy(uid: &str, rv: &str) -> Value {
        json!({"metadata": {"name": "p", "uid": uid, "resourceVersion": rv}})
    }

    /// The API server's answer to a write, which names its version.
    fn stored(uid: &str, rv: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": uid, "resourceVersion": rv}})
    }

    fn key() -> ObjectKey {
        ObjectKey::new("turns-test", Some("ns"), "p")
    }

    #[tokio::test]
    async fn a_turn_hands_a_newer_copy_of_the_same_object_to_the_next() {
        let turns = WriteTurns::default();
        {
            let mut first = take(key(), &turns).await;
            assert_eq!(first.newer_than(&copy("u", "5"), "v1"), None);
            let theirs = turns.clone();
            let second = tokio::spawn(async move {
                let turn = take(key(), &theirs).await;
                (
                    turn.newer_than(&copy("u", "5"), "v1"),
                    turn.newer_than(&copy("u", "7"), "v1"),
                    turn.newer_than(&copy("other", "5"), "v1"),
                )
            });
            tokio::task::yield_now().await;
            first.leave(&stored("u", "6"));
            drop(first);
            let (older, newer, recreated) = second.await.unwrap();
            assert_eq!(older, Some(stored("u", "6")));
            assert_eq!(newer, None);
            assert_eq!(recreated, None);
        }
        // Nobody waited after the last turn: nothing is kept.
        assert_eq!(
            take(key(), &turns).await.newer_than(&copy("u", "1"), "v1"),
            None
        );
    }

    #[tokio::test]
    async fn a_copy_is_handed_on_only_in_the_version_it_was_read_in() {
        let versioned = |version: &str, rv: &str| json!({"apiVersion": version, "metadata": {"uid": "u", "resourceVersion": rv}});
        let key = ObjectKey::new("turns-version-test", Some("ns"), "p");
        let turns = WriteTurns::default();
        let mut first = take(key.clone(), &turns).await;
        let theirs = turns.clone();
        let second = tokio::spawn(async move {
            let turn = take(key, &theirs).await;
            (
                turn.newer_than(&versioned("x/v1beta1", "5"), "x/v1"),
                turn.newer_than(&versioned("x/v1", "5"), "x/v1beta1"),
            )
        });
        tokio::task::yield_now().await;
        first.leave(&versioned("x/v1", "6"));
        drop(first);
        let (other_version, same_version) = second.await.unwrap();
        assert_eq!(other_version, None);
        assert_eq!(same_version, Some(versioned("x/v1", "6")));
    }

    #[tokio::test]
    async fn a_listed_copy_without_api_version_is_in_its_writers_version() {
        let key = ObjectKey::new("turns-listed-test", Some("ns"), "p");
        let turns = WriteTurns::default();
        let mut first = take(key.clone(), &turns).await;
        let theirs = turns.clone();
        let second = tokio::spawn(async move {
            let turn = take(key, &theirs).await;
            (
                turn.newer_than(&copy("u", "5"), "v1"),
                turn.newer_than(&copy("u", "5"), "v2"),
            )
        });
        tokio::task::yield_now().await;
        first.leave(&stored("u", "6"));
        drop(first);
        let (same_version, other_version) = second.await.unwrap();
        assert_eq!(same_version, Some(stored("u", "6")));
        assert_eq!(other_version, None);
    }
}
