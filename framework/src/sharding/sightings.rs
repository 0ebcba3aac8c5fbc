//! When this replica first saw each membership Lease's current record,
//! learned from a watch of the Leases, so a renewal starts its lease's clock
//! within a round trip of being written rather than at the next LIST.
//!
//! The times only ever come from this replica's own clock, taken when the
//! record arrived, which is after the holder sent it; judging expiry from
//! them keeps the margin between the holder's fence and its expiry whole,
//! exactly as judging it from the LIST did.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use tokio::sync::Notify;

use super::names::{ACKED_ANNOTATION, MEMBER_LABEL};
use crate::task::AbortOnDrop;

/// A record of one Lease: its resourceVersion and what a reader acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    version: String,
    /// Holder and acknowledged view: a change here is worth a read now.
    acts_on: (Option<String>, Option<String>),
    seen: Instant,
}

/// The watch's account of the membership Leases; shared with the task that
/// feeds it.
#[derive(Debug)]
pub(super) struct Sightings {
    records: Mutex<HashMap<String, Record>>,
    /// This replica's own Lease, whose changes it made itself.
    own: String,
    /// Signalled when a Lease appears, goes, changes holder or acknowledges
    /// another view (not on a plain renewal).
    changed: Notify,
}

impl Sightings {
    fn new(own: String) -> Self {
        Sightings {
            records: Mutex::default(),
            own,
            changed: Notify::new(),
        }
    }

    /// Starts watching the membership Leases of `api` (`own` is this
    /// replica's); the watch stops when the returned guard is dropped.
    pub(super) fn watch(api: Api<Lease>, own: String) -> (Arc<Sightings>, AbortOnDrop<()>) {
        let sightings = Arc::new(Sightings::new(own));
        let feed = sightings.clone();
        let task = tokio::spawn(async move {
            let config = watcher::Config::default().labels(MEMBER_LABEL);
            let mut events = watcher(api, config).default_backoff().boxed();
            let mut listing = HashSet::new();
            let mut warned = false;
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => {
                        warned = false;
                        feed.apply(event, &mut listing);
                    }
                    // The LIST of every renewal period still reads the
                    // Leases; without the watch, expiry is judged from it
                    // alone, up to one period later.
                    Err(error) if !warned => {
                        warned = true;
                        tracing::warn!(%error, "watching the membership leases failed; reading them every retry period only");
                    }
                    Err(error) => tracing::debug!(%error, "watching the membership leases"),
                }
            }
        });
        (sightings, AbortOnDrop(task))
    }

    fn apply(&self, event: Event<Lease>, listing: &mut HashSet<String>) {
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = match event {
            Event::Init => {
                listing.clear();
                false
            }
            Event::InitApply(lease) => {
                if let Some(name) = lease.metadata.name.clone() {
                    listing.insert(name);
                }
                record(&mut records, &lease) && !self.is_own(&lease)
            }
            Event::InitDone => {
                let before = records.len();
                records.retain(|name, _| listing.contains(name));
                records.len() != before
            }
            Event::Apply(lease) => record(&mut records, &lease) && !self.is_own(&lease),
            Event::Delete(lease) => lease
                .metadata
                .name
                .as_ref()
                .is_some_and(|name| records.remove(name).is_some()),
        };
        drop(records);
        if changed {
            self.changed.notify_one();
        }
    }

    fn is_own(&self, lease: &Lease) -> bool {
        lease.metadata.name.as_deref() == Some(self.own.as_str())
    }

    /// When the watch first delivered record `version` of Lease `name`, if
    /// it did.
    pub(super) fn first_seen(&self, name: &str, version: &str) -> Option<Instant> {
        let records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        records
            .get(name)
            .filter(|r| r.version == version)
            .map(|r| r.seen)
    }

    /// Resolves at the next change worth a read (or at once if one came
    /// since the last call).
    pub(super) async fn changed(&self) {
        self.changed.notified().await;
    }
}

/// Records `lease` if its resourceVersion is new; whether what a reader acts
/// on changed (a new Lease, holder or acknowledged view).
fn record(records: &mut HashMap<String, Record>, lease: &Lease) -> bool {
    let (Some(name), Some(version)) = (
        lease.metadata.name.as_ref(),
        lease.metadata.resource_version.as_ref(),
    ) else {
        return false;
    };
    let acts_on = (
        lease.spec.as_ref().and_then(|s| s.holder_identity.clone()),
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ACKED_ANNOTATION).cloned()),
    );
    match records.get_mut(name) {
        Some(known) if known.version == *version => false,
        Some(known) => {
            let changed = known.acts_on != acts_on;
            *known = Record {
                version: version.clone(),
                acts_on,
                seen: Instant::now(),
            };
            changed
        }
        None => {
            records.insert(
                name.clone(),
                Record {
                    version: version.clone(),
                    acts_on,
                    seen: Instant::now(),
                },
            );
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use kube::core::ObjectMeta;

    use super::*;

    fn lease(name: &str, version: &str, holder: &str, acked: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(version.into()),
                annotations: Some(BTreeMap::from([(ACKED_ANNOTATION.into(), acked.into())])),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_record_keeps_the_time_its_version_was_first_seen() {
        let sightings = Sightings::new("me".into());
        let mut listing = HashSet::new();
        sightings.apply(Event::Apply(lease("a", "1", "x", "")), &mut listing);
        let first = sightings.first_seen("a", "1").unwrap();
        // A relist delivers the same record again: its time does not move.
        sightings.apply(Event::Init, &mut listing);
        sightings.apply(Event::InitApply(lease("a", "1", "x", "")), &mut listing);
        sightings.apply(Event::InitDone, &mut listing);
        assert_eq!(sightings.first_seen("a", "1"), Some(first));
        assert_eq!(sightings.first_seen("a", "2"), None);
        sightings.apply(Event::Apply(lease("a", "2", "x", "")), &mut listing);
        assert!(sightings.first_seen("a", "2").unwrap() >= first);
        assert_eq!(sightings.first_seen("a", "1"), None);
    }

    #[test]
    fn only_a_change_a_reader_acts_on_signals() {
        let sightings = Sightings::new("me".into());
        let mut listing = HashSet::new();
        let mut changes = |event| {
            sightings.apply(event, &mut listing);
            futures::FutureExt::now_or_never(sightings.changed()).is_some()
        };
        assert!(
            changes(Event::Apply(lease("a", "1", "x", ""))),
            "a new Lease"
        );
        assert!(
            !changes(Event::Apply(lease("a", "2", "x", ""))),
            "a renewal"
        );
        assert!(
            changes(Event::Apply(lease("a", "3", "x", "v1"))),
            "a new view"
        );
        assert!(changes(Event::Apply(lease("a", "4", "", "v1"))), "released");
        assert!(changes(Event::Delete(lease("a", "4", "", "v1"))), "gone");
        assert!(
            !changes(Event::Apply(lease("me", "6", "z", "v2"))),
            "our own"
        );
        assert!(changes(Event::Apply(lease("b", "5", "y", ""))));
        // A relist that finds what was known changes nothing ...
        assert!(!changes(Event::Init));
        assert!(!changes(Event::InitApply(lease("b", "5", "y", ""))));
        assert!(!changes(Event::InitApply(lease("me", "6", "z", "v2"))));
        assert!(!changes(Event::InitDone));
        // ... one that misses a Lease deleted meanwhile forgets it.
        assert!(!changes(Event::Init));
        assert!(changes(Event::InitDone));
        assert_eq!(sightings.first_seen("b", "5"), None);
    }
}
