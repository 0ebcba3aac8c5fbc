//! The benchmark's pods: their names and manifests.

use serde_json::{Value, json};

use super::metadata::BENCH_LABEL;
use super::workload::Spec;

/// The name of object number `index`.
pub(crate) fn name(index: u32) -> String {
    format!("rb-{index:06}")
}

/// The number of the object called `name`.
pub(crate) fn index(name: &str) -> Option<u32> {
    name.strip_prefix("rb-")?.parse().ok()
}

/// The manifest of object number `index`: a pod that never runs (no node,
/// no service-account token), so only its metadata changes.
pub(crate) fn manifest(index: u32, spec: &Spec) -> Value {
    let mut labels = serde_json::Map::new();
    labels.insert(BENCH_LABEL.into(), json!("true"));
    for (k, v) in &spec.labels {
        labels.insert((*k).into(), json!(v));
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name(index), "labels": labels, "finalizers": spec.finalizers},
        "spec": {
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "containers": [{"name": "main", "image": "registry.invalid/pause:1"}],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(index(&name(42)), Some(42));
        assert_eq!(index("other"), None);
    }
}
