//! The oracle's resources and the Rust types a writer may hold them as: a
//! custom resource family (`Specimen`) with keyed and unkeyed object
//! lists, a scalar list, nested maps and a status subresource, and the
//! built-in ConfigMap.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The specimens' group.
pub(crate) const GROUP: &str = "oracle.concord.example";

/// A specimen as a Rust type that lags the schema: it knows the size, the
/// items' names and values, the tags and the conditions' type, status,
/// reason and message — not the colour, the rules, the nested map, an
/// item's `extra`, the phase, or a condition's `severity` and
/// `lastTransitionTime`.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "oracle.concord.example",
    version = "v1",
    kind = "Specimen",
    namespaced,
    status = "LagStatus"
)]
pub(crate) struct LagSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) items: Vec<LagItem>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) tags: Vec<String>,
}

/// An item as the lagging type knows it: without `extra`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub(crate) struct LagItem {
    pub(crate) name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) value: Option<String>,
}

/// The status as the lagging type knows it: conditions only.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub(crate) struct LagStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<LagCondition>,
}

/// A condition without `severity` and `lastTransitionTime`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub(crate) struct LagCondition {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) reason: String,
    #[serde(default)]
    pub(crate) message: String,
}

/// A type that holds the tags as a sorted set: it sorts and deduplicates
/// the list it reads.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct Sorted {
    pub(crate) metadata: kube::core::ObjectMeta,
    #[serde(default)]
    pub(crate) spec: SortedSpec,
}

/// The spec of [`Sorted`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct SortedSpec {
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(crate) tags: BTreeSet<String>,
}

concord::view!(Sorted, of = Specimen);

/// A view: metadata and the size, nothing else (no status).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct SizeView {
    pub(crate) metadata: kube::core::ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) spec: Option<SizeSpec>,
}

/// The spec of [`SizeView`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct SizeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) size: Option<i64>,
}

concord::view!(SizeView, of = Specimen);

/// A nested map as a Rust type may hold it.
pub(crate) type Nested = BTreeMap<String, serde_json::Value>;

/// The specimen CRD.
pub(crate) fn crd() -> anyhow::Result<CustomResourceDefinition> {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("specimens.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "specimens", "singular": "specimen", "kind": "Specimen"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "color": {"type": "string"},
                            "items": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {
                                    "name": {"type": "string"},
                                    "value": {"type": "string"},
                                    "extra": {"type": "string"},
                                }},
                            },
                            "rules": {"type": "array", "items": open},
                            "tags": {"type": "array", "items": {"type": "string"}},
                            "nested": open,
                        }},
                        "status": {"type": "object", "properties": {
                            "phase": {"type": "string"},
                            "conditions": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["type"],
                                "items": {"type": "object", "required": ["type", "status"], "properties": {
                                    "type": {"type": "string"},
                                    "status": {"type": "string"},
                                    "reason": {"type": "string"},
                                    "message": {"type": "string"},
                                    "lastTransitionTime": {"type": "string"},
                                    "severity": {"type": "string"},
                                }},
                            },
                        }},
                    },
                }},
            }],
        },
    }))?)
}
