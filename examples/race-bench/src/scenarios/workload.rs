//! What a scenario asks of a contender: the objects, how each is created
//! and must end, and the logical writes, each raced or not.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::RaceMode;

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
    /// The other controller adds [`FOREIGN`](super::metadata::FOREIGN) after our controller read the
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
    /// Labels at creation, besides [`BENCH_LABEL`](super::metadata::BENCH_LABEL).
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
    /// Whether a separate client adds [`FOREIGN`](super::metadata::FOREIGN) to every object at
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
