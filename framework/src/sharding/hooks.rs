//! The few places a controller meets the gate: admission of a key,
//! cancellation at the fence, the watch selector, and wake-ups.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;

use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::gate::{InFlight, ShardGate};
use crate::Action;
use crate::object::AnyObject;

/// Whether a reconcile may run on this replica.
#[derive(Debug)]
pub(crate) enum Admission {
    /// The manager is not sharded: always.
    Unsharded,
    /// Yes; the key counts as in a reconcile here until this is dropped.
    Admitted(#[allow(dead_code)] InFlight),
    /// No: another replica owns the key, or it has not been handed over
    /// yet. A wake offers the key again once it may start.
    Refused,
}

/// One controller's place at its replica's gate.
#[derive(Debug)]
pub(crate) struct Seat {
    gate: Arc<ShardGate>,
    seat: usize,
}

impl Seat {
    /// A new seat at `gate` for one controller.
    pub(crate) fn at(gate: &Arc<ShardGate>) -> Self {
        Seat {
            gate: gate.clone(),
            seat: gate.seat(),
        }
    }
}

/// Asks the gate whether `key` may be reconciled at its seat now
/// (`None`: the manager is not sharded).
pub(crate) fn admit(gated: Option<(&Seat, &str)>) -> Admission {
    match gated {
        None => Admission::Unsharded,
        Some((s, key)) => match s.gate.try_start(s.seat, key) {
            Some(in_flight) => Admission::Admitted(in_flight),
            None => Admission::Refused,
        },
    }
}

/// Runs `work`, dropping it (and returning `None`) if the membership fence
/// passes first: a replica that could not renew its Lease stops working
/// before the Lease can expire and the key move.
pub(crate) async fn fenced<F: Future>(seat: Option<&Seat>, work: F) -> Option<F::Output> {
    match seat {
        None => Some(work.await),
        Some(s) => tokio::select! {
            output = work => Some(output),
            () = s.gate.fenced() => None,
        },
    }
}

/// After the fence cancelled the reconcile of `key` at its seat: what to
/// do with it. A wake offers it again once it may start, unless it may
/// start already (the fence was restored meanwhile): then it is requeued
/// now.
pub(crate) fn cancelled(gated: Option<(&Seat, &str)>) -> Action {
    match gated {
        Some((s, key)) if !s.gate.cancelled(s.seat, key) => Action::await_change(),
        _ => Action::requeue(Duration::ZERO),
    }
}

/// The watch configuration: in `label` mode only this replica's shard's
/// label; in `selector` mode the marker of its current shard selector
/// (see [`selectors`](super::selectors)).
pub(crate) fn watcher_config(gate: Option<&Arc<ShardGate>>) -> watcher::Config {
    if let Some(marker) = gate
        .and_then(|g| g.selectors.get())
        .and_then(|s| s.marker())
    {
        return watcher::Config::default().labels(&marker);
    }
    match gate.and_then(|g| g.selector.get()) {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    }
}

/// In `selector` mode, yields whenever this replica's shard selector
/// changes, so the sharded watches restart with it; else never.
pub(crate) fn selector_changes(gate: &Arc<ShardGate>) -> futures::stream::BoxStream<'static, ()> {
    match gate.selectors.get() {
        Some(selectors) => selectors.changes().boxed(),
        None => futures::stream::pending().boxed(),
    }
}

/// The gate key of `object` at `seat` (see [`ShardGate::key_of`]).
pub(crate) fn key_of<K: kube::Resource>(seat: &Seat, object: &K) -> String {
    use kube::ResourceExt as _;
    let namespace = object.namespace().unwrap_or_default();
    seat.gate.key_of(
        &namespace,
        &object.name_any(),
        object.meta().uid.as_deref().unwrap_or_default(),
    )
}

/// The keys to reconcile again on every wake: those that may start now
/// and were not handled since they last could — they moved here, or were
/// refused or cancelled — and never those that stayed (`None` when the
/// manager is not sharded). Lets the gate count the keys in the store.
pub(crate) fn attach<K: AnyObject>(
    seat: Option<&Seat>,
    api: &Api<K>,
    dyntype: &K::DynamicType,
    store: crate::cache::Store<K>,
) -> Option<futures::stream::BoxStream<'static, ObjectRef<K>>> {
    let Seat { gate, seat } = seat?;
    if let Some(label) = gate.label.get() {
        gate.add_labeller(super::sharder::labeller(
            api.clone(),
            label.clone(),
            dyntype.clone(),
        ));
    }
    let (listed, lister) = (store.clone(), gate.clone());
    gate.add_lister(Box::new(move || keys_of(&listed, &lister)));
    let (resolving, resolver, known) = (store.clone(), gate.clone(), dyntype.clone());
    gate.add_resolver(Box::new(move |key| {
        let object = object_ref::<K>(key, &known);
        let uid = resolving.uid(&object)?;
        Some(resolver.key_of(
            object.namespace.as_deref().unwrap_or_default(),
            &object.name,
            &uid,
        ))
    }));
    let (cached, known) = (store.clone(), dyntype.clone());
    gate.watch_seat(
        *seat,
        Box::new(move |key| cached.contains(&object_ref::<K>(key, &known))),
    );
    let (offered, seat, dyntype) = (gate.clone(), *seat, dyntype.clone());
    let triggers = gate.wakes().flat_map(move |()| {
        let keys = offered.offer(seat, keys_of(&store, &offered));
        let dyntype = dyntype.clone();
        futures::stream::iter(keys.into_iter().map(move |key| object_ref(&key, &dyntype)))
    });
    Some(triggers.boxed())
}

/// The gate keys of every object in `store`: `namespace/name`, with the
/// hash after it in `selector` mode.
fn keys_of<K: AnyObject>(store: &crate::cache::Store<K>, gate: &ShardGate) -> Vec<String> {
    if gate.placement.get().is_some() {
        // The uid is read from each object's JSON: this runs every retry
        // period, and decoding the whole cache each time cost a decoded
        // copy of every object (the process's peak) and most of its CPU.
        return store
            .identities()
            .into_iter()
            .map(|((namespace, name), uid)| {
                gate.key_of(&namespace.unwrap_or_default(), &name, &uid)
            })
            .collect();
    }
    store
        .keys()
        .into_iter()
        .map(|(namespace, name)| format!("{}/{name}", namespace.unwrap_or_default()))
        .collect()
}

/// The reference of the object whose key is `namespace/name` (with
/// `/<hash>` after it in `selector` mode).
fn object_ref<K: AnyObject>(key: &str, dyntype: &K::DynamicType) -> ObjectRef<K> {
    let (namespace, name) = key.split_once('/').unwrap_or(("", key));
    let name = name.split('/').next().unwrap_or(name);
    let object = ObjectRef::new_with(name, dyntype.clone());
    if namespace.is_empty() {
        object
    } else {
        object.within(namespace)
    }
}
