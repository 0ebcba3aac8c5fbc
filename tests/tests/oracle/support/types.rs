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

/// A type holding the items' weights as `f64` with a serde default: a
/// stored `1` is `1.0` to it and an absent weight `0.0`; it lacks every
/// other field of an item and of the spec.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct Weighted {
    pub(crate) metadata: kube::core::ObjectMeta,
    #[serde(default)]
    pub(crate) spec: WeightedSpec,
}

/// The spec of [`Weighted`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct WeightedSpec {
    #[serde(default, rename = "items")]
    pub(crate) entries: Vec<WeightedItem>,
}

/// An item of [`Weighted`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct WeightedItem {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) weight: f64,
}

concord::view!(Weighted, of = Specimen);

/// A type holding the conditions as k8s-openapi `Condition`s: `Time`
/// writes whole seconds, and it lacks `severity`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct Timed {
    pub(crate) metadata: kube::core::ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<TimedStatus>,
}

/// The status of [`Timed`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct TimedStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}

concord::view!(Timed, of = Specimen);

/// A type holding the nested map as a `HashMap` (unordered) and the
/// colour as an enum; it lacks every other field.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct Mapped {
    pub(crate) metadata: kube::core::ObjectMeta,
    #[serde(default)]
    pub(crate) spec: MappedSpec,
}

/// The spec of [`Mapped`].
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct MappedSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) color: Option<Color>,
    #[serde(default, skip_serializing_if = "std::collections::HashMap::is_empty")]
    pub(crate) nested: std::collections::HashMap<String, serde_json::Value>,
}

/// A colour, as an enum.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Color {
    Red,
    Green,
    Blue,
}

concord::view!(Mapped, of = Specimen);

/// A nested map as a Rust type may hold it.
pub(crate) type Nested = BTreeMap<String, serde_json::Value>;

/// The specimen CRD (with a status subresource).
pub(crate) fn crd() -> anyhow::Result<CustomResourceDefinition> {
    family("specimens", "Specimen", true)
}

/// The bare CRD: the specimen's schema without a status subresource.
pub(crate) fn bare_crd() -> anyhow::Result<CustomResourceDefinition> {
    family("bares", "Bare", false)
}

fn family(plural: &str, kind: &str, status: bool) -> anyhow::Result<CustomResourceDefinition> {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let subresources = if status {
        json!({"status": {}})
    } else {
        json!({})
    };
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": subresources,
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
                                    "weight": {"type": "number"},
                                }},
                            },
                            "ports": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["port", "protocol"],
                                "items": {"type": "object", "required": ["port", "protocol"], "properties": {
                                    "port": {"type": "integer"},
                                    "protocol": {"type": "string"},
                                    "name": {"type": "string"},
                                    "extra": {"type": "string"},
                                }},
                            },
                            "aliases": {"type": "array", "x-kubernetes-list-type": "set",
                                "items": {"type": "string"}},
                            "opt": {"type": "string", "nullable": true},
                            "target": {"x-kubernetes-int-or-string": true},
                            "cpu": {"x-kubernetes-int-or-string": true,
                                "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$"},
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
