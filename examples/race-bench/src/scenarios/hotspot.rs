//! Many writers, few objects: every writer keeps setting its own label on
//! each of a handful of pods.

use super::workload::{Change, Item, Lanes, Spec, Workload};

/// How many objects the writers share.
const OBJECTS: u32 = 10;

/// The label writer `w` owns.
fn label(writer: u32) -> String {
    format!("hotspot.concord.dev/w{writer}")
}

/// `writes` writes in all, split evenly over `writers` lanes; writer `w`
/// walks the objects round after round, setting its label to the round
/// number, so each object must end with every writer's last round.
pub(super) fn workload(writes: u32, writers: u32) -> Workload {
    let objects = OBJECTS.min(writes).max(1);
    let mut specs = vec![Spec::default(); objects as usize];
    let mut lanes = Vec::with_capacity(writers as usize);
    for w in 0..writers {
        let share = writes / writers + u32::from(w < writes % writers);
        let mut lane = Vec::with_capacity(share as usize);
        for k in 0..share {
            let object = (k + w) % objects;
            let value = (k / objects).to_string();
            lane.push(Item {
                object,
                change: Change {
                    remove_finalizer: None,
                    set_label: Some((label(w), value)),
                },
                race: super::workload::Race::None,
            });
        }
        lanes.push(lane);
    }
    for lane in &lanes {
        for item in lane {
            if let Some((key, value)) = &item.change.set_label {
                let labels = &mut specs[item.object as usize].final_labels;
                match labels.iter_mut().find(|(k, _)| k == key) {
                    Some(slot) => slot.1 = value.clone(),
                    None => labels.push((key.clone(), value.clone())),
                }
            }
        }
    }
    Workload {
        specs,
        lanes: Lanes::PerWriter(lanes),
        foreign: false,
    }
}
