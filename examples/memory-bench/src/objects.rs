//! The objects both operators hold: what they are, creating them, asking
//! for a round, and counting the objects that carry it.

use std::time::Instant;

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, CustomResourceExt as _};
use serde_json::{Value, json};

use crate::widget::Widget;

/// The annotation the harness sets: the round the operators must write.
pub const WANT: &str = "memory-bench.concord.dev/want";
/// The label both operators write: the round they last saw wanted.
pub const ROUND: &str = "memory-bench.concord.dev/round";

/// Requests in flight while the harness creates or annotates objects.
const CONCURRENCY: usize = 32;
/// Objects per page when the harness lists them.
const PAGE: u32 = 500;

/// What the operators watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Small single-container Pods (nothing schedules them: no nodes).
    Pods,
    /// The benchmark's `Widget` custom resource.
    Widgets,
}

impl Kind {
    /// The word used on command lines and in reports.
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Pods => "pods",
            Kind::Widgets => "widgets",
        }
    }

    fn resource(self) -> ApiResource {
        match self {
            Kind::Pods => ApiResource::erase::<Pod>(&()),
            Kind::Widgets => ApiResource::erase::<Widget>(&()),
        }
    }

    /// The `i`th object's manifest, with `extra` metadata merged in
    /// (labels added).
    fn manifest(self, i: usize, extra: Option<&Value>) -> Value {
        let mut metadata = json!({"name": name(i), "labels": {"app": "memory-bench"}});
        if let Some(Value::Object(extra)) = extra {
            for (key, value) in extra {
                match (metadata.get_mut(key), value) {
                    (Some(Value::Object(have)), Value::Object(more)) => {
                        have.extend(more.clone());
                    }
                    _ => {
                        metadata[key] = value.clone();
                    }
                }
            }
        }
        match self {
            Kind::Pods => json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]},
            }),
            Kind::Widgets => json!({
                "apiVersion": "memory-bench.concord.dev/v1", "kind": "Widget", "metadata": metadata,
                "spec": {"message": format!("widget {i}"), "size": i},
            }),
        }
    }
}

/// The `i`th object's name.
pub(crate) fn name(i: usize) -> String {
    format!("mb-{i}")
}

/// The objects of `kind` in `namespace`, untyped.
pub(crate) fn api(client: &Client, namespace: &str, kind: Kind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &kind.resource())
}

/// Installs what `kind` needs: the `Widget` CRD for widgets.
///
/// # Errors
///
/// When the CRD cannot be applied or is not established within a minute.
pub(crate) async fn install(client: &Client, kind: Kind) -> anyhow::Result<()> {
    match kind {
        Kind::Pods => Ok(()),
        Kind::Widgets => concord_examples::widgets_demo::apply_crd(client, &Widget::crd()).await,
    }
}

/// Creates objects `0..n` of `kind`, each with `extra` metadata.
///
/// # Errors
///
/// When an object cannot be created.
pub(crate) async fn create(
    api: &Api<DynamicObject>,
    kind: Kind,
    n: usize,
    extra: Option<&Value>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    stream::iter(0..n)
        .map(|i| async move {
            let object: DynamicObject = serde_json::from_value(kind.manifest(i, extra))?;
            api.create(&PostParams::default(), &object).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await?;
    println!(
        "created {n} {} in {:.1} s",
        kind.as_str(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Sets the wanted round of each object in `indices` to `value`.
///
/// # Errors
///
/// When a patch fails.
pub(crate) async fn want(
    api: &Api<DynamicObject>,
    indices: impl Iterator<Item = usize>,
    value: &str,
) -> anyhow::Result<()> {
    stream::iter(indices)
        .map(|i| set_want(api, i, value))
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Sets object `i`'s wanted round to `value`: one merge patch of its
/// [`WANT`] annotation.
///
/// # Errors
///
/// When the patch fails.
pub(crate) async fn set_want(
    api: &Api<DynamicObject>,
    i: usize,
    value: &str,
) -> anyhow::Result<()> {
    let patch = Patch::Merge(json!({"metadata": {"annotations": {WANT: value}}}));
    api.patch(&name(i), &PatchParams::default(), &patch).await?;
    Ok(())
}

/// What a listing from the API server found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Census {
    /// Objects listed.
    pub(crate) objects: usize,
    /// Of those, objects whose [`ROUND`] label equals their [`WANT`]
    /// annotation (and `token`'s prefix, when given).
    pub(crate) written: usize,
}

/// Lists every object's metadata from the API server, page by page, and
/// counts those whose label carries the wanted round; with `token`, only a
/// wanted round that starts with it counts.
///
/// # Errors
///
/// When a list request fails.
pub(crate) async fn census(
    api: &Api<DynamicObject>,
    token: Option<&str>,
) -> anyhow::Result<Census> {
    let mut census = Census::default();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list_metadata(&params).await?;
        for object in &page.items {
            census.objects += 1;
            let want = object
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(WANT));
            let round = object.metadata.labels.as_ref().and_then(|l| l.get(ROUND));
            let wanted = want.is_some_and(|w| token.is_none_or(|t| w.starts_with(t)));
            if wanted && want == round {
                census.written += 1;
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return Ok(census),
        }
    }
}
