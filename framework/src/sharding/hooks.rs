//! The few places a controller meets the gate: admission of a key,
//! cancellation at the fence, the watch selector, and wake-ups.

use std::future::Future;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;

use super::gate::{InFlight, ShardGate};
use crate::AnyObject;

/// Whether a reconcile may run on this replica.
#[derive(Debug)]
pub(crate) enum Admission {
    /// The manager is not sharded: always.
    Unsharded,
    /// Yes; the key counts as in a reconcile here until this is dropped.
    Admitted(#[allow(dead_code)] InFlight),
    /// No: another replica owns the key, or it has not been handed over yet.
    Refused,
}

/// Asks the gate whether `key` may be reconciled here now.
pub(crate) fn admit(gate: Option<&Arc<ShardGate>>, key: &str) -> Admission {
    match gate {
        None => Admission::Unsharded,
        Some(gate) => match gate.try_start(key) {
            Some(in_flight) => Admission::Admitted(in_flight),
            None => Admission::Refused,
        },
    }
}

/// Runs `work`, dropping it (and returning `None`) if the membership fence
/// passes first: a replica that could not renew its Lease stops working
/// before the Lease can expire and the key move.
pub(crate) async fn fenced<F: Future>(gate: Option<&Arc<ShardGate>>, work: F) -> Option<F::Output> {
    match gate {
        None => Some(work.await),
        Some(gate) => tokio::select! {
            output = work => Some(output),
            () = gate.fenced() => None,
        },
    }
}

/// The watch configuration: in `label` mode only this replica's shard.
pub(crate) fn watcher_config(gate: Option<&Arc<ShardGate>>) -> watcher::Config {
    match gate.and_then(|g| g.selector.get()) {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    }
}

/// Offers every cached object to the gate again whenever keys may have
/// become startable, and lets the gate count the keys in the store.
pub(crate) fn attach<K: AnyObject>(
    gate: Option<&Arc<ShardGate>>,
    api: &Api<K>,
    dyntype: &K::DynamicType,
    controller: Controller<K>,
) -> Controller<K> {
    let Some(gate) = gate else {
        return controller;
    };
    if let Some(label) = gate.label.get() {
        gate.add_labeller(super::sharder::labeller(
            api.clone(),
            label.clone(),
            dyntype.clone(),
        ));
    }
    let store = controller.store();
    gate.add_lister(Box::new(move || {
        store
            .state()
            .iter()
            .map(|o| format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()))
            .collect()
    }));
    controller.reconcile_all_on(gate.wakes())
}

/// The gate type controllers hold.
pub(crate) type Gate = ShardGate;
