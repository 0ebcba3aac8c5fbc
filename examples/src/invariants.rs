//! What each example operator's final state must satisfy, whatever
//! happened on the way: checked on the objects in the API server once the
//! operator has gone quiet, by the chaos tests and by anyone running the
//! examples against a cluster of their own.
//!
//! Each check returns every [`Violation`] it finds; an empty list means the
//! invariant holds.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::widgets::{OWNER_LABEL, SHARD_LABEL, Widget};
use crate::{argo, kueue, pod_phase};

/// One object that breaks one invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The object (`pods/job-3`).
    pub object: String,
    /// The invariant broken, in words.
    pub invariant: &'static str,
    /// What was found instead.
    pub found: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (found {})",
            self.object, self.invariant, self.found
        )
    }
}

fn violation(object: String, invariant: &'static str, found: impl fmt::Debug) -> Violation {
    Violation {
        object,
        invariant,
        found: format!("{found:?}"),
    }
}

// ANCHOR: kueue
/// Kueue: every foreign finalizer another controller added survives, and
/// ours is gone from every Pod that finished or is being deleted.
///
/// `foreign` names the Pods another controller added
/// [`kueue::FOREIGN_FINALIZER`] to (the writes that succeeded).
///
/// # Errors
///
/// Listing the Pods failed.
pub async fn kueue(
    client: &Client,
    namespace: &str,
    foreign: &BTreeSet<String>,
) -> kube::Result<Vec<Violation>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut found = Vec::new();
    let list = pods.list(&ListParams::default()).await?.items;
    for name in foreign {
        let pod = list.iter().find(|p| &p.name_any() == name);
        let kept = pod.is_some_and(|p| has(p, kueue::FOREIGN_FINALIZER));
        if !kept {
            let finalizers = pod.map(|p| p.finalizers().to_vec());
            found.push(violation(
                format!("pods/{name}"),
                "every foreign finalizer survives",
                finalizers,
            ));
        }
    }
    for pod in &list {
        let done = pod_phase::pod_finished(pod) || pod.metadata.deletion_timestamp.is_some();
        if done && has(pod, kueue::FINALIZER) {
            found.push(violation(
                format!("pods/{}", pod.name_any()),
                "ours is removed once the pod finished or is deleted",
                pod.finalizers(),
            ));
        }
    }
    Ok(found)
}
// ANCHOR_END: kueue

// ANCHOR: argo
/// Argo: every workflow Pod that finished or is being deleted is labelled
/// completed and released, and the finalizer listed before ours is kept.
///
/// # Errors
///
/// Listing the Pods failed.
pub async fn argo(client: &Client, namespace: &str) -> kube::Result<Vec<Violation>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut found = Vec::new();
    for pod in pods.list(&ListParams::default()).await?.items {
        let object = format!("pods/{}", pod.name_any());
        if !pod.labels().contains_key(argo::WORKFLOW_LABEL) {
            continue;
        }
        let done = pod_phase::pod_finished(&pod) || pod.metadata.deletion_timestamp.is_some();
        let released = argo::recorded(&pod) && !has(&pod, argo::FINALIZER);
        if done && !released {
            found.push(violation(
                object.clone(),
                "every finished or deleted pod is labelled completed and released",
                (pod.labels().get(argo::COMPLETED_LABEL), pod.finalizers()),
            ));
        }
        if pod.finalizers().first().map(String::as_str) != Some(argo::FOREIGN_FINALIZER) {
            found.push(violation(
                object,
                "the other finalizer, listed first, is kept",
                pod.finalizers(),
            ));
        }
    }
    Ok(found)
}
// ANCHOR_END: argo

// ANCHOR: widgets
/// The CRD operator: every Widget's shards match its spec (exactly
/// `spec.shards` ConfigMaps holding `spec.message`), its status reflects
/// them (shards, observed generation, `Ready`), and for each Widget in
/// `deleted` the finalizer's cleanup ran: the Widget is gone, no shard of
/// it is left, and a `ShardsDeleted` event was published for it.
///
/// # Errors
///
/// Listing Widgets, ConfigMaps or Events failed.
pub async fn widgets(
    client: &Client,
    namespace: &str,
    deleted: &BTreeSet<String>,
) -> kube::Result<Vec<Violation>> {
    let widgets: Api<Widget> = Api::namespaced(client.clone(), namespace);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let maps = maps.list(&ListParams::default()).await?.items;
    let shards_of = |owner: &str| -> Vec<&ConfigMap> {
        maps.iter()
            .filter(|m| m.labels().get(OWNER_LABEL).map(String::as_str) == Some(owner))
            .collect()
    };
    let mut found = Vec::new();
    for widget in widgets.list(&ListParams::default()).await?.items {
        let name = widget.name_any();
        let object = format!("widgets/{name}");
        if deleted.contains(&name) {
            found.push(violation(
                object,
                "a deleted widget is gone",
                widget.finalizers(),
            ));
            continue;
        }
        let mut indexes: Vec<String> = shards_of(&name)
            .iter()
            .filter(|m| {
                m.data.as_ref().and_then(|d| d.get("message")) == Some(&widget.spec.message)
            })
            .filter_map(|m| m.labels().get(SHARD_LABEL).cloned())
            .collect();
        indexes.sort();
        let mut wanted: Vec<String> = (0..widget.spec.shards).map(|i| i.to_string()).collect();
        wanted.sort();
        if indexes != wanted || shards_of(&name).len() != wanted.len() {
            found.push(violation(
                object.clone(),
                "children match the spec",
                (widget.spec.shards, indexes),
            ));
        }
        let status = widget.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if status.shards != widget.spec.shards
            || status.observed_generation != widget.metadata.generation
            || !ready
        {
            found.push(violation(
                object,
                "the status reflects the children",
                status,
            ));
        }
    }
    let published = events.list(&ListParams::default()).await?.items;
    for name in deleted {
        let object = format!("widgets/{name}");
        let left = shards_of(name).len();
        if left > 0 {
            found.push(violation(
                object.clone(),
                "cleanup deleted every shard",
                left,
            ));
        }
        let cleaned = published.iter().any(|e| {
            e.reason.as_deref() == Some("ShardsDeleted")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        });
        if !cleaned {
            found.push(violation(
                object,
                "the finalizer's cleanup ran",
                "no ShardsDeleted event",
            ));
        }
    }
    Ok(found)
}
// ANCHOR_END: widgets

fn has(pod: &Pod, finalizer: &str) -> bool {
    pod.finalizers().iter().any(|f| f == finalizer)
}
