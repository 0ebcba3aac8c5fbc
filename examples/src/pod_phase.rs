//! The view of a Pod both Pod operators reconcile from: metadata and phase.

use k8s_openapi::api::core::v1::Pod;
use kube::core::ObjectMeta;
use serde::{Deserialize, Serialize};

// ANCHOR: view
/// A Pod as the Kueue and Argo examples read it: its metadata (labels,
/// finalizers, deletion timestamp) and its phase. A controller of this
/// view holds these and nothing else in its cache — no spec, no container
/// statuses, no `managedFields` — and its writes are exact from it under
/// every strategy: a view sends only what the mutation changed, and
/// `update` reads the whole Pod before its `PUT`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PodPhase {
    /// The Pod's metadata.
    pub metadata: ObjectMeta,
    /// The part of the Pod's status the operators read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Phase>,
}

/// `status.phase`, the one status field the operators read.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Phase {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

concord::view!(PodPhase, of = Pod);

impl PodPhase {
    /// Whether the Pod ran to completion, successfully or not.
    pub fn finished(&self) -> bool {
        finished(self.status.as_ref().and_then(|s| s.phase.as_deref()))
    }
}
// ANCHOR_END: view

/// Whether a Pod in `phase` ran to completion, successfully or not.
pub fn finished(phase: Option<&str>) -> bool {
    matches!(phase, Some("Succeeded" | "Failed"))
}

/// Whether the whole `pod` ran to completion.
pub fn pod_finished(pod: &Pod) -> bool {
    finished(pod.status.as_ref().and_then(|s| s.phase.as_deref()))
}
