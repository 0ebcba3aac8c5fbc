//! The `guarded` strategy against a real kube-apiserver and etcd: its
//! preconditions are exactly what it writes, so another writer's change
//! between our read and our write conflicts only when it touched the same
//! field, and nothing is lost either way.
//!
//! ```text
//! cargo test -p concord-tests --test strategies guarded::
//! ```
#![allow(clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, Condition, Error, Intent, Mutation, ObjectKey, StrategyName, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::exact_support;
use crate::support;

use exact_support::{Gadgets, clear_finalizers, create};
use support::{FOREIGN, OURS, policy};

/// Before our first request, another writer sends `patch`.
#[derive(Debug)]
struct Meanwhile {
    raw: Api<DynamicObject>,
    name: String,
    patch: Patch<Value>,
}

#[async_trait]
impl BeforeWrite for Meanwhile {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt == 0 {
            self.raw
                .patch(&self.name, &PatchParams::default(), &self.patch)
                .await
                .expect("the other writer's patch");
        }
    }
}

fn meanwhile(raw: &Api<DynamicObject>, name: &str, patch: Patch<Value>) -> Arc<Meanwhile> {
    Arc::new(Meanwhile {
        raw: raw.clone(),
        name: name.into(),
        patch,
    })
}

fn writer(
    env: &concord_testenv::TestEnv,
    resource: &kube::core::ApiResource,
    hook: Arc<Meanwhile>,
) -> anyhow::Result<Writer<DynamicObject>> {
    Ok(Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Guarded, policy()),
        resource,
    )
    .with_target(|t| t.with_before_write(hook)))
}

fn finalizers(object: &DynamicObject) -> Vec<String> {
    object.finalizers().to_vec()
}

/// A foreign finalizer added first (strategic merge) or last (JSON patch)
/// between our read and our write survives our removal from a Pod, which
/// is one request and meets no conflict.
#[tokio::test]
async fn a_foreign_finalizer_survives_a_removal_from_a_pod_in_one_request() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let resource = kube::core::ApiResource::erase::<Pod>(&());
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let first = Patch::Strategic(json!({"metadata": {"finalizers": [FOREIGN]}}));
    let last = Patch::Json(serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/finalizers/-", "value": FOREIGN}
    ]))?);
    for (name, foreign) in [("first", first), ("last", last)] {
        let pod = support::pod(name, &[OURS])?;
        pods.create(&PostParams::default(), &pod).await?;
        let observed = raw.get(name).await?;
        let written = writer(env, &resource, meanwhile(&raw, name, foreign))?
            .write(&observed, &Intent::remove_finalizer(OURS).into())
            .await?;
        let stored = raw.get(name).await?;
        assert_eq!(finalizers(&stored), [FOREIGN], "{name}");
        assert_eq!(
            written.outcome.total_requests(),
            1,
            "{name}: {:?}",
            written.outcome
        );
        assert_eq!(written.outcome.conflicts, 0, "{name}");
        clear_finalizers(&raw, name).await?;
    }
    Ok(())
}

/// On a custom resource (a JSON patch testing the entry), a foreign
/// finalizer appended meanwhile costs nothing; one put in front of ours
/// moves our entry, trips the test and costs one re-read. Either way it
/// survives and ours is gone.
#[tokio::test]
async fn a_foreign_finalizer_survives_a_removal_from_a_custom_resource() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    let last = Patch::Json(serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/finalizers/-", "value": FOREIGN}
    ]))?);
    let first = Patch::Merge(json!({"metadata": {"finalizers": [FOREIGN, OURS]}}));
    for (name, foreign, conflicts) in [("last", last, 0), ("first", first, 1)] {
        create(&raw, &resource, name).await?;
        let ours = json!({"metadata": {"finalizers": [OURS]}});
        let observed = raw
            .patch(name, &PatchParams::default(), &Patch::Merge(ours))
            .await?;
        let written = writer(env, &resource, meanwhile(&raw, name, foreign))?
            .write(&observed, &Intent::remove_finalizer(OURS).into())
            .await?;
        assert_eq!(finalizers(&raw.get(name).await?), [FOREIGN], "{name}");
        assert_eq!(
            written.outcome.conflicts, conflicts,
            "{name}: {:?}",
            written.outcome
        );
        clear_finalizers(&raw, name).await?;
    }
    Ok(())
}

/// A label another writer sets on another key never conflicts; one it sets
/// on the same key always does, and our write is re-applied to its copy.
#[tokio::test]
async fn labels_conflict_only_on_the_same_key() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    for (name, key, conflicts) in [("other-key", "theirs", 0), ("same-key", "shared", 1)] {
        create(&raw, &resource, name).await?;
        let start = json!({"metadata": {"labels": {"shared": "old"}}});
        let observed = raw
            .patch(name, &PatchParams::default(), &Patch::Merge(start))
            .await?;
        // ANCHOR: same_key
        // Another writer sets a label (`key`) between our read and our write.
        let foreign = Patch::Merge(json!({"metadata": {"labels": {key: "set-by-them"}}}));
        let written = writer(env, &resource, meanwhile(&raw, name, foreign))?
            .write(&observed, &Intent::set_label("shared", "ours").into())
            .await?;
        // Another key: no conflict. The same key: one, and our label is
        // set again on their copy.
        // ANCHOR_END: same_key
        let stored = raw.get(name).await?;
        assert_eq!(
            written.outcome.conflicts, conflicts,
            "{name}: {:?}",
            written.outcome
        );
        assert_eq!(
            stored.labels().get("shared").map(String::as_str),
            Some("ours"),
            "{name}"
        );
        if key != "shared" {
            assert_eq!(
                stored.labels().get(key).map(String::as_str),
                Some("set-by-them")
            );
        }
    }
    Ok(())
}

/// A condition of another type written meanwhile never conflicts; the same
/// condition written meanwhile always does.
#[tokio::test]
async fn conditions_conflict_only_on_the_same_type() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    // `create` stores `Ready` (index 0) and `Other` (index 1).
    for (name, index, conflicts) in [("other-type", 1, 0), ("same-type", 0, 1)] {
        let observed = create(&raw, &resource, name).await?;
        let ready = Intent::SetCondition(Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "Reconciled".into(),
            message: "by us".into(),
        });
        let writer = Writer::<DynamicObject>::new_with(
            env.client()?,
            strategy_for(StrategyName::Guarded, policy()),
            &resource,
        )
        .with_target(|t| {
            t.with_before_write(Arc::new(StatusMeanwhile {
                raw: raw.clone(),
                name: name.into(),
                index,
            }))
        });
        let written = writer.write(&observed, &ready.into()).await?;
        let stored = raw.get(name).await?;
        let conditions = &stored.data["status"]["conditions"];
        assert_eq!(
            written.outcome.conflicts, conflicts,
            "{name}: {:?}",
            written.outcome
        );
        assert_eq!(conditions[0]["message"], "by us", "{name}");
        assert_eq!(conditions[0]["status"], "True", "{name}");
        if index == 1 {
            assert_eq!(conditions[1]["message"], "by them", "{name}: theirs kept");
        }
    }
    Ok(())
}

/// Before our first request, another writer changes the message of the
/// condition at `index` through the status subresource.
#[derive(Debug)]
struct StatusMeanwhile {
    raw: Api<DynamicObject>,
    name: String,
    index: usize,
}

#[async_trait]
impl BeforeWrite for StatusMeanwhile {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt == 0 {
            let patch: json_patch::Patch = serde_json::from_value(json!([
                {"op": "replace", "path": format!("/status/conditions/{}/message", self.index), "value": "by them"}
            ]))
            .expect("a JSON patch");
            self.raw
                .patch_status(
                    &self.name,
                    &PatchParams::default(),
                    &Patch::Json::<()>(patch),
                )
                .await
                .expect("the other writer's status patch");
        }
    }
}

/// A closure changing `spec.size` does not conflict with a concurrent
/// change of `spec.color`, and does with one of `spec.size`, whose value
/// it then builds on: nothing is lost.
#[tokio::test]
async fn a_closure_conflicts_only_on_the_fields_it_writes() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    let grow = || {
        Mutation::custom(|gadget| {
            let size = gadget["spec"]["size"].as_i64().unwrap_or_default();
            gadget["spec"]["size"] = json!(size + 1);
        })
    };
    for (name, field, value, conflicts, size) in [
        ("color", "color", json!("blue"), 0, 2),
        ("size", "size", json!(9), 1, 10),
    ] {
        let observed = create(&raw, &resource, name).await?;
        let foreign = Patch::Merge(json!({"spec": {field: value}}));
        let written = writer(env, &resource, meanwhile(&raw, name, foreign))?
            .write(&observed, &grow())
            .await?;
        let stored = raw.get(name).await?;
        assert_eq!(
            written.outcome.conflicts, conflicts,
            "{name}: {:?}",
            written.outcome
        );
        assert_eq!(stored.data["spec"]["size"], size, "{name}");
        let color = if field == "color" { "blue" } else { "red" };
        assert_eq!(stored.data["spec"]["color"], color, "{name}");
    }
    Ok(())
}

/// A path the write depends on but does not write is tested like the
/// written ones: a concurrent change of it means the decision is stale,
/// so the write hands it back (`Conflict`) and stores nothing.
#[tokio::test]
async fn a_dependency_is_tested_like_a_written_field() -> anyhow::Result<()> {
    let Gadgets {
        env,
        ns: _ns,
        resource,
        raw,
        ..
    } = Gadgets::new().await?;
    let observed = create(&raw, &resource, "depends").await?;
    let foreign = Patch::Merge(json!({"spec": {"color": "green"}}));
    // ANCHOR: depends
    let mark = Mutation::from(Intent::set_label("painted", "red")).depending_on("/spec/color");
    // ANCHOR_END: depends
    let stale = writer(env, &resource, meanwhile(&raw, "depends", foreign))?
        .write(&observed, &mark)
        .await
        .unwrap_err();
    assert!(matches!(stale, Error::Conflict { .. }), "{stale:?}");
    let stored = raw.get("depends").await?;
    assert_eq!(stored.data["spec"]["color"], "green");
    assert_eq!(
        stored.metadata.labels.unwrap_or_default().get("painted"),
        None,
        "painted=red on a green object"
    );
    let lax = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Lax, policy()),
        &resource,
    );
    let refused = lax.write(&observed, &mark).await.unwrap_err();
    assert!(
        matches!(refused, Error::UnsupportedMutation { .. }),
        "{refused:?}"
    );
    Ok(())
}

/// An object deleted and recreated under the same name between our read
/// and our write is never written: a Pod (strategic merge) and a custom
/// resource (JSON patch).
#[tokio::test]
async fn a_recreated_object_is_never_written() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let resource = kube::core::ApiResource::erase::<Pod>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let pod = support::pod("recreated", &[OURS])?;
    pods.create(&PostParams::default(), &pod).await?;
    let observed = raw.get("recreated").await?;
    clear_finalizers(&raw, "recreated").await?;
    pods.delete("recreated", &DeleteParams::default().grace_period(0))
        .await?;
    let mut wait = 0;
    while pods.get_opt("recreated").await?.is_some() && wait < 100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        wait += 1;
    }
    pods.create(&PostParams::default(), &pod).await?;
    let writer = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Guarded, policy()),
        &resource,
    );
    let err = writer
        .write(&observed, &Intent::remove_finalizer(OURS).into())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ObjectRecreated { .. }), "{err:?}");
    assert_eq!(
        finalizers(&raw.get("recreated").await?),
        [OURS],
        "the new pod untouched"
    );
    let err = writer
        .write(&observed, &Intent::set_label("x", "1").into())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ObjectRecreated { .. }), "{err:?}");
    clear_finalizers(&raw, "recreated").await?;

    // A custom resource: the JSON patch tests the uid.
    let Gadgets { resource, raw, .. } = Gadgets::new().await?;
    let observed = create(&raw, &resource, "recreated").await?;
    raw.delete("recreated", &DeleteParams::default()).await?;
    create(&raw, &resource, "recreated").await?;
    let writer = Writer::<DynamicObject>::new_with(
        env.client()?,
        strategy_for(StrategyName::Guarded, policy()),
        &resource,
    );
    let err = writer
        .write(&observed, &Intent::set_label("x", "1").into())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ObjectRecreated { .. }), "{err:?}");
    assert_eq!(raw.get("recreated").await?.labels().get("x"), None);
    Ok(())
}

/// Finding 5: an entry of a keyless list (a pod template's tolerations)
/// is identified by its whole old value, not its index. Another writer
/// puts a toleration in front between our read and our write; the field we
/// change holds the same old value in the entry that moved to our index,
/// so testing the field alone would pass and change the wrong entry.
#[tokio::test]
async fn a_keyless_list_entry_is_changed_where_it_moved() -> anyhow::Result<()> {
    use k8s_openapi::api::apps::v1::Deployment;
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let resource = kube::core::ApiResource::erase::<Deployment>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &resource);
    let toleration = |key: &str| json!({"key": key, "operator": "Exists", "effect": "NoSchedule"});
    let deployment: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "tolerant"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "tolerant"}},
            "template": {
                "metadata": {"labels": {"app": "tolerant"}},
                "spec": {
                    "containers": [{"name": "c", "image": "example.invalid/c:1"}],
                    "tolerations": [toleration("a"), toleration("b")],
                },
            },
        },
    }))?;
    raw.create(&PostParams::default(), &deployment).await?;
    let observed = raw.get("tolerant").await?;
    let in_front = Patch::Json(serde_json::from_value(json!([
        {"op": "add", "path": "/spec/template/spec/tolerations/0", "value": toleration("raced")}
    ]))?);
    let execute_b = Mutation::custom(|d| {
        if let Some(list) = d["spec"]["template"]["spec"]["tolerations"].as_array_mut()
            && let Some(b) = list.iter_mut().find(|t| t["key"] == "b")
        {
            b["effect"] = json!("NoExecute");
        }
    });
    let written = writer(env, &resource, meanwhile(&raw, "tolerant", in_front))?
        .write(&observed, &execute_b)
        .await?;
    let stored = raw.get("tolerant").await?;
    let effects: Vec<(String, String)> = stored.data["spec"]["template"]["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["key"].as_str().unwrap_or_default().to_owned(),
                t["effect"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("raced", "NoSchedule"),
        ("a", "NoSchedule"),
        ("b", "NoExecute"),
    ]
    .map(|(k, e)| (k.to_owned(), e.to_owned()));
    assert_eq!(effects, expected, "{:?}", written.outcome);
    assert_eq!(written.outcome.conflicts, 1, "{:?}", written.outcome);
    Ok(())
}
