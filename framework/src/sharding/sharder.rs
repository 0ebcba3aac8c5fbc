//! `label` mode's sharder: on the replica holding the sharder Lease, a
//! metadata-only watch of every object labels each with its owner's member
//! id, at creation and whenever the ring changes, so each replica's own
//! watch (a label selector) caches only its shard.
//!
//! Labels are placed concurrently, up to [`PLACEMENTS_IN_FLIGHT`] at once,
//! with at most one request per object in flight: a second change of the
//! same object waits for the first request's answer and is then decided
//! again from the newest cached copy, so labels cannot land out of order.
//! Decisions are made from the sharder's store only, never from copies
//! held beside it, and only once a (re)list is complete.
//! A label only decides which cache holds an object; the gate alone
//! decides who reconciles it, so placing labels faster changes nothing
//! about who may write.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
#[allow(deprecated)]
// its replacement needs the scope of `K` statically; `api` may be namespaced or not
use kube::runtime::metadata_watcher;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::gate::{Labeller, ShardGate};
use crate::object::AnyObject;

/// Label requests the sharder has in flight at most.
pub(crate) const PLACEMENTS_IN_FLIGHT: usize = 64;

/// How long a failed label request waits before its object is decided again.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// The sharder for the objects `api` lists, labelling with `label`.
pub(crate) fn labeller<K: AnyObject>(
    api: Api<K>,
    label: String,
    dyntype: K::DynamicType,
) -> Labeller {
    Box::new(move |gate: Arc<ShardGate>| {
        Box::pin(async move {
            let client: Client = api.clone().into_client();
            let writer = reflector::store::Writer::<PartialObjectMeta<K>>::new(dyntype.clone());
            let store = writer.as_reader();
            // The sharder needs names, uids and labels only: dropping the
            // annotations and managed fields before they are cached keeps
            // its extra memory to a small fraction of a full cache.
            #[allow(deprecated)]
            let watch = metadata_watcher(api, watcher::Config::default()).modify(
                |object: &mut PartialObjectMeta<K>| {
                    object.metadata.annotations = None;
                    object.metadata.managed_fields = None;
                },
            );
            let events = reflector::reflector(writer, watch).default_backoff();
            let mut events = std::pin::pin!(events);
            let mut wakes = std::pin::pin!(gate.wakes());
            let mut placer = Placer::new(client, gate.clone(), label, store, dyntype);
            let mut retries = tokio::time::interval(RETRY_AFTER);
            loop {
                tokio::select! {
                    event = events.try_next() => match event {
                        // The store has applied the event: decide from it.
                        Ok(Some(watcher::Event::Apply(object))) => {
                            placer.enqueue(placer.key(&object));
                        }
                        // A (re)list is complete only now: until then the
                        // store holds the previous state.
                        Ok(Some(watcher::Event::InitDone)) => placer.offer_all(),
                        Ok(Some(_)) => {}
                        Ok(None) => return,
                        Err(error) => tracing::warn!(%error, "the sharder's watch failed"),
                    },
                    wake = wakes.next() => {
                        if wake.is_none() {
                            return;
                        }
                        placer.offer_all();
                    }
                    Some((object, outcome)) = placer.in_flight.next() => {
                        placer.answered(object, outcome);
                    }
                    _ = retries.tick() => placer.retry_failed(),
                }
                placer.start();
            }
        })
    })
}

type Ref<K> = ObjectRef<PartialObjectMeta<K>>;

/// What a label request answered: the resourceVersion of the cached copy
/// it was decided from, once it succeeded.
type Answer = Option<String>;

/// The objects waiting for a decision and the label requests in flight.
struct Placer<K: AnyObject> {
    client: Client,
    dyntype: K::DynamicType,
    gate: Arc<ShardGate>,
    label: String,
    store: Store<PartialObjectMeta<K>>,
    queue: VecDeque<Ref<K>>,
    queued: HashSet<Ref<K>>,
    in_flight: FuturesUnordered<BoxFuture<'static, (Ref<K>, Answer)>>,
    busy: HashSet<Ref<K>>,
    /// Offered again while a request of theirs was in flight.
    deferred: HashSet<Ref<K>>,
    /// The cached resourceVersion each successful request was decided
    /// from: until the watch shows a newer copy, the cache still holds the
    /// old label, and the object needs no second request.
    written: HashMap<Ref<K>, String>,
    /// Objects whose last request failed, offered again at the next tick.
    failed: Vec<Ref<K>>,
    /// Objects to relabel once the ring has settled.
    parked: HashSet<Ref<K>>,
}

impl<K: AnyObject> Placer<K> {
    fn new(
        client: Client,
        gate: Arc<ShardGate>,
        label: String,
        store: Store<PartialObjectMeta<K>>,
        dyntype: K::DynamicType,
    ) -> Self {
        Placer {
            client,
            dyntype,
            gate,
            label,
            store,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            in_flight: FuturesUnordered::new(),
            busy: HashSet::new(),
            deferred: HashSet::new(),
            written: HashMap::new(),
            failed: Vec::new(),
            parked: HashSet::new(),
        }
    }

    /// Queues an object for a decision from the store, or, while a
    /// request of its own is in flight, for one after the answer.
    fn enqueue(&mut self, key: Ref<K>) {
        if self.busy.contains(&key) {
            self.deferred.insert(key);
        } else if self.queued.insert(key.clone()) {
            self.queue.push_back(key);
        }
    }

    /// The store key of `object`.
    fn key(&self, object: &PartialObjectMeta<K>) -> Ref<K> {
        ObjectRef::from_obj_with(object, self.dyntype.clone())
    }

    /// Every cached object: the view changed.
    fn offer_all(&mut self) {
        for object in self.store.state() {
            self.enqueue(self.key(object.as_ref()));
        }
    }

    fn answered(&mut self, key: Ref<K>, answer: Answer) {
        self.busy.remove(&key);
        match answer {
            Some(version) => {
                self.written.insert(key.clone(), version);
                self.gate.stats.relabels.fetch_add(1, Relaxed);
            }
            None => {
                self.written.remove(&key);
                self.failed.push(key.clone());
            }
        }
        if self.deferred.remove(&key) {
            self.enqueue(key);
        }
    }

    fn retry_failed(&mut self) {
        for key in std::mem::take(&mut self.failed) {
            self.enqueue(key);
        }
    }

    /// Sends label requests for queued objects, up to the bound. While a
    /// replica of another configuration may own our objects, nothing is
    /// relabelled; while a handover is under way, only objects without a
    /// label are placed (the view may still change; relabelling waits for
    /// the ring to settle, so a burst of joins moves each object once).
    fn start(&mut self) {
        if !self.gate.refused().is_empty() {
            return;
        }
        let settled = self.gate.settled() && !self.gate.behind();
        if settled && !self.parked.is_empty() {
            for key in std::mem::take(&mut self.parked) {
                self.enqueue(key);
            }
        }
        let view = self.gate.target();
        while self.busy.len() < PLACEMENTS_IN_FLIGHT {
            let Some(object) = self.queue.pop_front() else {
                break;
            };
            self.queued.remove(&object);
            let Some(cached) = self.store.get(&object) else {
                self.written.remove(&object);
                continue;
            };
            let key = format!(
                "{}/{}",
                cached.namespace().unwrap_or_default(),
                cached.name_any()
            );
            let Some(owner) = view.owner(&key) else {
                continue;
            };
            let current = cached.labels().get(&self.label);
            if current.map(String::as_str) == Some(owner) {
                self.written.remove(&object);
                continue;
            }
            if current.is_some() && !settled {
                self.parked.insert(object);
                continue;
            }
            let version = cached.resource_version().unwrap_or_default();
            if self.written.get(&object) == Some(&version) {
                continue;
            }
            self.busy.insert(object.clone());
            let request = self.request(&cached, owner.to_owned(), key);
            self.in_flight.push(Box::pin(async move {
                (object, request.await.then_some(version))
            }));
        }
    }

    /// Merge-patches `label: owner` onto `object`.
    fn request(
        &self,
        object: &PartialObjectMeta<K>,
        owner: String,
        key: String,
    ) -> BoxFuture<'static, bool> {
        let resource = ApiResource::erase::<K>(&self.dyntype);
        let namespace = object.namespace();
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        // A map key alone in a merge patch: concurrent writers' other labels
        // and finalizers are untouched; the uid keeps it off a recreated object.
        let patch =
            json!({"metadata": {"uid": object.uid(), "labels": {self.label.clone(): owner}}});
        let name = object.name_any();
        Box::pin(async move {
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => true,
                Err(error) => {
                    tracing::debug!(%error, object = %key, "labelling an object with its shard failed");
                    false
                }
            }
        })
    }
}
