//! What each scenario creates, the writes it asks for, and the state every
//! object must end in.

mod argo;
mod hotspot;
mod kueue;
mod metadata;
mod pods;
mod workload;

pub(crate) use metadata::{BENCH_LABEL, FOREIGN};
pub(crate) use pods::{index, manifest, name};
pub(crate) use workload::{Change, Item, Lanes, Race, Racing, Spec, Workload};

use crate::Scenario;

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RaceMode;

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
