//! Dynamic controllers on the real control plane: a controller over
//! `DynamicObject` for a custom resource no Rust type describes, found by
//! discovery at run time, its writes through the strategy table row of the
//! resource's name.
//!
//! ```text
//! cargo test -p concord-tests --test controller dynamic::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use concord::featuregates::{Operation, StrategyName};
use concord::strategies::{Condition, Error as WriteError};
use concord::{Action, Context, Manager, ManagerArgs, Reconciler, rbac::Permissions};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::pinned_kind;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const GROUP: &str = "dynamic.concord.dev";
const OURS: &str = "dynamic.concord.dev/cleanup";
const KEEP: &str = "other.example.com/keep";
/// A value the API server compares in a JSON patch `test` the way Go
/// encodes it (HTML-escaped), with non-ASCII.
const TRICKY: &str = "a & <b> ü";

/// A namespaced CRD with a status subresource whose fields no schema
/// names: the test knows it only by its group, version and kind.
fn crd(kind: &str, plural: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                }}
            }]
        }
    }))
    .unwrap()
}

/// A manager named `name` with the strategy table `strategies` (YAML).
async fn manager(env: &TestEnv, name: &str, strategies: Option<String>) -> Result<Manager> {
    let mut args = ManagerArgs::new();
    // Read when the manager is built, removed after.
    let table = match strategies {
        Some(text) => Some(concord_tests::yaml_file(
            &format!("concord-dynamic-{name}-"),
            &text,
        )?),
        None => None,
    };
    if let Some(table) = &table {
        args = args.with_config(table.to_path_buf());
    }
    Ok(Manager::builder(name)
        .with_client(env.client()?)
        .with_args(args)
        .with_signal_handling(false)
        .build()
        .await?)
}

/// The table row `default: <strategy>` for the CRD of `plural`.
fn row(plural: &str, strategy: &str) -> Option<String> {
    Some(format!(
        "strategies:\n  resources:\n    {plural}.{GROUP}:\n      default: {strategy}\n"
    ))
}

/// Adds its finalizer and a `Ready` condition to every object it is
/// handed, and records which it reconciled and with which strategy.
struct Finalize {
    seen: Arc<Mutex<BTreeSet<String>>>,
    strategies: Arc<Mutex<BTreeSet<StrategyName>>>,
}

// ANCHOR: reconciler
#[concord::async_trait]
impl Reconciler<DynamicObject> for Finalize {
    type Error = WriteError;

    async fn reconcile(
        &self,
        object: Arc<DynamicObject>,
        ctx: &Context<DynamicObject>,
    ) -> Result<Action, WriteError> {
        self.strategies
            .lock()
            .unwrap()
            .insert(ctx.strategy(Operation::AddFinalizer));
        let written = ctx.add_finalizer(&object, OURS).await?;
        let current = written.object.map(Arc::new).unwrap_or(object);
        ctx.set_condition(
            &current,
            Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Finalized".into(),
                message: format!("ready: {TRICKY}"),
            },
        )
        .await?;
        self.seen.lock().unwrap().insert(current.name_any());
        Ok(Action::await_change())
    }
}
// ANCHOR_END: reconciler

#[tokio::test]
async fn a_dynamic_controller_over_a_crd_unknown_at_compile_time_adds_its_finalizer_under_guarded()
-> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(crd("Gizmo", "gizmos")).await?;
    let ns = env.namespace().await?;
    let client = ns.client();
    // ANCHOR: discover
    // Discovered, as an operator of resources it has no type for would.
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Gizmo");
    let (gizmos, _) = pinned_kind(&client, &gvk).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns.name(), &gizmos);
    // ANCHOR_END: discover

    const OBJECTS: usize = 12;
    for i in 0..OBJECTS {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "Gizmo",
            "metadata": {
                "name": format!("gizmo-{i}"),
                "finalizers": [KEEP],
                "annotations": {"note": TRICKY},
            },
            "spec": {"size": i, "label": TRICKY, "extra": {"kept": [TRICKY, "ß"]}},
        }))?;
        let created = api.create(&PostParams::default(), &object).await?;
        // A condition of another controller's, whose message the guarded
        // status write's test compares.
        let status = json!({"status": {"conditions": [{
            "type": "Other", "status": "True", "reason": "Theirs", "message": TRICKY,
        }]}});
        api.patch_status(
            &created.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await?;
    }

    let mut manager = manager(env, "dynamic-test", row("gizmos", "guarded")).await?;
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let strategies = Arc::new(Mutex::new(BTreeSet::new()));
    let reconciler = Finalize {
        seen: seen.clone(),
        strategies: strategies.clone(),
    };
    // ANCHOR: controller_with
    manager
        .controller_with("gizmos", api.clone(), gizmos.clone(), reconciler)
        .add()?;
    // ANCHOR_END: controller_with
    let ctx = manager.context_with::<DynamicObject>(gizmos.clone());
    let metrics = manager.metrics();
    let shutdown = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    // Meanwhile another client adds its own finalizer to every object, each
    // with a JSON patch that tests the resourceVersion it read (retried on
    // a conflict): a write of ours that replaced the list from a stale
    // copy would drop it.
    let racer = {
        let api = api.clone();
        tokio::spawn(async move {
            for i in 0..OBJECTS {
                let name = format!("gizmo-{i}");
                for _ in 0..50 {
                    let current = api.get(&name).await.unwrap();
                    let patch: json_patch::Patch = serde_json::from_value(json!([
                        {"op": "test", "path": "/metadata/resourceVersion",
                         "value": current.resource_version()},
                        {"op": "add", "path": "/metadata/finalizers/-", "value": format!("racer.example.com/f{i}")},
                    ]))
                    .unwrap();
                    match api
                        .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                        .await
                    {
                        Ok(_) => break,
                        Err(kube::Error::Api(status))
                            if status.code == 409 || status.code == 422 => {}
                        Err(error) => panic!("racer: {error}"),
                    }
                }
            }
        })
    };

    let all_done = eventually(WAIT, || {
        let api = api.clone();
        async move {
            let Ok(list) = api.list(&Default::default()).await else {
                return false;
            };
            list.items.len() == OBJECTS
                && list.items.iter().all(|o| {
                    let ready = conditions(o).iter().any(|c| c["type"] == "Ready");
                    o.finalizers().iter().any(|f| f == OURS) && ready
                })
        }
    })
    .await;
    racer.await?;
    assert!(all_done, "every gizmo has our finalizer and condition");
    // Settle: the racer's last writes are reconciled (no change follows).
    tokio::time::sleep(Duration::from_secs(1)).await;

    for i in 0..OBJECTS {
        let stored = api.get(&format!("gizmo-{i}")).await?;
        let finalizers: BTreeSet<&str> = stored.finalizers().iter().map(String::as_str).collect();
        let racer = format!("racer.example.com/f{i}");
        assert_eq!(
            finalizers,
            BTreeSet::from([KEEP, OURS, racer.as_str()]),
            "{}: no finalizer lost, ours added once",
            stored.name_any()
        );
        assert_eq!(stored.data["spec"]["label"], TRICKY, "spec untouched");
        assert_eq!(stored.data["spec"]["extra"]["kept"], json!([TRICKY, "ß"]));
        assert_eq!(
            stored.annotations().get("note").map(String::as_str),
            Some(TRICKY)
        );
        let conditions = conditions(&stored);
        let types: Vec<&str> = conditions
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(
            types,
            ["Other", "Ready"],
            "their condition kept, ours added"
        );
        assert_eq!(conditions[0]["message"], TRICKY);
        assert_eq!(conditions[1]["message"], format!("ready: {TRICKY}"));
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        OBJECTS,
        "every gizmo reconciled"
    );
    assert_eq!(
        *strategies.lock().unwrap(),
        BTreeSet::from([StrategyName::Guarded]),
        "the table row of gizmos.{GROUP} chose the strategy"
    );

    // The context of the resource reads the controller's shared cache.
    let cached = ctx
        .cached(Some(ns.name()), "gizmo-0")
        .expect("the shared cache holds the object");
    assert_eq!(cached.data["spec"]["label"], TRICKY);
    assert!(ctx.store().is_some_and(|s| s.is_ready()));

    let text = metrics.render();
    let guarded_writes: u64 = text
        .lines()
        .filter(|l| {
            l.starts_with("concord_write_total{")
                && l.contains(&format!("resource=\"gizmos.{GROUP}\""))
                && l.contains("strategy=\"guarded\"")
                && l.contains("result=\"success\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(
        guarded_writes >= 2 * OBJECTS as u64,
        "finalizer and condition writes counted under guarded:\n{text}"
    );

    shutdown.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn a_dynamic_controller_with_a_label_selector_sees_only_the_objects_it_selects() -> Result<()>
{
    let env = TestEnv::shared()?;
    env.install_crd(crd("Doohickey", "doohickeys")).await?;
    let ns = env.namespace().await?;
    // Given, not discovered: group, version, kind and plural.
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Doohickey");
    let doohickeys = ApiResource::from_gvk_with_plural(&gvk, "doohickeys");
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &doohickeys);
    let make = |name: &str, team: Option<&str>| -> DynamicObject {
        let mut object = DynamicObject::new(name, &doohickeys).within(ns.name());
        if let Some(team) = team {
            object.labels_mut().insert("team".into(), team.into());
        }
        object.data = json!({"spec": {"note": TRICKY}});
        object
    };
    for (name, team) in [("a", Some("red")), ("b", Some("blue")), ("c", None)] {
        api.create(&PostParams::default(), &make(name, team))
            .await?;
    }

    let mut manager = manager(env, "dynamic-selector-test", None).await?;
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let strategies = Arc::new(Mutex::new(BTreeSet::new()));
    manager
        .controller_with(
            "red-doohickeys",
            Api::all_with(env.client()?, &doohickeys),
            doohickeys.clone(),
            Finalize {
                seen: seen.clone(),
                strategies,
            },
        )
        .with_labels("team=red")
        .with_namespaces([ns.name()])
        .add()?;
    let shutdown = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    assert!(
        eventually(WAIT, || async { seen.lock().unwrap().contains("a") }).await,
        "the selected object is reconciled"
    );
    // Relabelled into the selection: seen as new.
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "red"}}})),
    )
    .await?;
    assert!(
        eventually(WAIT, || async { seen.lock().unwrap().contains("b") }).await,
        "the relabelled object is reconciled"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        *seen.lock().unwrap(),
        BTreeSet::from(["a".to_owned(), "b".to_owned()]),
        "the unlabelled object is never handed to the controller"
    );
    let unlabelled = api.get("c").await?;
    assert!(
        !unlabelled.finalizers().iter().any(|f| f == OURS),
        "nor written"
    );

    shutdown.shutdown();
    running.await??;
    Ok(())
}

/// Adds its finalizer, and nothing else.
struct AddFinalizer;

#[concord::async_trait]
impl Reconciler<DynamicObject> for AddFinalizer {
    type Error = WriteError;

    async fn reconcile(
        &self,
        object: Arc<DynamicObject>,
        ctx: &Context<DynamicObject>,
    ) -> Result<Action, WriteError> {
        ctx.add_finalizer(&object, OURS).await?;
        Ok(Action::await_change())
    }
}

#[tokio::test]
async fn update_from_a_dynamic_controllers_trimmed_cache_keeps_last_applied_and_managed_fields()
-> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(crd("Widget", "widgets")).await?;
    let ns = env.namespace().await?;
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Widget");
    let widgets = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &widgets);
    const OBJECTS: usize = 5;
    for i in 0..OBJECTS {
        // As `kubectl apply` leaves it: the last-applied annotation, and
        // managedFields of two managers.
        let applied = json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
            "metadata": {"name": format!("widget-{i}"), "finalizers": [KEEP]},
            "spec": {"note": TRICKY},
        });
        let mut object: DynamicObject = serde_json::from_value(applied.clone())?;
        object
            .annotations_mut()
            .insert(concord::cache::LAST_APPLIED.into(), applied.to_string());
        api.create(&PostParams::default(), &object).await?;
        api.patch(
            &format!("widget-{i}"),
            &PatchParams::apply("other-manager"),
            &Patch::Apply(json!({
                "apiVersion": format!("{GROUP}/v1"), "kind": "Widget",
                "spec": {"owned": "theirs ü"},
            })),
        )
        .await?;
    }
    let before: Vec<DynamicObject> = api.list(&Default::default()).await?.items;

    let mut manager = manager(env, "dynamic-update-test", row("widgets", "update")).await?;
    manager
        .controller_with("widgets", api.clone(), widgets.clone(), AddFinalizer)
        .add()?;
    let metrics = manager.metrics();
    let shutdown = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let done = eventually(WAIT, || {
        let api = api.clone();
        async move {
            api.list(&Default::default()).await.is_ok_and(|list| {
                list.items
                    .iter()
                    .all(|o| o.finalizers().iter().any(|f| f == OURS))
            })
        }
    })
    .await;
    assert!(done, "every widget has our finalizer");
    shutdown.shutdown();
    running.await??;

    for old in before {
        let stored = api.get(&old.name_any()).await?;
        assert_eq!(
            stored.finalizers(),
            [KEEP.to_owned(), OURS.to_owned()],
            "{}",
            old.name_any()
        );
        assert_eq!(
            stored.annotations().get(concord::cache::LAST_APPLIED),
            old.annotations().get(concord::cache::LAST_APPLIED),
            "the PUT from the cached copy carried the annotation the cache kept"
        );
        let managers = |o: &DynamicObject| -> BTreeSet<String> {
            o.managed_fields()
                .iter()
                .filter_map(|m| m.manager.clone())
                .collect()
        };
        assert!(
            managers(&old).is_subset(&managers(&stored)),
            "managedFields kept: {:?} then {:?}",
            managers(&old),
            managers(&stored)
        );
        assert_eq!(stored.data["spec"], old.data["spec"], "spec untouched");
    }
    let requests = |verb: &str| -> u64 {
        let needle = format!(
            "concord_write_requests_total{{resource=\"widgets.{GROUP}\",strategy=\"update\",verb=\"{verb}\"}} "
        );
        metrics
            .render()
            .lines()
            .find_map(|l| l.strip_prefix(&needle)?.trim().parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(
        requests("update"),
        OBJECTS as u64,
        "one PUT per object, built from the complete cached copy"
    );
    assert_eq!(requests("get"), 0, "no read before the PUT");
    Ok(())
}

#[test]
fn the_permissions_of_a_dynamic_controller_come_from_its_resource() {
    let config = concord::featuregates::ConfigLoader::new()
        .with_yaml("c.yaml", row("gizmos", "update").unwrap_or_default())
        .load(concord::featuregates::FeatureRegistry::new())
        .unwrap();
    let gvk = GroupVersionKind::gvk(GROUP, "v1", "Gizmo");
    let gizmos = ApiResource::from_gvk_with_plural(&gvk, "gizmos");
    let rules = Permissions::new(config.strategies())
        .watches_resource(&gizmos)
        .writes_resource(&gizmos, &[Operation::AddFinalizer, Operation::Status])
        .rules();
    let verbs = |resource: &str| -> Vec<String> {
        rules
            .iter()
            .find(|r| r.resources.as_deref() == Some(&[resource.to_owned()][..]))
            .map(|r| r.verbs.clone())
            .unwrap_or_default()
    };
    assert_eq!(verbs("gizmos"), ["get", "list", "update", "watch"]);
    assert_eq!(verbs("gizmos/status"), ["update"]);
    assert!(
        rules
            .iter()
            .all(|r| r.api_groups.as_deref() == Some(&[GROUP.to_owned()][..]))
    );
}

fn conditions(object: &DynamicObject) -> Vec<Value> {
    object.data["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}
