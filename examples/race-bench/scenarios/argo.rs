//! Argo Workflows' incident: the informer's delete handler and the "label
//! pod completed" action remove the same finalizer from a pod at once.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{ARGO, COMPLETED, Change, Item, KEEP, Lanes, Spec, Workload};

/// `pods` pods carrying [`ARGO`] (half of them, chosen by `seed`, with
/// [`KEEP`] behind it) and `completed=false`. Each pod's two writes sit next
/// to each other on the shared queue, so two writer tasks take them at the
/// same moment from the same observed object.
pub(super) fn workload(pods: u32, seed: u64) -> Workload {
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
    let mut items = Vec::with_capacity(pods as usize * 2);
    for object in 0..pods {
        // DeleteFunc: remove the finalizer.
        items.push(Item {
            object,
            change: Change {
                remove_finalizer: Some(ARGO),
                set_label: None,
            },
        });
        // labelPodCompleted: remove the finalizer and label the pod.
        items.push(Item {
            object,
            change: Change {
                remove_finalizer: Some(ARGO),
                set_label: Some((COMPLETED.into(), "true".into())),
            },
        });
    }
    Workload {
        specs,
        lanes: Lanes::Shared(items),
        foreign: false,
    }
}
