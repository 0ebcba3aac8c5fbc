//! A custom resource whose stored values are written differently from how
//! its Rust type writes them: whole numbers and integers past 2^53 under an
//! `f64`, conditions with fractional-second times under k8s-openapi's
//! `Time` (whole seconds), floats of 17 significant digits, and `nullable`
//! fields. The type also lacks fields at every depth: `spec.big`,
//! `spec.hint`, each entry's `owner` and each condition's `severity`.

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The group of [`Ledger`].
const GROUP: &str = "values.concord.example";

/// What the Rust type knows of a ledger's spec.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize)]
#[kube(
    group = "values.concord.example",
    version = "v1",
    kind = "Ledger",
    namespaced,
    status = "LedgerStatus",
    schema = "disabled"
)]
pub(crate) struct LedgerSpec {
    /// Weighted entries, keyed by name.
    #[serde(default)]
    pub(crate) entries: Vec<LedgerEntry>,
    /// A ratio, as a float.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ratio: Option<f64>,
    /// A note; `None` is written as `null`.
    #[serde(default)]
    pub(crate) note: Option<String>,
}

/// An entry as the Rust type knows it: a weight as `f64`, no `owner`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct LedgerEntry {
    pub(crate) name: String,
    pub(crate) weight: f64,
}

/// What the Rust type knows of a ledger's status: k8s-openapi conditions.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub(crate) struct LedgerStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) conditions: Vec<Condition>,
}

/// The ledgers resource.
pub(crate) fn ledgers() -> ApiResource {
    ApiResource::erase::<Ledger>(&())
}

/// The CRD as the server has it: every field of the type, and those it
/// lacks.
fn crd() -> anyhow::Result<CustomResourceDefinition> {
    let string = json!({"type": "string"});
    let nullable = json!({"type": "string", "nullable": true});
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("ledgers.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "ledgers", "singular": "ledger", "kind": "Ledger"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "entries": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {
                                    "name": string,
                                    "weight": {"type": "number"},
                                    "owner": string,
                                }},
                            },
                            "ratio": {"type": "number"},
                            "big": {"type": "integer"},
                            "note": nullable,
                            "hint": nullable,
                        }},
                        "status": {"type": "object", "properties": {
                            "conditions": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["type"],
                                "items": {
                                    "type": "object",
                                    "required": ["type", "status"],
                                    "properties": {
                                        "type": string,
                                        "status": string,
                                        "reason": string,
                                        "message": string,
                                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                                        "observedGeneration": {"type": "integer"},
                                        "severity": string,
                                    },
                                },
                            },
                        }},
                    },
                }},
            }],
        },
    }))?)
}

/// One test's ledgers: the shared control plane with the CRD installed, a
/// namespace of the test's own, and the resource read raw and typed.
pub(crate) struct Ledgers {
    pub(crate) env: &'static concord_testenv::TestEnv,
    pub(crate) ns: concord_testenv::TestNamespace,
    pub(crate) resource: ApiResource,
    pub(crate) raw: Api<DynamicObject>,
    pub(crate) typed: Api<Ledger>,
}

impl Ledgers {
    /// Install the CRD (once per control plane) and make a namespace.
    pub(crate) async fn new() -> anyhow::Result<Self> {
        let env = concord_testenv::TestEnv::shared()?;
        env.install_crd(crd()?).await?;
        let ns = env.namespace().await?;
        let resource = ledgers();
        Ok(Ledgers {
            env,
            raw: Api::namespaced_with(ns.client(), ns.name(), &resource),
            typed: Api::namespaced(ns.client(), ns.name()),
            resource,
            ns,
        })
    }

    /// A ledger `name` created raw with `spec` (sent as the text given, so
    /// that no number passes through a parser on the way), and `status`
    /// written by another controller when it is not null.
    pub(crate) async fn create(&self, name: &str, spec: &str, status: &str) -> anyhow::Result<()> {
        let body = format!(
            r#"{{"apiVersion":"{GROUP}/v1","kind":"Ledger","metadata":{{"name":"{name}"}},"spec":{spec}}}"#
        );
        let url = format!("{}?{}", self.collection(), "fieldManager=other");
        let request = http::Request::post(url)
            .header("content-type", "application/json")
            .body(body.into_bytes())?;
        self.ns.client().request_text(request).await?;
        if status != "null" {
            let url = format!("{}/{name}/status", self.collection());
            let body = format!(r#"{{"status":{status}}}"#);
            let request = http::Request::patch(url)
                .header("content-type", "application/merge-patch+json")
                .body(body.into_bytes())?;
            self.ns.client().request_text(request).await?;
        }
        Ok(())
    }

    /// The stored object as the API server writes it, byte for byte.
    pub(crate) async fn text(&self, name: &str) -> anyhow::Result<String> {
        let url = format!("{}/{name}", self.collection());
        let request = http::Request::get(url).body(Vec::new())?;
        let text = self.ns.client().request_text(request).await?;
        Ok(text)
    }

    /// The stored object as JSON.
    pub(crate) async fn json(&self, name: &str) -> anyhow::Result<Value> {
        let text = self.text(name).await?;
        serde_json::from_str(&text).context("the stored ledger")
    }

    /// Another writer inserts `entry` at the head of `path` (a list), by
    /// JSON patch, on the main resource or its status.
    pub(crate) async fn insert_first(
        &self,
        name: &str,
        path: &str,
        entry: Value,
    ) -> anyhow::Result<()> {
        let op = json!([{"op": "add", "path": format!("{path}/0"), "value": entry}]);
        let patch: Patch<Value> = Patch::Json(serde_json::from_value(op)?);
        if path.starts_with("/status") {
            self.raw
                .patch_status(name, &PatchParams::default(), &patch)
                .await?;
        } else {
            self.raw
                .patch(name, &PatchParams::default(), &patch)
                .await?;
        }
        Ok(())
    }

    /// Another writer sets a label, which moves the object's version on.
    pub(crate) async fn touch(&self, name: &str) -> anyhow::Result<()> {
        let label = json!({"metadata": {"labels": {"touched": "yes"}}});
        self.raw
            .patch(name, &PatchParams::default(), &Patch::Merge(label))
            .await?;
        Ok(())
    }

    fn collection(&self) -> String {
        format!("/apis/{GROUP}/v1/namespaces/{}/ledgers", self.ns.name())
    }
}
