//! Kueue's incident: our controller removes its finalizer from every pod
//! while another controller adds its own to the same pods.

use super::metadata::{FOREIGN, OURS};
use super::workload::{Change, Item, Lanes, Race, Racing, Spec, Workload, raced_set};
use crate::RaceMode;

/// `pods` pods carrying [`OURS`]; one removal each, in creation order, on a
/// shared work queue. In lockstep mode the other controller adds
/// [`FOREIGN`] inside our controller's window on the raced pods (and only
/// there); in random mode a separate client adds it to every pod at random
/// moments.
pub(super) fn workload(pods: u32, seed: u64, racing: Racing) -> Workload {
    let raced = raced_set(pods, seed, racing);
    let random = racing.mode == RaceMode::Random;
    let specs = raced
        .iter()
        .map(|&raced| Spec {
            finalizers: vec![OURS],
            final_finalizers: if raced || random {
                vec![FOREIGN]
            } else {
                vec![]
            },
            ..Spec::default()
        })
        .collect();
    let items = (0..pods)
        .zip(&raced)
        .map(|(object, &raced)| Item {
            object,
            change: Change {
                remove_finalizer: Some(OURS),
                set_label: None,
            },
            race: if raced { Race::Foreign } else { Race::None },
        })
        .collect();
    Workload {
        specs,
        lanes: Lanes::Shared(items),
        foreign: random,
    }
}
