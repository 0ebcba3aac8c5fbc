//! Kueue's incident: our controller removes its finalizer from every pod
//! while another controller adds its own to the same pods.

use super::{Change, FOREIGN, Item, Lanes, OURS, Spec, Workload};

/// `pods` pods carrying [`OURS`]; one removal each, in creation order, on a
/// shared work queue; a separate client adds [`FOREIGN`] to every pod.
pub(super) fn workload(pods: u32) -> Workload {
    let spec = Spec {
        finalizers: vec![OURS],
        final_finalizers: vec![FOREIGN],
        ..Spec::default()
    };
    let items = (0..pods)
        .map(|object| Item {
            object,
            change: Change {
                remove_finalizer: Some(OURS),
                set_label: None,
            },
        })
        .collect();
    Workload {
        specs: vec![spec; pods as usize],
        lanes: Lanes::Shared(items),
        foreign: true,
    }
}
