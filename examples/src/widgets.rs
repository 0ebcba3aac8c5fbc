//! The CRD operator: a `Widget` custom resource whose reconciler creates and
//! owns ConfigMap "shards", reports conditions and events, and cleans up
//! through a finalizer. `examples/crd-operator/main.rs` runs it; the
//! integration tests run the same code.

use std::sync::Arc;

use concord::featuregates::StrategyTable;
use concord::{
    Action, Condition, Context, EventType, Intent, Mutation, Reconciler, WriteError,
    featuregates::Operation, finalizer, finalizer::FinalizerError, finalizer::Lifecycle,
    rbac::Permissions,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta};
use kube::core::PartialObjectMeta;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

// ANCHOR: resource
/// A message kept in `shards` ConfigMaps: the custom resource's spec.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "demo.concord.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus",
    shortname = "wg",
    printcolumn = r#"{"name":"Shards","type":"integer","jsonPath":".status.shards"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#
)]
pub struct WidgetSpec {
    /// What every shard holds.
    pub message: String,
    /// How many ConfigMaps hold it. Signed, as the Kubernetes API
    /// conventions ask: a webhook that runs before the schema check (the
    /// conversion, the defaulter) can then read a negative value, and the
    /// schema's `minimum` refuses it with a 422 naming the field.
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 20))]
    pub shards: i32,
}

fn one() -> i32 {
    1
}

/// What the operator last did, on the status subresource.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// Shards in place.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub shards: i32,
    /// The generation of the spec they reflect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions, as concord's `set_condition` writes them.
    #[serde(default)]
    pub conditions: Vec<WidgetCondition>,
}

/// One status condition.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetCondition {
    /// `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}
// ANCHOR_END: resource

/// The example's configuration file, `examples/crd-operator/config.yaml`.
pub const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crd-operator/config.yaml");

/// The finalizer that deletes the shards before a Widget goes.
pub const FINALIZER: &str = "widgets.demo.concord.dev/shards";
/// Label naming a shard's Widget.
pub const OWNER_LABEL: &str = "widgets.demo.concord.dev/owner";
/// Label holding a shard's index.
pub const SHARD_LABEL: &str = "widgets.demo.concord.dev/shard";

/// Why reconciling a Widget failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WidgetError {
    /// Server-side applying a shard ConfigMap failed.
    #[error("applying shard {name} failed")]
    ApplyShard {
        /// The shard.
        name: String,
        /// The write error.
        #[source]
        source: WriteError,
    },
    /// Listing or deleting shards failed.
    #[error("pruning shards of widget {widget} failed")]
    PruneShards {
        /// The Widget.
        widget: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("writing the status of widget {widget} failed")]
    WriteStatus {
        /// The Widget.
        widget: String,
        /// The write error.
        #[source]
        source: WriteError,
    },
}

// ANCHOR: reconciler
/// Keeps `spec.shards` ConfigMaps holding `spec.message`, owned by the
/// Widget; reports `status.shards` and a `Ready` condition; deletes the
/// shards before the Widget goes.
#[derive(Debug, Default)]
pub struct WidgetReconciler;

#[concord::async_trait]
impl Reconciler<Widget> for WidgetReconciler {
    type Error = FinalizerError<WidgetError>;

    async fn reconcile(
        &self,
        widget: Arc<Widget>,
        ctx: &Context<Widget>,
    ) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, widget, |event| async move {
            match event {
                Lifecycle::Apply(widget) => apply(ctx, &widget).await,
                Lifecycle::Cleanup(widget) => cleanup(ctx, &widget).await,
            }
        })
        .await
    }
}

async fn apply(ctx: &Context<Widget>, widget: &Widget) -> Result<Action, WidgetError> {
    let wanted = widget.spec.shards;
    // The schema keeps `shards` at 0 or more; a negative count means none.
    let count = u32::try_from(wanted).unwrap_or(0);
    for index in 0..count {
        let shard = shard(widget, index);
        let name = shard.name_any();
        ctx.apply_owned(widget, shard)
            .await
            .map_err(|source| WidgetError::ApplyShard { name, source })?;
    }
    prune(ctx, widget, count).await?;

    // Status and condition in one mutation: one write to /status.
    let ready = Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "ShardsReady".into(),
        message: format!("{wanted} shard(s) hold the message"),
    };
    let status = Mutation::new()
        .with(Intent::MergeStatus(json!({
            "shards": wanted,
            "observedGeneration": widget.metadata.generation,
        })))
        .with(Intent::SetCondition(ready));
    let written = ctx
        .write(widget, status)
        .await
        .map_err(|source| WidgetError::WriteStatus {
            widget: widget.name_any(),
            source,
        })?;
    if !written.outcome.unchanged {
        let note = format!("{wanted} shard(s) in place");
        ctx.event(widget, EventType::Normal, "ShardsReady", note)
            .await;
    }
    Ok(Action::await_change())
}

/// Deletes the Widget's shards now, rather than some time after the
/// Widget as the garbage collector would.
async fn cleanup(ctx: &Context<Widget>, widget: &Widget) -> Result<Action, WidgetError> {
    prune(ctx, widget, 0).await?;
    ctx.event(
        widget,
        EventType::Normal,
        "ShardsDeleted",
        "every shard deleted",
    )
    .await;
    Ok(Action::await_change())
}
// ANCHOR_END: reconciler

/// Deletes the shards whose index is `keep` or more.
async fn prune(ctx: &Context<Widget>, widget: &Widget, keep: u32) -> Result<(), WidgetError> {
    let fail = |source| WidgetError::PruneShards {
        widget: widget.name_any(),
        source,
    };
    let namespace = widget.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(ctx.client().clone(), &namespace);
    let selector = format!("{OWNER_LABEL}={}", widget.name_any());
    let shards = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(fail)?;
    for shard in shards.items {
        let index = shard
            .labels()
            .get(SHARD_LABEL)
            .and_then(|i| i.parse::<u32>().ok());
        if index.is_none_or(|i| i >= keep) {
            match api
                .delete(&shard.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => return Err(fail(source)),
            }
        }
    }
    Ok(())
}

/// Shard `index` of `widget`, as it should be.
pub fn shard(widget: &Widget, index: u32) -> ConfigMap {
    let owner = widget.name_any();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{owner}-shard-{index}")),
            namespace: widget.namespace(),
            labels: Some(
                [
                    (OWNER_LABEL.to_owned(), owner),
                    (SHARD_LABEL.to_owned(), index.to_string()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        data: Some([("message".to_owned(), widget.spec.message.clone())].into()),
        ..ConfigMap::default()
    }
}

// ANCHOR: add_controller
/// Adds the operator's controller of the Widgets in `namespace` to
/// `manager`. A shard changed or deleted by hand is reconciled back: the
/// controller also watches the shards, as metadata only (owner references
/// are all it needs from them), so their data is never held.
///
/// # Errors
///
/// [`concord::Error::InvalidController`] if the controller does not check.
pub fn add_controller(
    manager: &mut concord::Manager,
    namespace: &str,
) -> Result<(), concord::Error> {
    let client = manager.client().clone();
    let widgets: Api<Widget> = Api::namespaced(client.clone(), namespace);
    let shards: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(client, namespace);
    manager
        .controller("widgets", widgets, WidgetReconciler)
        .owns(shards)
        .add()
}
// ANCHOR_END: add_controller

// ANCHOR: permissions
/// What this operator does to the API: it watches Widgets and their
/// ConfigMaps, adds and removes its finalizer and writes status on
/// Widgets, applies and deletes ConfigMaps, publishes events and may run
/// with leader election.
pub fn permissions(table: &StrategyTable) -> Permissions<'_> {
    Permissions::new(table)
        .watches::<Widget>()
        .writes::<Widget>(&[
            Operation::AddFinalizer,
            Operation::RemoveFinalizer,
            Operation::Status,
        ])
        .watches::<ConfigMap>()
        .applies::<ConfigMap>()
        .deletes::<ConfigMap>()
        .events()
        .leader_election()
}
// ANCHOR_END: permissions
