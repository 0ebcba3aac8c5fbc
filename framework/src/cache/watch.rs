//! The watch's side of a shared cache: the task that drives its watches
//! and applies each event to the store, in either layout, announcing what
//! it applied to the subscribers' queues.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch as signal;

use super::key::Key;
use super::queue::Lane;
use super::store::Writer;
use super::{SharedCache, Synced, lock, object_ref, streaming};
use crate::object::AnyObject;
use crate::task::Task;

impl<K: AnyObject> SharedCache<K> {
    /// The task driving the shared watch until shutdown.
    pub(super) fn driver(self: Arc<Self>) -> Task {
        Box::new(move |mut shutdown: signal::Receiver<bool>| {
            Box::pin(async move {
                let writer = lock(&self.writer).take();
                let Some(mut writer) = writer else {
                    return;
                };
                let trim = self.trim;
                let streaming = streaming::serves_streaming_lists(&self.api).await;
                // A shard selection that changes (`selector` sharding)
                // restarts the watches: their new lists replace the store
                // as a relist would.
                let mut changes = self.selection.changes();
                let run = async {
                    let mut restarted = false;
                    loop {
                        self.quiet.store(restarted, Ordering::Release);
                        restarted = true;
                        let mut config = self.selection.resolve();
                        if streaming {
                            config = config.streaming_lists();
                        }
                        let client = self.selection.shard_client(&config);
                        let streams = self.apis.iter().enumerate().map(|(i, api)| {
                            match &client {
                                Some(client) => super::selected::watch(
                                    client.clone(),
                                    api,
                                    &self.dyntype,
                                    config.clone(),
                                ),
                                None => watcher(api.clone(), config.clone()).boxed(),
                            }
                            .default_backoff()
                            .modify(move |object: &mut K| trim.apply(object))
                            .map(move |event| (i, event))
                            .boxed()
                        });
                        let mut events = futures::stream::select_all(streams);
                        let mut relists = Relists::new(self.apis.len());
                        loop {
                            tokio::select! {
                                event = events.next() => {
                                    let Some((i, event)) = event else { return };
                                    match event {
                                        Ok(event) => self.apply(&mut writer, &mut relists, i, event),
                                        Err(error) => tracing::debug!(%error, "shared watch"),
                                    }
                                    self.changed.notify_waiters();
                                }
                                change = changes.next() => {
                                    if change.is_none() {
                                        changes = Box::pin(futures::stream::pending());
                                    }
                                    break;
                                }
                            }
                        }
                    }
                };
                tokio::select! {
                    () = run => {}
                    _ = shutdown.wait_for(|stop| *stop) => {}
                }
                self.sync.send_if_modified(|sync| {
                    let listing = *sync == Synced::Listing;
                    if listing {
                        *sync = Synced::Stopped;
                    }
                    listing
                });
            })
        })
    }

    /// Applies `event` of the `i`th watch to the store and announces what
    /// it applied. One watch's events go to the store as they come; with
    /// several (one per namespace), a watch's relist must not replace the
    /// others' objects, so its listed objects are applied one by one and,
    /// when its list is complete, the objects of its namespace it no longer
    /// listed are deleted.
    pub(super) fn apply(
        &self,
        writer: &mut Writer<K>,
        relists: &mut Relists<K>,
        i: usize,
        event: watcher::Event<K>,
    ) {
        let unchanged = match &event {
            watcher::Event::InitApply(object) => self.listed_unchanged(object),
            _ => false,
        };
        if matches!(event, watcher::Event::InitDone) {
            self.quiet.store(false, Ordering::Release);
        }
        if self.apis.len() == 1 {
            let old = match &event {
                watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                    self.old(object)
                }
                _ => None,
            };
            writer.apply_watcher_event(&event);
            self.index(&event);
            let first_list = !self.synced.load(Ordering::Acquire);
            match event {
                watcher::Event::Apply(object) => {
                    self.announce(old.as_deref(), object, Lane::Changed);
                }
                // The store buffers its own copy until the list is in: the
                // queues take that one then, not a second one now.
                watcher::Event::InitApply(object) if first_list => {
                    lock(&self.subscribers).retain(|s| s.announce_first_listed(&object));
                }
                watcher::Event::InitApply(object) => {
                    if !unchanged {
                        self.announce(old.as_deref(), object, Lane::Listed);
                    }
                }
                // The queues hear of no deletion: an object deleted
                // before its turn is not handed out.
                watcher::Event::Delete(_) => {}
                // The store holds the list now.
                watcher::Event::InitDone => {
                    if first_list {
                        for subscriber in lock(&self.subscribers).iter() {
                            subscriber.fill(|namespace, name| {
                                self.objects
                                    .get(&object_ref(namespace, name, &self.dyntype))
                            });
                        }
                    }
                    self.mark_synced();
                }
                watcher::Event::Init => {}
            }
            return;
        }
        match event {
            watcher::Event::Init => {
                if let Some(relist) = relists.listing.get_mut(i) {
                    *relist = Some(HashSet::new());
                }
            }
            watcher::Event::InitApply(object) | watcher::Event::Apply(object) => {
                let lane = match relists.listing.get(i) {
                    Some(Some(_)) => Lane::Listed,
                    _ => Lane::Changed,
                };
                let key = self.key(&object);
                if let Some(Some(listed)) = relists.listing.get_mut(i) {
                    listed.insert(key.clone());
                }
                let old = self.old(&object);
                writer.apply_watcher_event(&watcher::Event::Apply(object.clone()));
                self.indexes.applied(&index_key(&object), &object);
                self.tell(&object, false);
                if !unchanged {
                    self.announce(old.as_deref(), object, lane);
                }
            }
            watcher::Event::Delete(object) => {
                self.indexes.removed(&index_key(&object));
                writer.apply_watcher_event(&watcher::Event::Delete(object.clone()));
                self.tell(&object, true);
            }
            watcher::Event::InitDone => {
                let Some(Some(listed)) = relists.listing.get_mut(i).map(Option::take) else {
                    return;
                };
                let namespace = self.apis.get(i).and_then(|api| api.namespace());
                for stale in self.objects.keys().into_iter().filter(|(ns, name)| {
                    ns.as_deref() == namespace
                        && !listed.contains(&object_ref(ns.as_deref(), name, &self.dyntype))
                }) {
                    self.delete(writer, &stale);
                }
                if let Some(listed_once) = relists.listed_once.get_mut(i) {
                    *listed_once = true;
                }
                if !relists.ready && relists.listed_once.iter().all(|l| *l) {
                    // Every namespace is listed: the store is complete.
                    relists.ready = true;
                    if let Writer::Decoded(writer) = writer {
                        // A relist of what kube-runtime's store holds marks
                        // it ready (its controllers start reconciling once
                        // it is) without changing it. A compact cache's
                        // controllers' stores are ready from the start.
                        writer.apply_watcher_event(&watcher::Event::Init);
                        for object in self.objects.state() {
                            writer.apply_watcher_event(&watcher::Event::InitApply(
                                object.as_ref().clone(),
                            ));
                        }
                        writer.apply_watcher_event(&watcher::Event::InitDone);
                    }
                    self.mark_synced();
                }
            }
        }
    }

    /// Keeps the indexes as the store of a single watch: a list's objects
    /// are indexed when the store takes them, once it is complete.
    fn index(&self, event: &watcher::Event<K>) {
        match event {
            watcher::Event::Apply(object) => {
                self.indexes.applied(&index_key(object), object);
                self.tell(object, false);
            }
            watcher::Event::Delete(object) => {
                self.indexes.removed(&index_key(object));
                self.tell(object, true);
            }
            watcher::Event::Init => self.indexes.list_started(),
            watcher::Event::InitApply(object) => {
                self.indexes.listed(&index_key(object), object);
                self.tell(object, false);
            }
            watcher::Event::InitDone => self.indexes.list_done(|(namespace, name)| {
                self.objects
                    .contains(&object_ref(namespace.as_deref(), name, &self.dyntype))
            }),
        }
    }

    /// Deletes `stale` from the store (a relist no longer listed it).
    fn delete(&self, writer: &mut Writer<K>, stale: &Key) {
        self.indexes.removed(stale);
        let key = object_ref(stale.0.as_deref(), &stale.1, &self.dyntype);
        match writer {
            Writer::Decoded(writer) => {
                if let Some(object) = self.objects.get(&key) {
                    writer.apply_watcher_event(&watcher::Event::Delete(object.as_ref().clone()));
                }
            }
            Writer::Compact(writer) => {
                writer.remove(stale);
            }
        }
    }
}

/// An object's place in the store and its indexes.
fn index_key<K: AnyObject>(object: &K) -> Key {
    (object.namespace(), object.name_any())
}

/// Where each of a multi-namespace cache's watches is in its lists.
pub(super) struct Relists<K: AnyObject> {
    /// The objects its current list has delivered, while it lists.
    listing: Vec<Option<HashSet<ObjectRef<K>>>>,
    /// Whether its first list is complete.
    listed_once: Vec<bool>,
    /// Whether the store was marked ready.
    ready: bool,
}

impl<K: AnyObject> Relists<K> {
    pub(super) fn new(watches: usize) -> Self {
        Relists {
            listing: (0..watches).map(|_| None).collect(),
            listed_once: vec![false; watches],
            ready: false,
        }
    }
}
