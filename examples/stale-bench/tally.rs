//! The API server's side of the count: a watch of one namespace's
//! children, straight to the API server (not through the fault proxy),
//! that counts every child created and deleted, per parent, whoever made
//! it — concord or the Go peer alike.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::task::JoinHandle;

/// The label every child carries: its parent's name.
pub(crate) const PARENT_LABEL: &str = "parent";

/// Broken watch connections in a row before the count is given up.
const RECONNECTS: u32 = 5;

/// What the API server saw happen to the children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Children created.
    pub(crate) created: usize,
    /// Children deleted.
    pub(crate) deleted: usize,
    /// Deletes that left their parent with fewer children than its spec
    /// asked for at that moment: a child deleted wrongly.
    pub(crate) wrong_deletes: usize,
}

impl Counts {
    /// What happened since `earlier`.
    pub(crate) fn since(self, earlier: Counts) -> Counts {
        Counts {
            created: self.created - earlier.created,
            deleted: self.deleted - earlier.deleted,
            wrong_deletes: self.wrong_deletes - earlier.wrong_deletes,
        }
    }
}

#[derive(Default)]
struct State {
    /// Children each parent's spec asks for now.
    want: HashMap<String, usize>,
    /// Children each parent has on the server.
    live: HashMap<String, usize>,
    /// The uids of the children on the server.
    children: HashSet<String>,
    counts: Counts,
    last_change: Option<Instant>,
    failed: Option<String>,
}

/// The parent a child names in its label (empty when it names none).
fn parent_of(child: &ConfigMap) -> String {
    child
        .labels()
        .get(PARENT_LABEL)
        .cloned()
        .unwrap_or_default()
}

impl State {
    fn added(&mut self, child: &ConfigMap) {
        let Some(uid) = child.uid() else { return };
        if !self.children.insert(uid) {
            return;
        }
        let parent = parent_of(child);
        *self.live.entry(parent).or_default() += 1;
        self.counts.created += 1;
        self.last_change = Some(Instant::now());
    }

    fn deleted(&mut self, child: &ConfigMap) {
        let Some(uid) = child.uid() else { return };
        if !self.children.remove(&uid) {
            return;
        }
        let parent = parent_of(child);
        let want = self.want.get(&parent).copied().unwrap_or(0);
        let live = self.live.entry(parent).or_default();
        *live = live.saturating_sub(1);
        if *live < want {
            self.counts.wrong_deletes += 1;
        }
        self.counts.deleted += 1;
        self.last_change = Some(Instant::now());
    }
}

/// A running count of one namespace's children.
pub(crate) struct Tally {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Tally {
    /// Starts counting the children in the namespace of `api`, which must
    /// hold none yet.
    ///
    /// # Errors
    ///
    /// When the first list fails or finds children.
    pub(crate) async fn start(api: Api<ConfigMap>) -> Result<Tally> {
        let list = api
            .list_metadata(&ListParams::default().labels(PARENT_LABEL))
            .await
            .context("listing the children before counting")?;
        ensure!(
            list.items.is_empty(),
            "the namespace already holds {} children",
            list.items.len()
        );
        let version = list.metadata.resource_version.unwrap_or_default();
        let state = Arc::new(Mutex::new(State::default()));
        let task = tokio::spawn(watch(api, version, state.clone()));
        Ok(Tally { state, task })
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// From now on, `parent`'s spec asks for `n` children.
    pub(crate) fn want(&self, parent: &str, n: usize) {
        self.with(|s| s.want.insert(parent.to_owned(), n));
    }

    /// The counts so far.
    pub(crate) fn counts(&self) -> Counts {
        self.with(|s| s.counts)
    }

    /// How many parents have another number of children than their spec
    /// asks for.
    pub(crate) fn parents_off(&self) -> usize {
        self.with(|s| {
            s.want
                .iter()
                .filter(|(parent, want)| s.live.get(*parent).copied().unwrap_or(0) != **want)
                .count()
        })
    }

    /// When a child was last created or deleted.
    pub(crate) fn last_change(&self) -> Option<Instant> {
        self.with(|s| s.last_change)
    }

    /// Why the count stopped, if it did: its figures are then incomplete.
    pub(crate) fn failed(&self) -> Option<String> {
        self.with(|s| s.failed.clone())
    }
}

/// Watches the children from `version` on, reconnecting from the last
/// version seen when a connection ends; a `410 Gone` or too many broken
/// connections in a row end the count with a reason.
async fn watch(api: Api<ConfigMap>, mut version: String, state: Arc<Mutex<State>>) {
    let params = WatchParams::default().labels(PARENT_LABEL).timeout(290);
    let fail = |why: String| {
        state.lock().unwrap_or_else(PoisonError::into_inner).failed = Some(why);
    };
    let mut broken = 0;
    loop {
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(e) if broken < RECONNECTS => {
                broken += 1;
                tracing::warn!("the children's watch failed to start ({e}); retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(e) => return fail(format!("the children's watch failed {broken} times: {e}")),
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("the children's watch broke ({e}); reconnecting");
                    broken += 1;
                    break;
                }
            };
            broken = 0;
            let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
            let seen = match &event {
                WatchEvent::Added(child) => {
                    s.added(child);
                    child.resource_version()
                }
                WatchEvent::Deleted(child) => {
                    s.deleted(child);
                    child.resource_version()
                }
                WatchEvent::Modified(child) => child.resource_version(),
                WatchEvent::Bookmark(mark) => Some(mark.metadata.resource_version.clone()),
                WatchEvent::Error(e) => {
                    s.failed = Some(format!(
                        "the children's watch ended with {} {}: the counts would miss events",
                        e.code, e.message
                    ));
                    return;
                }
            };
            if let Some(seen) = seen {
                version = seen;
            }
        }
        if broken > RECONNECTS {
            return fail(format!(
                "the children's watch broke {broken} times in a row"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn child(uid: &str, parent: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                labels: Some([(PARENT_LABEL.to_owned(), parent.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn a_delete_below_the_spec_is_wrong_and_one_of_an_excess_child_is_not() {
        let mut s = State::default();
        s.want.insert("p".into(), 1);
        s.added(&child("a", "p"));
        s.added(&child("b", "p"));
        s.added(&child("b", "p"));
        assert_eq!(s.counts.created, 2, "an event seen twice counts once");
        s.deleted(&child("b", "p"));
        assert_eq!(s.counts.wrong_deletes, 0);
        s.deleted(&child("a", "p"));
        assert_eq!(
            s.counts,
            Counts {
                created: 2,
                deleted: 2,
                wrong_deletes: 1
            }
        );
    }
}
