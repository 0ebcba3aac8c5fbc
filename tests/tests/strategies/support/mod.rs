//! Helpers shared by the `strategies*` test binaries: the incidents'
//! names and the objects they start from.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use serde_json::json;

use concord_strategies::ConflictPolicy;

/// Our finalizer (Kueue's).
pub(crate) const OURS: &str = "kueue.x-k8s.io/managed";
/// Another controller's finalizer.
pub(crate) const FOREIGN: &str = "example.com/foreign";
/// Argo's finalizer.
pub(crate) const ARGO: &str = "workflows.argoproj.io/status";
/// Argo's completed label.
pub(crate) const COMPLETED: &str = "workflows.argoproj.io/completed";

/// A Pod with these finalizers and the completed label `false`.
pub(crate) fn pod(name: &str, finalizers: &[&str]) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": finalizers, "labels": {COMPLETED: "false"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))?)
}

/// A ConfigMap with these finalizers.
pub(crate) fn config_map(name: &str, finalizers: &[&str]) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "finalizers": finalizers},
        "data": {"k": "v"},
    }))?)
}

/// The finalizers of `meta`, none if unset.
pub(crate) fn finalizers(meta: &kube::core::ObjectMeta) -> Vec<String> {
    meta.finalizers.clone().unwrap_or_default()
}

/// The default conflict policy.
pub(crate) fn policy() -> ConflictPolicy {
    ConflictPolicy::default()
}
