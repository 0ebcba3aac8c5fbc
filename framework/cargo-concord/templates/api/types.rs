//! The {{kind}} custom resource ({{group}}/{{version}}){{controller_note}}.
//!
//! Edit the spec and status below, then `cargo concord generate` to update
//! `deploy/crds.yaml`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a {{kind}} asks for.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "{{group}}",
    version = "{{version}}",
    kind = "{{kind}}",{{namespaced}}
    status = "{{kind}}Status",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct {{kind}}Spec {
    /// An example field: replace it with what your {{kind}} needs.
    ///
    /// Integers are signed, as the Kubernetes API conventions ask, with
    /// their bounds in the schema: webhooks that run before the API
    /// server checks the schema (conversion, defaulting) can then read any
    /// integer a client sends, and the schema refuses a bad one with a 422
    /// naming the field. A field a defaulter fills may be required: the
    /// defaulter reads it as `""`/`0`/`false` when the object leaves it
    /// out.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub size: i32,
}

/// What the operator last observed and did, on the status subresource.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct {{kind}}Status {
    /// The generation of the spec the status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions, as concord's `Intent::SetCondition` writes them.
    #[serde(default)]
    pub conditions: Vec<{{kind}}Condition>,
}

/// One status condition.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct {{kind}}Condition {
    /// The condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}
