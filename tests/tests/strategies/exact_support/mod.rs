//! Shared by the `strategies` binary's `exact_*` tests and by the
//! `controller` binary (which includes this file by `#[path]`): a custom
//! resource whose Rust type lags its schema. The server stores `spec.color`,
//! `status.phase` and a condition's `severity`; the Rust type [`Gadget`]
//! knows none of them, so a write that round-trips the object through it
//! would drop them.
#![allow(dead_code)]

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The group of [`Gadget`]: an ordinary custom resource group.
pub(crate) const GROUP: &str = "exact.concord.example";

/// What the Rust type knows of a gadget's spec: its size, not its colour.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "exact.concord.example",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
pub(crate) struct GadgetSpec {
    /// The one field the type knows.
    pub(crate) size: i64,
}

/// What the Rust type knows of a gadget's status: its conditions, not its
/// phase.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub(crate) struct GadgetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<GadgetCondition>,
}

/// A condition as the Rust type knows it: without `severity`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GadgetCondition {
    #[serde(rename = "type")]
    pub(crate) type_: String,
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) reason: String,
    #[serde(default)]
    pub(crate) message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_transition_time: Option<String>,
}

/// The CRD as the server has it, for `plural`.`group` with kind `kind`:
/// `spec.color`, `status.phase` and `conditions[].severity` are in the
/// schema. `conditions` is a map list keyed by `type` unless `atomic`.
pub(crate) fn crd(
    group: &str,
    plural: &str,
    kind: &str,
    atomic: bool,
) -> anyhow::Result<CustomResourceDefinition> {
    let list_type = if atomic {
        json!({})
    } else {
        json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    };
    let mut conditions = json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string"},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "severity": {"type": "string"},
            },
        },
    });
    if let (Value::Object(c), Value::Object(l)) = (&mut conditions, list_type) {
        c.extend(l);
    }
    let mut metadata = json!({"name": format!("{plural}.{group}")});
    if group.ends_with(".k8s.io") {
        // A CRD in a Kubernetes group needs the API review's approval.
        metadata["annotations"] = json!({
            "api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1111"
        });
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "color": {"type": "string"},
                        }},
                        "status": {"type": "object", "properties": {
                            "phase": {"type": "string"},
                            "conditions": conditions,
                        }},
                    },
                }},
            }],
        },
    }))?)
}

/// The gadgets resource.
pub(crate) fn gadgets() -> ApiResource {
    ApiResource::erase::<Gadget>(&())
}

/// Install the gadget CRD.
pub(crate) async fn install(env: &concord_testenv::TestEnv) -> anyhow::Result<()> {
    env.install_crd(crd(GROUP, "gadgets", "Gadget", false)?)
        .await?;
    Ok(())
}

/// A gadget of size 1 coloured red, created raw, with status phase
/// `Running` and two conditions carrying a `severity` (`Ready` False,
/// `Other` True), as another writer would have stored them.
pub(crate) async fn create(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
    name: &str,
) -> anyhow::Result<DynamicObject> {
    let mut gadget = DynamicObject::new(name, resource);
    gadget.data = json!({"spec": {"size": 1, "color": "red"}});
    api.create(&PostParams::default(), &gadget).await?;
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False", "reason": "Starting", "message": "not yet",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "severity": "High"},
        {"type": "Other", "status": "True", "reason": "Fine", "message": "theirs",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "severity": "Low"},
    ]}});
    Ok(api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await?)
}

/// The fields the Rust type does not know, as stored: `spec.color`,
/// `status.phase` and each condition's `severity` by type.
pub(crate) async fn unknown_fields(api: &Api<DynamicObject>, name: &str) -> anyhow::Result<Value> {
    let stored = api.get(name).await.context("reading the gadget back")?;
    let severity = |type_: &str| {
        stored.data["status"]["conditions"]
            .as_array()
            .and_then(|list| list.iter().find(|c| c["type"] == type_))
            .map(|c| c["severity"].clone())
            .unwrap_or(Value::Null)
    };
    Ok(json!({
        "color": stored.data["spec"]["color"],
        "phase": stored.data["status"]["phase"],
        "readySeverity": severity("Ready"),
        "otherSeverity": severity("Other"),
    }))
}

/// What [`unknown_fields`] reads from a gadget made by [`create`].
pub(crate) fn all_kept() -> Value {
    json!({"color": "red", "phase": "Running", "readySeverity": "High", "otherSeverity": "Low"})
}

/// One test's gadgets: the shared control plane with the CRD installed, a
/// namespace of the test's own, and the resource read raw and typed.
pub(crate) struct Gadgets {
    pub(crate) env: &'static concord_testenv::TestEnv,
    pub(crate) ns: concord_testenv::TestNamespace,
    pub(crate) resource: ApiResource,
    pub(crate) raw: Api<DynamicObject>,
    pub(crate) typed: Api<Gadget>,
}

impl Gadgets {
    /// Install the CRD (once per control plane) and make a namespace.
    pub(crate) async fn new() -> anyhow::Result<Self> {
        let env = concord_testenv::TestEnv::shared()?;
        install(env).await?;
        let ns = env.namespace().await?;
        let resource = gadgets();
        Ok(Gadgets {
            env,
            raw: Api::namespaced_with(ns.client(), ns.name(), &resource),
            typed: Api::namespaced(ns.client(), ns.name()),
            resource,
            ns,
        })
    }
}

/// Drop every finalizer of `name`, so that its namespace can go.
pub(crate) async fn clear_finalizers(api: &Api<DynamicObject>, name: &str) -> anyhow::Result<()> {
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(clear))
        .await?;
    Ok(())
}
