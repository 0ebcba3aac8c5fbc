//! The Frigate custom resource (ships.example.com/v1) and its controller.
//!
//! Edit the spec and status below, then `cargo concord generate` to update
//! `deploy/crds.yaml`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a Frigate asks for.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ships.example.com",
    version = "v1",
    kind = "Frigate",
    namespaced,
    status = "FrigateStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct FrigateSpec {
    /// An example field: replace it with what your Frigate needs.
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
pub struct FrigateStatus {
    /// The generation of the spec the status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions, as concord's `Intent::SetCondition` writes them.
    #[serde(default)]
    pub conditions: Vec<FrigateCondition>,
}

/// One status condition.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FrigateCondition {
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

// The controller: what `cargo concord create api --controller` adds.

use std::sync::Arc;

use concord::featuregates::Operation;
use concord::finalizer::{FinalizerError, Lifecycle};
use concord::{
    Action, Condition, Context, Intent, Manager, Mutation, Reconciler, WriteError, finalizer,
};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Holds a Frigate until its cleanup ran.
pub const FINALIZER: &str = "frigates.ships.example.com/finalizer";

/// What the reconciler writes to Frigates. Each write goes through the
/// strategy `config/concord.yaml` chose for it, and `--print-rbac` grants
/// the verbs that strategy sends.
pub const WRITES: &[Operation] = &[
    Operation::AddFinalizer,
    Operation::RemoveFinalizer,
    Operation::Status,
];

/// Reconciles Frigates: holds each with a finalizer, makes the world
/// match its spec, and reports a `Ready` condition.
///
/// The copy a controller reconciles from is the copy its cache holds, so
/// choose the smallest that serves it: the whole `Frigate` when it reads
/// the spec (as here); `kube::core::PartialObjectMeta<Frigate>` when it
/// reads only labels, annotations, finalizers and owners; a
/// `concord::view!` struct with `metadata` and the few fields it reads
/// otherwise (the Kueue example's `PodPhase`). Every strategy writes
/// exactly from each of them. Whichever it is, the cache holds it as
/// compact JSON and decodes a copy per reconcile (`concord::cache::CacheLayout`,
/// the default); `with_cache_layout(CacheLayout::Decoded)` on the manager
/// builder keeps typed copies, for a reconciler that scans the store.
#[derive(Debug, Default)]
pub struct FrigateReconciler;

#[concord::async_trait]
impl Reconciler<Frigate> for FrigateReconciler {
    type Error = FinalizerError<WriteError>;

    async fn reconcile(
        &self,
        object: Arc<Frigate>,
        ctx: &Context<Frigate>,
    ) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, object, |event| async move {
            match event {
                Lifecycle::Apply(object) => {
                    // Make the world match `object.spec` here, then say so.
                    let generation = object.metadata.generation;
                    let ready = Condition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        reason: "Reconciled".into(),
                        message: format!("size {} is in place", object.spec.size),
                    };
                    let status = Mutation::new()
                        .with(Intent::MergeStatus(json!({ "observedGeneration": generation })))
                        .with(Intent::SetCondition(ready));
                    ctx.write(&object, status).await?;
                }
                Lifecycle::Cleanup(object) => {
                    // Undo what Apply did outside this object; the
                    // finalizer is removed once this returns Ok.
                    tracing::info!(name = %object.name_any(), "cleaning up");
                }
            }
            Ok(Action::await_change())
        })
        .await
    }
}

/// Registers the Frigate controller, watching `namespace` or, without one, every namespace.
///
/// # Errors
///
/// When the controller's options are invalid (a selector that does not
/// parse, say), naming every problem.
pub fn add_controller(manager: &mut Manager, namespace: Option<&str>) -> Result<(), concord::Error> {
    let client = manager.client().clone();
    let api: Api<Frigate> = match namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    // Selectors, predicates, a backoff, watches of other kinds: see the
    // book's "Reconcilers and context".
    manager.controller("frigates", api, FrigateReconciler).add()
}
