//! The mirror operator, as a controller-runtime author ports one in their
//! first week: a `Mirror` names a source ConfigMap in its own namespace
//! and the namespaces to copy it into. It watches the source ConfigMaps
//! and maps each back to the Mirrors naming it through an index, reads
//! every ConfigMap from the manager's shared cache, writes the copies by
//! server-side apply without an owner (an owner in another namespace is
//! refused: the garbage collector would delete the copy), filters its own
//! events with a generation predicate, and removes its copies through a
//! finalizer. `examples/mirror-operator/main.rs` runs it; the chaos tests
//! run the same code.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use concord::{
    Action, Condition, Context, Manager, Predicate, Reconciler, WriteError, cache::CacheError,
    finalizer, finalizer::FinalizerError, finalizer::Lifecycle,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a copy came from: `<namespace>.<mirror>`, on every copy.
pub const FROM_LABEL: &str = "mirror.concord.dev/from";
/// The finalizer that removes a Mirror's copies before it goes.
pub const FINALIZER: &str = "mirror.concord.dev/cleanup";
/// The index of Mirrors by the source they name, `<namespace>/<name>`.
pub const SOURCE_INDEX: &str = "source";
/// The strategy table of the mirror operator.
pub const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/mirror-operator/config.yaml");

// ANCHOR: resource
/// Copy the ConfigMap `source` of this namespace into every namespace of
/// `targets`, under the Mirror's name.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mirror.concord.dev",
    version = "v1",
    kind = "Mirror",
    namespaced,
    status = "MirrorStatus"
)]
pub struct MirrorSpec {
    /// The ConfigMap to copy, in the Mirror's namespace.
    pub source: String,
    /// The namespaces to copy it into.
    #[serde(default)]
    pub targets: Vec<String>,
}
// ANCHOR_END: resource

/// What the operator last did.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MirrorStatus {
    /// Conditions, as concord's `set_condition` writes them.
    #[serde(default)]
    pub conditions: Vec<MirrorCondition>,
}

/// One status condition, as the CRD operator's (`concord::Condition`
/// writes them).
pub type MirrorCondition = crate::widgets::WidgetCondition;

/// The label value naming `mirror` on its copies.
pub fn from_value(mirror: &Mirror) -> String {
    format!(
        "{}.{}",
        mirror.namespace().unwrap_or_default(),
        mirror.name_any()
    )
}

/// Why a mirror reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A write failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// The shared cache could not answer.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// Listing the copies from the API server failed.
    #[error("listing the copies failed")]
    List(#[source] kube::Error),
}

/// The mirror reconciler.
pub struct Mirrors;

#[concord::async_trait]
impl Reconciler<Mirror> for Mirrors {
    type Error = FinalizerError<MirrorError>;

    async fn reconcile(
        &self,
        mirror: Arc<Mirror>,
        ctx: &Context<Mirror>,
    ) -> Result<Action, Self::Error> {
        finalizer(ctx, FINALIZER, mirror, |step| async move {
            match step {
                Lifecycle::Apply(mirror) => copy(&mirror, ctx).await,
                Lifecycle::Cleanup(mirror) => {
                    // Letting the Mirror go is final: the copies are listed
                    // from the API server, not the cache, which may not
                    // hold a copy written a moment ago (the chaos test's
                    // held watch left one behind when this read the cache).
                    let from = from_value(&mirror);
                    let selector = format!("{FROM_LABEL}={from}");
                    let copies = Api::<ConfigMap>::all(ctx.client().clone())
                        .list(&kube::api::ListParams::default().labels(&selector))
                        .await
                        .map_err(MirrorError::List)?;
                    for copy in &copies.items {
                        ctx.delete(copy).await?;
                    }
                    Ok(Action::await_change())
                }
            }
        })
        .await
    }
}

// ANCHOR: reconcile
/// Puts the source's data in every target namespace, removes the copies in
/// namespaces no longer targeted, and says so in `Ready`.
async fn copy(mirror: &Mirror, ctx: &Context<Mirror>) -> Result<Action, MirrorError> {
    let namespace = mirror.namespace().unwrap_or_default();
    let from = from_value(mirror);
    let maps = ctx.cache::<ConfigMap>()?;
    let Some(source) = maps.named(Some(&namespace), &mirror.spec.source) else {
        ctx.set_condition(mirror, ready(false, "SourceMissing", &mirror.spec.source))
            .await?;
        return Ok(Action::await_change());
    };
    let targets: BTreeSet<String> = mirror.spec.targets.iter().cloned().collect();
    for target in &targets {
        let copy = ConfigMap {
            metadata: ObjectMeta {
                name: Some(mirror.name_any()),
                namespace: Some(target.clone()),
                labels: Some(BTreeMap::from([(FROM_LABEL.to_owned(), from.clone())])),
                ..ObjectMeta::default()
            },
            data: source.data.clone(),
            binary_data: source.binary_data.clone(),
            ..ConfigMap::default()
        };
        ctx.apply(copy).await?;
    }
    remove_copies(ctx, &from, &targets).await?;
    let message = format!("copied into {} namespaces", targets.len());
    ctx.set_condition(mirror, ready(true, "Copied", &message))
        .await?;
    Ok(Action::await_change())
}
// ANCHOR_END: reconcile

/// Deletes the copies labelled `from` outside `keep`, as the cache holds
/// them: a copy it does not hold yet is removed when its own event maps
/// back to this Mirror.
async fn remove_copies(
    ctx: &Context<Mirror>,
    from: &str,
    keep: &BTreeSet<String>,
) -> Result<(), MirrorError> {
    let selector = format!("{FROM_LABEL}={from}");
    for copy in ctx.cache::<ConfigMap>()?.list(None, Some(&selector))? {
        if !keep.contains(&copy.namespace().unwrap_or_default()) {
            ctx.delete(copy.as_ref()).await?;
        }
    }
    Ok(())
}

fn ready(ok: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: "Ready".into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

// ANCHOR: add_controller
/// Registers the mirror controller: Mirrors of `namespace` (every
/// namespace for `None`), the ConfigMaps of every namespace cached and
/// mapped back to the Mirrors naming them.
///
/// # Errors
///
/// When the index or the controller cannot be added.
pub fn add_controller(
    manager: &mut Manager,
    namespace: Option<&str>,
) -> Result<(), concord::Error> {
    let client = manager.client().clone();
    let mirrors: Api<Mirror> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    manager.index::<Mirror>(SOURCE_INDEX, |mirror| {
        vec![format!(
            "{}/{}",
            mirror.namespace().unwrap_or_default(),
            mirror.spec.source
        )]
    })?;
    manager
        .controller("mirrors", mirrors, Mirrors)
        .with_predicate(Predicate::generation_changed())
        .watches(Api::<ConfigMap>::all(client), |map: &ConfigMap, caches| {
            let key = format!("{}/{}", map.namespace().unwrap_or_default(), map.name_any());
            let mut mirrors: Vec<ObjectRef<Mirror>> = caches
                .store::<Mirror>()
                .and_then(|store| store.indexed(SOURCE_INDEX, &key))
                .unwrap_or_default();
            // A copy changed or deleted by someone else: its Mirror puts it back.
            if let Some((ns, name)) = map.labels().get(FROM_LABEL).and_then(|f| f.split_once('.')) {
                mirrors.push(ObjectRef::new(name).within(ns));
            }
            mirrors
        })
        .add()
}
// ANCHOR_END: add_controller

// ANCHOR: invariants
/// The mirror operator's invariants once it has gone quiet, for the
/// Mirrors of `namespace`: every live Mirror holds its finalizer and has a
/// copy in each target namespace holding its source's data (or says
/// `SourceMissing`); no copy exists outside a live Mirror's targets; every
/// Mirror in `deleted` is gone, with its copies.
///
/// # Errors
///
/// Listing the Mirrors or ConfigMaps failed.
pub async fn invariants(
    client: &kube::Client,
    namespace: &str,
    deleted: &BTreeSet<String>,
) -> kube::Result<Vec<crate::invariants::Violation>> {
    use crate::invariants::Violation;
    use kube::api::ListParams;
    let violation = |object: String, invariant: &'static str, found: String| Violation {
        object,
        invariant,
        found,
    };
    let mirrors: Api<Mirror> = Api::namespaced(client.clone(), namespace);
    let all_maps: Api<ConfigMap> = Api::all(client.clone());
    let copies = all_maps
        .list(&ListParams::default().labels(FROM_LABEL))
        .await?
        .items;
    let local: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let mut found = Vec::new();
    let live = mirrors.list(&ListParams::default()).await?.items;
    for mirror in &live {
        let name = mirror.name_any();
        let object = format!("mirrors/{name}");
        if deleted.contains(&name) {
            found.push(violation(
                object.clone(),
                "a deleted mirror is gone",
                format!("{:?}", mirror.finalizers()),
            ));
        }
        if !mirror.finalizers().iter().any(|f| f == FINALIZER) {
            found.push(violation(
                object.clone(),
                "a live mirror holds its finalizer",
                format!("{:?}", mirror.finalizers()),
            ));
        }
        let from = from_value(mirror);
        match local.get_opt(&mirror.spec.source).await? {
            Some(source) => {
                for target in &mirror.spec.targets {
                    let copy = copies
                        .iter()
                        .find(|c| c.namespace().as_deref() == Some(target) && c.name_any() == name);
                    let holds = copy.is_some_and(|c| {
                        c.labels().get(FROM_LABEL) == Some(&from) && c.data == source.data
                    });
                    if !holds {
                        found.push(violation(
                            object.clone(),
                            "each target holds a copy of the source",
                            format!("{target}: {:?}", copy.map(|c| &c.data)),
                        ));
                    }
                }
            }
            None => {
                let missing = mirror.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.reason == "SourceMissing")
                });
                if !missing {
                    found.push(violation(
                        object.clone(),
                        "a missing source is reported",
                        format!("{:?}", mirror.status),
                    ));
                }
            }
        }
    }
    for copy in &copies {
        let Some(from) = copy.labels().get(FROM_LABEL) else {
            continue;
        };
        let Some((ns, name)) = from.split_once('.') else {
            continue;
        };
        if ns != namespace {
            continue;
        }
        let targeted = live.iter().any(|m| {
            m.name_any() == name
                && m.metadata.deletion_timestamp.is_none()
                && m.spec
                    .targets
                    .iter()
                    .any(|t| Some(t.as_str()) == copy.namespace().as_deref())
        });
        if !targeted {
            found.push(violation(
                format!(
                    "configmaps/{}/{}",
                    copy.namespace().unwrap_or_default(),
                    copy.name_any()
                ),
                "a copy exists only in a live mirror's targets",
                from.clone(),
            ));
        }
    }
    Ok(found)
}
// ANCHOR_END: invariants
