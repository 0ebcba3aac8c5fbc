//! Creating and deleting through `Context` on the real control plane:
//! under the strategy table's `create` and `delete` operations, counted in
//! the write metrics, from a reconciler as an operator runs one.
//!
//! ```text
//! cargo test -p concord-tests --test controller context::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use concord::strategies::Error as WriteError;
use concord::{Action, Context, Manager, ManagerArgs, Reconciler};
use concord_testenv::TestEnv;
use concord_tests::{config_map_write_requests, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::{Client, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn yaml(name: &str, text: &str) -> tempfile::TempPath {
    concord_tests::yaml_file(&format!("concord-context-{name}-"), text).unwrap()
}

async fn manager(client: Client, config: Option<PathBuf>) -> Manager {
    let mut args = ManagerArgs::new();
    if let Some(config) = config {
        args = args.with_config(config);
    }
    Manager::builder("context-test")
        .with_client(client)
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

fn config_map(ns: &str, name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

fn value(map: &ConfigMap) -> Option<&str> {
    map.data.as_ref()?.get("value").map(String::as_str)
}

#[tokio::test]
async fn creating_an_existing_object_is_a_clear_error_and_changes_nothing() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let manager = manager(env.client()?, None).await;
    let ctx = manager.context::<ConfigMap>();
    let metrics = manager.metrics();

    let first = ctx
        .create(&config_map(ns.name(), "settings", "a & <b> ü"))
        .await?;
    assert!(first.uid().is_some(), "the stored object comes back");
    let again = ctx
        .create(&config_map(ns.name(), "settings", "other"))
        .await
        .expect_err("a second create of the name fails under strict");
    assert!(
        matches!(again, WriteError::AlreadyExists { .. }),
        "{again:?}"
    );
    assert_eq!(
        again.to_string(),
        format!("configmaps {}/settings already exists", ns.name())
    );
    let stored = maps.get("settings").await?;
    assert_eq!(value(&stored), Some("a & <b> ü"), "nothing changed");
    assert_eq!(stored.uid(), first.uid());

    let missing_ns = ctx
        .create(&config_map("no-such-namespace", "settings", "x"))
        .await
        .expect_err("a create into a missing namespace fails");
    assert_eq!(
        missing_ns.to_string(),
        "namespaces no-such-namespace not found"
    );

    let text = metrics.render();
    assert_eq!(
        config_map_write_requests(&text, "strict", "create"),
        3,
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("concord_write_total{")
            && l.contains("resource=\"configmaps\"")
            && l.contains("strategy=\"strict\"")
            && l.contains("result=\"error\"")
            && l.ends_with(" 2")),
        "two failed creates counted as errors:\n{text}"
    );
    Ok(())
}

#[tokio::test]
async fn a_lax_create_of_an_existing_name_is_done_and_hands_back_the_stored_object() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let config = yaml(
        "lax-create",
        "strategies:\n  resources:\n    configmaps:\n      operations:\n        create: lax\n",
    );
    let manager = manager(env.client()?, Some(config.to_path_buf())).await;
    let ctx = manager.context::<ConfigMap>();
    assert_eq!(
        ctx.writer_for::<ConfigMap>()
            .strategy(concord::featuregates::Operation::Create),
        concord::featuregates::StrategyName::Lax
    );
    maps.create(
        &PostParams::default(),
        &config_map(ns.name(), "settings", "theirs"),
    )
    .await?;
    let stored = ctx
        .create(&config_map(ns.name(), "settings", "ours"))
        .await?;
    assert_eq!(
        value(&stored),
        Some("theirs"),
        "the stored object, untouched"
    );
    assert_eq!(value(&maps.get("settings").await?), Some("theirs"));
    Ok(())
}

#[tokio::test]
async fn a_delete_from_a_stale_copy_deletes_nothing_and_a_successor_is_left_alone() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let manager = manager(env.client()?, None).await;
    let ctx = manager.context::<ConfigMap>();
    let pp = PostParams::default();

    let copy = maps
        .create(&pp, &config_map(ns.name(), "job", "running"))
        .await?;
    // Another writer changes the object after the copy was read: the
    // reconciler's decision to delete was made on what it no longer is.
    maps.patch(
        "job",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "keep me"}})),
    )
    .await?;
    let stale = ctx
        .delete(&copy)
        .await
        .expect_err("a stale copy deletes nothing");
    assert!(matches!(stale, WriteError::Conflict { .. }), "{stale:?}");
    assert_eq!(value(&maps.get("job").await?), Some("keep me"));

    // The object is deleted and created again under its name: the old
    // copy's delete is done, and the successor stays.
    let fresh = maps.get("job").await?;
    maps.delete("job", &DeleteParams::default()).await?;
    let successor = maps
        .create(&pp, &config_map(ns.name(), "job", "successor"))
        .await?;
    let written = ctx.delete(&fresh).await?;
    assert!(written.outcome.gone, "the copy's object was already gone");
    assert!(written.object.is_none());
    let still = maps.get("job").await?;
    assert_eq!(still.uid(), successor.uid(), "the successor was left alone");

    // A delete of a missing object is done.
    maps.delete("job", &DeleteParams::default()).await?;
    let written = ctx.delete(&still).await?;
    assert!(written.outcome.gone);

    // The current copy — here a metadata-only one — deletes.
    let current = maps
        .create(&pp, &config_map(ns.name(), "job", "current"))
        .await?;
    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(ns.client(), ns.name());
    let copy = meta.get_metadata("job").await?;
    assert_eq!(copy.uid(), current.uid());
    let written = ctx.delete(&copy).await?;
    assert!(!written.outcome.gone);
    assert!(maps.get_opt("job").await?.is_none(), "deleted");
    Ok(())
}

#[tokio::test]
async fn a_lax_delete_removes_the_object_whatever_it_now_holds() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let config = yaml(
        "lax-delete",
        "strategies:\n  resources:\n    configmaps:\n      operations:\n        delete: lax\n",
    );
    let manager = manager(env.client()?, Some(config.to_path_buf())).await;
    let ctx = manager.context::<ConfigMap>();
    let copy = maps
        .create(&PostParams::default(), &config_map(ns.name(), "job", "a"))
        .await?;
    maps.patch(
        "job",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "b"}})),
    )
    .await?;
    ctx.delete(&copy).await?;
    assert!(maps.get_opt("job").await?.is_none());
    Ok(())
}

/// For each ConfigMap labelled `role=parent`: a child `<name>-child`, owned
/// by it, while the parent has no `drop` label; none once it has.
struct Children;

#[concord::async_trait]
impl Reconciler<ConfigMap> for Children {
    type Error = WriteError;

    async fn reconcile(
        &self,
        parent: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        let ns = parent.namespace().unwrap_or_default();
        let name = format!("{}-child", parent.name_any());
        let existing = ctx.get(Some(&ns), &name).await.ok().flatten();
        let drop = parent.labels().contains_key("drop");
        // ANCHOR: children
        match (existing, drop) {
            (None, false) => {
                let child = config_map(&ns, &name, "child of a & <b>");
                match ctx.create_owned(&parent, child).await {
                    Ok(_) | Err(WriteError::AlreadyExists { .. }) => {}
                    Err(error) => return Err(error),
                }
            }
            (Some(child), true) => {
                ctx.delete(child.as_ref()).await?;
            }
            _ => {}
        }
        // ANCHOR_END: children
        Ok(Action::await_change())
    }
}

/// A running manager whose one controller reconciles the ConfigMaps
/// labelled `role=ROLE` with `reconciler`, and a first such parent.
struct Parents {
    maps: Api<ConfigMap>,
    parent: ConfigMap,
    metrics: Arc<concord::metrics::Metrics>,
    stop: concord::manager::ShutdownHandle,
    running: tokio::task::JoinHandle<Result<(), concord::Error>>,
    _ns: concord_testenv::TestNamespace,
}

async fn parents<R>(role: &str, reconciler: R, name: &str, value: &str) -> Result<Parents>
where
    R: Reconciler<ConfigMap> + 'static,
{
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?, None).await;
    manager
        .controller(role, maps.clone(), reconciler)
        .with_labels(&format!("role={role}"))
        .add()?;
    let metrics = manager.metrics();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let mut parent = config_map(ns.name(), name, value);
    parent.metadata.labels = Some(BTreeMap::from([("role".into(), role.into())]));
    let parent = maps.create(&PostParams::default(), &parent).await?;
    Ok(Parents {
        maps,
        parent,
        metrics,
        stop,
        running,
        _ns: ns,
    })
}

impl Parents {
    /// Stops the manager and returns how its run ended.
    async fn finish(self) -> Result<()> {
        self.stop.shutdown();
        self.running.await??;
        Ok(())
    }
}

#[tokio::test]
async fn a_reconciler_creates_an_owned_child_and_deletes_it() -> Result<()> {
    let run = parents("parent", Children, "web", "parent").await?;
    let (maps, parent) = (run.maps.clone(), run.parent.clone());
    assert!(
        eventually(WAIT, || async {
            maps.get_opt("web-child").await.unwrap().is_some()
        })
        .await
    );
    let child = maps.get("web-child").await?;
    let owner = &child.owner_references()[0];
    assert_eq!(Some(&owner.uid), parent.uid().as_ref());
    assert_eq!(owner.controller, Some(true));
    assert_eq!(value(&child), Some("child of a & <b>"));

    maps.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"drop": "yes"}}})),
    )
    .await?;
    assert!(
        eventually(WAIT, || async {
            maps.get_opt("web-child").await.unwrap().is_none()
        })
        .await
    );
    let text = run.metrics.render();
    assert!(
        config_map_write_requests(&text, "strict", "create") >= 1,
        "{text}"
    );
    assert!(
        config_map_write_requests(&text, "strict", "delete") >= 1,
        "{text}"
    );
    run.finish().await
}

/// Keeps a child ConfigMap, `<parent>-applied`, holding the parent's value,
/// through `Context::apply_owned`.
struct Applied;

#[concord::async_trait]
impl Reconciler<ConfigMap> for Applied {
    type Error = WriteError;

    async fn reconcile(
        &self,
        parent: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        let ns = parent.namespace().unwrap_or_default();
        let name = format!("{}-applied", parent.name_any());
        // ANCHOR: apply_owned
        let child = config_map(&ns, &name, value(&parent).unwrap_or_default());
        ctx.apply_owned(parent.as_ref(), child).await?;
        // ANCHOR_END: apply_owned
        Ok(Action::await_change())
    }
}

#[tokio::test]
async fn an_applied_child_follows_its_parent_and_keeps_another_writers_fields() -> Result<()> {
    let run = parents("applier", Applied, "site", "first & <ü>").await?;
    let (maps, parent) = (run.maps.clone(), run.parent.clone());
    let holds = |expected: &'static str| {
        let maps = maps.clone();
        async move {
            maps.get_opt("site-applied")
                .await
                .unwrap()
                .is_some_and(|c| value(&c) == Some(expected))
        }
    };
    assert!(eventually(WAIT, || holds("first & <ü>")).await);
    let child = maps.get("site-applied").await?;
    let owner = &child.owner_references()[0];
    assert_eq!(Some(&owner.uid), parent.uid().as_ref());
    assert_eq!(owner.controller, Some(true));

    // Another writer adds a field of its own; the parent then changes.
    maps.patch(
        "site-applied",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"team": "a & <b>"}}, "data": {"extra": "kept"}}),
        ),
    )
    .await?;
    maps.patch(
        "site",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "second & <é>"}})),
    )
    .await?;
    assert!(eventually(WAIT, || holds("second & <é>")).await);
    let child = maps.get("site-applied").await?;
    assert_eq!(
        child.annotations().get("team").map(String::as_str),
        Some("a & <b>")
    );
    assert_eq!(
        child
            .data
            .as_ref()
            .and_then(|d| d.get("extra"))
            .map(String::as_str),
        Some("kept"),
        "the apply removed a field another writer owns"
    );
    let text = run.metrics.render();
    assert!(
        config_map_write_requests(&text, "apply", "apply") >= 2,
        "{text}"
    );
    run.finish().await
}
