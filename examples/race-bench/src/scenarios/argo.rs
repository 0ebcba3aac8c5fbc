//! Argo Workflows' incident: the informer's delete handler and the "label
//! pod completed" action remove the same finalizer from a pod at once.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::metadata::{ARGO, COMPLETED, KEEP};
use super::workload::{Change, Item, Lanes, Race, Racing, Spec, Workload, raced_set};

/// `pods` pods carrying [`ARGO`] (half of them, chosen by `seed`, with
/// [`KEEP`] behind it) and `completed=false`. On a raced pod (lockstep
/// mode) one writer task sends both paths' writes at once from the same
/// cached object; on the others the two writes sit next to each other on
/// the shared queue and race only when two tasks happen to take them
/// together.
pub(super) fn workload(pods: u32, seed: u64, racing: Racing) -> Workload {
    let mut rng = StdRng::seed_from_u64(seed);
    let specs = (0..pods)
        .map(|_| {
            let keep = rng.random_bool(0.5);
            Spec {
                finalizers: if keep { vec![ARGO, KEEP] } else { vec![ARGO] },
                labels: vec![(COMPLETED, "false")],
                final_finalizers: if keep { vec![KEEP] } else { vec![] },
                final_labels: vec![(COMPLETED.into(), "true".into())],
            }
        })
        .collect();
    // DeleteFunc: remove the finalizer.
    let delete = Change {
        remove_finalizer: Some(ARGO),
        set_label: None,
    };
    // labelPodCompleted: remove the finalizer and label the pod.
    let complete = Change {
        remove_finalizer: Some(ARGO),
        set_label: Some((COMPLETED.into(), "true".into())),
    };
    let raced = raced_set(pods, seed, racing);
    let mut items = Vec::with_capacity(pods as usize * 2);
    for (object, raced) in (0..pods).zip(raced) {
        if raced {
            items.push(Item {
                object,
                change: delete.clone(),
                race: Race::Twin(complete.clone()),
            });
        } else {
            for change in [&delete, &complete] {
                items.push(Item {
                    object,
                    change: change.clone(),
                    race: Race::None,
                });
            }
        }
    }
    Workload {
        specs,
        lanes: Lanes::Shared(items),
        foreign: false,
    }
}
