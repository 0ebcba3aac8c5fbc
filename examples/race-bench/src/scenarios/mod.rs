//! What each scenario creates, the writes it asks for, and the state every
//! object must end in.

mod argo;
mod hotspot;
mod kueue;

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};

use crate::{RaceMode, Scenario};

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
    /// How this write is raced for certain, if it is.
    pub(crate) race: Race,
}

/// A race brought about on purpose (`--race lockstep`).
#[derive(Clone, Debug, Default)]
pub(crate) enum Race {
    /// None beyond what timing brings.
    #[default]
    None,
    /// The other controller adds [`FOREIGN`] after our controller read the
    /// object from its cache and before it writes.
    Foreign,
    /// A second path of our controller writes this change to the same
    /// object at the same moment, from the same cached object.
    Twin(Change),
}

impl Item {
    /// Logical writes this item stands for: one, two with a twin.
    pub(crate) fn writes(&self) -> usize {
        if matches!(self.race, Race::Twin(_)) {
            2
        } else {
            1
        }
    }
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
            Lanes::Shared(items) => items.iter().map(Item::writes).sum(),
            Lanes::PerWriter(lanes) => lanes.iter().flatten().map(Item::writes).sum(),
        }
    }

    /// Every item, in queue order.
    pub(crate) fn items(&self) -> Vec<&Item> {
        match self {
            Lanes::Shared(items) => items.iter().collect(),
            Lanes::PerWriter(lanes) => lanes.iter().flatten().collect(),
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
    /// Whether a separate client adds [`FOREIGN`] to every object at
    /// random moments meanwhile (`--race random` in `kueue`).
    pub(crate) foreign: bool,
}

/// How a workload is raced: the mode and, in lockstep, the share of pods.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Racing {
    pub(crate) mode: RaceMode,
    pub(crate) intensity: f64,
}

impl Workload {
    /// The workload of `scenario`, the same for every contender of a round.
    pub(crate) fn new(
        scenario: Scenario,
        pods: u32,
        writers: u32,
        seed: u64,
        racing: Racing,
    ) -> Self {
        match scenario {
            Scenario::Kueue => kueue::workload(pods, seed, racing),
            Scenario::Argo => argo::workload(pods, seed, racing),
            Scenario::Hotspot => hotspot::workload(pods, writers),
        }
    }

    /// Writes raced for certain.
    pub(crate) fn raced(&self) -> usize {
        self.lanes
            .items()
            .iter()
            .filter(|i| !matches!(i.race, Race::None))
            .map(|i| i.writes())
            .sum()
    }
}

/// Which of `pods` objects are raced in lockstep: exactly
/// `round(intensity * pods)` of them, chosen by `seed`; none in random mode.
pub(crate) fn raced_set(pods: u32, seed: u64, racing: Racing) -> Vec<bool> {
    let mut raced = vec![false; pods as usize];
    if racing.mode != RaceMode::Lockstep {
        return raced;
    }
    let count = (racing.intensity * f64::from(pods)).round() as usize;
    let mut order: Vec<usize> = (0..pods as usize).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed ^ 0x005e_ed0f_7ace));
    for &i in order.iter().take(count) {
        raced[i] = true;
    }
    raced
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
        let racing = Racing {
            mode: RaceMode::Lockstep,
            intensity: 0.75,
        };
        for scenario in [Scenario::Kueue, Scenario::Argo, Scenario::Hotspot] {
            let w = Workload::new(scenario, 100, 4, 7, racing);
            assert!(w.lanes.len() >= 100, "{scenario}");
            assert!(!w.specs.is_empty());
        }
    }

    #[test]
    fn lockstep_races_exactly_the_intensity_share() {
        let racing = |intensity| Racing {
            mode: RaceMode::Lockstep,
            intensity,
        };
        let kueue = Workload::new(Scenario::Kueue, 1000, 4, 7, racing(0.75));
        assert_eq!(kueue.raced(), 750);
        assert!(!kueue.foreign);
        let raced_specs = kueue
            .specs
            .iter()
            .filter(|s| s.final_finalizers == [FOREIGN])
            .count();
        assert_eq!(
            raced_specs, 750,
            "raced pods must end with the foreign finalizer"
        );
        let argo = Workload::new(Scenario::Argo, 1000, 4, 7, racing(1.0));
        assert_eq!(argo.raced(), 2000);
        assert_eq!(argo.lanes.len(), 2000, "two paths write every pod");
        let random = Racing {
            mode: RaceMode::Random,
            intensity: 0.75,
        };
        let kueue = Workload::new(Scenario::Kueue, 1000, 4, 7, random);
        assert_eq!(kueue.raced(), 0);
        assert!(kueue.foreign);
    }
}
