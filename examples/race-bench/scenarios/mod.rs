//! What each scenario creates, the writes it asks for, and the state every
//! object must end in.

mod argo;
mod hotspot;
mod kueue;

use serde_json::{Value, json};

use crate::race::Scenario;

/// Our finalizer in `kueue`.
pub(crate) const OURS: &str = "kueue.x-k8s.io/managed";
/// The finalizer the separate client adds in `kueue`.
pub(crate) const FOREIGN: &str = "example.com/foreign";
/// Argo's finalizer, removed by both paths in `argo`.
pub(crate) const ARGO: &str = "workflows.argoproj.io/status";
/// Another owner's finalizer behind Argo's on half the pods in `argo`: an
/// index-based removal that runs twice takes it away by mistake.
pub(crate) const KEEP: &str = "example.com/keep";
/// The label Argo's "label pod completed" path sets.
pub(crate) const COMPLETED: &str = "workflows.argoproj.io/completed";
/// The label every benchmark pod carries.
pub(crate) const BENCH_LABEL: &str = "race.concord.dev/bench";

/// One logical write: what the scenario wants changed on one object. Every
/// contender encodes the same change its own way.
#[derive(Clone, Debug, Default)]
pub(crate) struct Change {
    /// Remove this finalizer if present.
    pub(crate) remove_finalizer: Option<&'static str>,
    /// Set this label.
    pub(crate) set_label: Option<(String, String)>,
}

/// A write of `change` to object number `object`.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) object: u32,
    pub(crate) change: Change,
}

/// How the controller's writer tasks take their work.
#[derive(Debug)]
pub(crate) enum Lanes {
    /// One work queue shared by every writer task, in this order.
    Shared(Vec<Item>),
    /// One queue per writer task, each worked through in order.
    PerWriter(Vec<Vec<Item>>),
}

impl Lanes {
    /// Logical writes in all.
    pub(crate) fn len(&self) -> usize {
        match self {
            Lanes::Shared(items) => items.len(),
            Lanes::PerWriter(lanes) => lanes.iter().map(Vec::len).sum(),
        }
    }
}

/// One object: how it is created and how it must end.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spec {
    /// Finalizers at creation.
    pub(crate) finalizers: Vec<&'static str>,
    /// Labels at creation, besides [`BENCH_LABEL`].
    pub(crate) labels: Vec<(&'static str, &'static str)>,
    /// Exactly the finalizers the object must end with.
    pub(crate) final_finalizers: Vec<&'static str>,
    /// Labels the object must end with.
    pub(crate) final_labels: Vec<(String, String)>,
}

/// Everything a scenario asks of one contender.
#[derive(Debug)]
pub(crate) struct Workload {
    /// The objects, by number.
    pub(crate) specs: Vec<Spec>,
    /// The controller's writes.
    pub(crate) lanes: Lanes,
    /// Whether a separate client adds [`FOREIGN`] to every object meanwhile.
    pub(crate) foreign: bool,
}

impl Workload {
    /// The workload of `scenario`, the same for every contender of a run.
    pub(crate) fn new(scenario: Scenario, pods: u32, writers: u32, seed: u64) -> Self {
        match scenario {
            Scenario::Kueue => kueue::workload(pods),
            Scenario::Argo => argo::workload(pods, seed),
            Scenario::Hotspot => hotspot::workload(pods, writers),
        }
    }
}

/// The name of object number `index`.
pub(crate) fn name(index: u32) -> String {
    format!("rb-{index:06}")
}

/// The number of the object called `name`.
pub(crate) fn index(name: &str) -> Option<u32> {
    name.strip_prefix("rb-")?.parse().ok()
}

/// The manifest of object number `index`: a pod that never runs (no node,
/// no service-account token), so only its metadata changes.
pub(crate) fn manifest(index: u32, spec: &Spec) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(BENCH_LABEL.into(), json!("true"));
    for (k, v) in &spec.labels {
        labels.insert((*k).into(), json!(v));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name(index), "labels": labels, "finalizers": spec.finalizers},
        "spec": {
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "containers": [{"name": "main", "image": "registry.invalid/pause:1"}],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(index(&name(42)), Some(42));
        assert_eq!(index("other"), None);
    }

    #[test]
    fn every_scenario_plans_writes_for_its_objects() {
        for scenario in [Scenario::Kueue, Scenario::Argo, Scenario::Hotspot] {
            let w = Workload::new(scenario, 100, 4, 7);
            assert!(w.lanes.len() >= 100, "{scenario}");
            assert!(!w.specs.is_empty());
        }
    }
}
