//! Installing the `Widget` CRD and the CRD operator's demo.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::json;

use crate::demo::wait_until;
use crate::widgets::{OWNER_LABEL, Widget, WidgetSpec};

/// Server-side applies the `Widget` CRD and waits until it is established.
///
/// # Errors
///
/// The API error, or the CRD not established within a minute.
pub async fn install_crd(client: &Client) -> anyhow::Result<()> {
    apply_crd(client, &Widget::crd()).await
}

/// Server-side applies `crd` and waits until it is established.
///
/// # Errors
///
/// The API error, or the CRD not established within a minute.
pub async fn apply_crd(client: &Client, crd: &CustomResourceDefinition) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    crds.patch(
        &name,
        &PatchParams::apply("concord-examples").force(),
        &Patch::Apply(crd),
    )
    .await?;
    wait_until(
        &crds,
        &format!("the CRD {name} established"),
        Duration::from_secs(60),
        |list| {
            list.iter().any(|crd| {
                crd.name_any() == name
                    && crd
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter()
                                .any(|c| c.type_ == "Established" && c.status == "True")
                        })
            })
        },
    )
    .await
}

/// What the demo saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoReport {
    /// Shards once the Widget was Ready.
    pub shards_created: usize,
    /// Shards after scaling the Widget down to one.
    pub shards_after_scale_down: usize,
    /// Event reasons published about the Widget, in order.
    pub events: Vec<String>,
    /// Shards left once the Widget was deleted.
    pub shards_after_delete: usize,
}

fn ready(widget: &Widget, shards: i32) -> bool {
    widget.status.as_ref().is_some_and(|s| {
        s.shards == shards
            && s.observed_generation == widget.metadata.generation
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

// ANCHOR: demo
/// Creates Widget `greeter` with three shards, scales it to one, then
/// deletes it, while the operator runs in `namespace`.
///
/// # Errors
///
/// An API error, or a step that did not complete within a minute.
pub async fn demo(client: &Client, namespace: &str) -> anyhow::Result<DemoReport> {
    let widgets: Api<Widget> = Api::namespaced(client.clone(), namespace);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let minute = Duration::from_secs(60);
    let spec = WidgetSpec {
        message: "hello from concord".into(),
        shards: 3,
    };
    widgets
        .create(&PostParams::default(), &Widget::new("greeter", spec))
        .await?;
    let shards = |list: &[ConfigMap]| {
        list.iter()
            .filter(|cm| cm.labels().get(OWNER_LABEL).map(String::as_str) == Some("greeter"))
            .count()
    };
    wait_until(&widgets, "greeter Ready with 3 shards", minute, |l| {
        l.iter().any(|w| ready(w, 3))
    })
    .await?;
    let shards_created = shards(&maps.list(&ListParams::default()).await?.items);

    let scale = json!({"spec": {"shards": 1}});
    widgets
        .patch("greeter", &PatchParams::default(), &Patch::Merge(&scale))
        .await?;
    wait_until(&widgets, "greeter Ready with 1 shard", minute, |l| {
        l.iter().any(|w| ready(w, 1))
    })
    .await?;
    wait_until(&maps, "greeter down to 1 shard", minute, |l| shards(l) == 1).await?;
    let shards_after_scale_down = shards(&maps.list(&ListParams::default()).await?.items);

    widgets.delete("greeter", &DeleteParams::default()).await?;
    wait_until(&widgets, "greeter gone", minute, <[Widget]>::is_empty).await?;
    let shards_after_delete = shards(&maps.list(&ListParams::default()).await?.items);

    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let mut seen: Vec<Event> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("greeter"))
        .collect();
    seen.sort_by_key(|e| e.metadata.creation_timestamp.clone());
    Ok(DemoReport {
        shards_created,
        shards_after_scale_down,
        events: seen.into_iter().filter_map(|e| e.reason).collect(),
        shards_after_delete,
    })
}
// ANCHOR_END: demo
