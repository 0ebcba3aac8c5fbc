//! The write path's own promises against a real kube-apiserver and etcd:
//! `update` never drops a field the typed object lacks, no mutation can
//! make a write unconditional, impossible strategy configurations are
//! refused at load time, and `apply` refuses what it cannot express before
//! sending anything.

use std::io::Write as _;

use anyhow::Context as _;
use concord::ManagerArgs;
use concord_featuregates::FeatureRegistry;
use concord_strategies::{
    ConflictPolicy, Error, Intent, Mutation, StrategyName, Verb, Writer, strategy_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

// ANCHOR: lagging_type
/// A Rust type that lags its CRD: the server also stores `spec.color`.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(group = "concord.example", version = "v1", kind = "Gadget", namespaced)]
struct GadgetSpec {
    size: i64,
}
// ANCHOR_END: lagging_type

fn gadget_crd() -> anyhow::Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.concord.example"},
        "spec": {
            "group": "concord.example",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer"},
                        "color": {"type": "string"},
                    }},
                }}},
            }],
        },
    }))?)
}

/// A typed `update` of an object whose Rust type lacks a stored field keeps
/// that field: the PUT is built from the stored JSON, not the typed copy.
#[tokio::test]
async fn typed_update_keeps_fields_the_rust_type_lacks() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    env.install_crd(gadget_crd()?).await?;
    let ns = env.namespace().await?;
    let ar = ApiResource::erase::<Gadget>(&());
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client(), ns.name(), &ar);
    let mut gadget = DynamicObject::new("g", &ar);
    gadget.data = json!({"spec": {"size": 3, "color": "blue"}});
    raw.create(&PostParams::default(), &gadget).await?;

    let typed: Api<Gadget> = Api::namespaced(ns.client(), ns.name());
    let observed = typed.get("g").await?;
    let writer = Writer::<Gadget>::new(
        env.client()?,
        strategy_for(StrategyName::Update, ConflictPolicy::default()),
    );
    let written = writer
        .write(&observed, &Intent::set_label("tier", "gold").into())
        .await?;
    assert_eq!(written.outcome.requests(Verb::Update), 1);

    let stored = raw.get("g").await?;
    assert_eq!(stored.data["spec"]["color"], "blue", "{stored:?}");
    assert_eq!(stored.data["spec"]["size"], 3);
    assert_eq!(
        stored.metadata.labels.unwrap_or_default()["tier"],
        "gold",
        "the write landed"
    );
    Ok(())
}

/// A closure that deletes `resourceVersion` (and `uid`) from the object
/// cannot turn a stale write into an unconditional one: `strict` and
/// `update` set both again after the mutation, and the server answers 409.
#[tokio::test]
async fn closure_removing_resource_version_still_conflicts() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for name in [StrategyName::Strict, StrategyName::Update] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name.as_str()}, "data": {"k": "v"},
        }))?;
        let stale = cms.create(&PostParams::default(), &cm).await?;
        cms.patch(
            name.as_str(),
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"other": "1"}})),
        )
        .await?;
        // ANCHOR: unguarded_closure
        let sneaky = Mutation::custom(|object| {
            if let Some(meta) = object["metadata"].as_object_mut() {
                meta.remove("resourceVersion");
                meta.remove("uid");
            }
            object["data"]["k"] = json!("overwritten");
        });
        // ANCHOR_END: unguarded_closure
        // The stale copy as complete JSON, so that `update` writes from it
        // rather than reading first as it does for a typed object.
        let stale: DynamicObject = serde_json::from_value(serde_json::to_value(&stale)?)?;
        let writer = Writer::<DynamicObject>::new_with(
            env.client()?,
            strategy_for(name, ConflictPolicy::Requeue),
            &ApiResource::erase::<ConfigMap>(&()),
        );
        let result = writer.write(&stale, &sneaky).await;
        assert!(
            matches!(result, Err(Error::Conflict { .. })),
            "{name}: {result:?}"
        );
        let stored = cms.get(name.as_str()).await?;
        let data = stored.data.unwrap_or_default();
        assert_eq!(data["k"], "v", "{name}: the stale write must not land");
        assert_eq!(data["other"], "1", "{name}");
    }
    Ok(())
}

/// A strategy and conflict policy that cannot work together is refused
/// when the configuration is loaded, naming the file and key, never
/// downgraded to another strategy.
#[test]
fn impossible_strategy_configuration_is_refused_at_load_time() -> anyhow::Result<()> {
    for (yaml, expected) in [
        (
            "strategies:\n  resources:\n    pods:\n      operations:\n        remove-finalizer: {strategy: apply, onConflict: requeue}\n",
            "remove-finalizer",
        ),
        (
            "strategies:\n  resources:\n    pods:\n      operations:\n        metadata: stricter\n",
            "stricter",
        ),
        (
            "strategies:\n  resources:\n    pods:\n      operations:\n        other: apply\n",
            "other",
        ),
    ] {
        let mut file = tempfile_in_target()?;
        file.1.write_all(yaml.as_bytes())?;
        let mut args = ManagerArgs::new();
        args.config = Some(file.0.clone());
        let err = args
            .load_config(FeatureRegistry::new())
            .err()
            .with_context(|| format!("{yaml} loaded"))?;
        let message = format!("{err}");
        let path = file.0.display().to_string();
        assert!(message.contains(&path), "{message} names {path}");
        assert!(message.contains(expected), "{message} names {expected}");
        std::fs::remove_file(&file.0)?;
    }
    Ok(())
}

fn tempfile_in_target() -> anyhow::Result<(std::path::PathBuf, std::fs::File)> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "concord-write-path-{}-{}.yaml",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let file = std::fs::File::create(&path)?;
    Ok((path, file))
}

/// `apply` cannot carry a status deletion (`null`): the mutation is refused
/// before anything is sent, so no part of it lands.
#[tokio::test]
async fn apply_refuses_status_deletions_before_sending() -> anyhow::Result<()> {
    let env = concord_testenv::TestEnv::shared()?;
    let ns = env.namespace().await?;
    let cms: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "s"}}))?;
    let observed = cms.create(&PostParams::default(), &cm).await?;
    let writer = Writer::<ConfigMap>::new(
        env.client()?,
        strategy_for(StrategyName::Apply, ConflictPolicy::default()),
    );
    let mutation = Mutation::new().with(Intent::MergeStatus(
        json!({"phase": "Ready", "message": null}),
    ));
    let result = writer.write(&observed, &mutation).await;
    assert!(
        matches!(result, Err(Error::UnsupportedMutation { .. })),
        "{result:?}"
    );
    let stored = cms.get("s").await?;
    assert_eq!(
        stored.metadata.resource_version, observed.metadata.resource_version,
        "nothing was written"
    );
    Ok(())
}
