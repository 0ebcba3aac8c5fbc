//! The deployment manifests of the example operators (`examples/deploy/`):
//! every object passes a server-side dry-run on the real control plane, and
//! the generated parts (Role, ConfigMap, CRD) match what the code and the
//! configuration say today.
//!
//! ```text
//! cargo test -p concord-tests --test examples_manifests
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use concord::featuregates::StrategyTable;
use concord::{FeatureRegistry, ManagerArgs, Permissions};
use concord_examples::{argo, kueue, load_config, widgets};
use concord_testenv::TestEnv;
use k8s_openapi::api::rbac::v1::Role;
use kube::CustomResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

/// Each example: its name, config file, gate registry and permissions.
type Example = (
    &'static str,
    &'static str,
    fn() -> FeatureRegistry,
    fn(&StrategyTable) -> Permissions<'_>,
);

const EXAMPLES: [Example; 3] = [
    (
        "kueue-finalizer",
        kueue::CONFIG,
        || kueue::registry().unwrap().0,
        kueue::permissions,
    ),
    (
        "argo-cleanup",
        argo::CONFIG,
        FeatureRegistry::new,
        argo::permissions,
    ),
    (
        "crd-operator",
        widgets::CONFIG,
        FeatureRegistry::new,
        widgets::permissions,
    ),
];

fn deploy_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/deploy")
        .join(name)
}

fn read_yaml(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    serde_yaml::from_str(&text).with_context(|| path.display().to_string())
}

/// The manifests of `name` in the order of its kustomization.
fn manifests(name: &str) -> Result<Vec<(String, Value)>> {
    let dir = deploy_dir(name);
    let kustomization = read_yaml(&dir.join("kustomization.yaml"))?;
    let files = kustomization["resources"].as_array().context("resources")?;
    files
        .iter()
        .map(|f| {
            let file = f.as_str().context("file name")?.to_owned();
            let value = read_yaml(&dir.join(&file))?;
            Ok((file, value))
        })
        .collect()
}

/// Where `object` lives in the API, and whether it is namespaced.
fn resource_of(object: &Value) -> Result<(ApiResource, bool)> {
    let api_version = object["apiVersion"].as_str().context("apiVersion")?;
    let kind = object["kind"].as_str().context("kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (plural, namespaced) = match kind {
        "Namespace" => ("namespaces", false),
        "CustomResourceDefinition" => ("customresourcedefinitions", false),
        "ServiceAccount" => ("serviceaccounts", true),
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        "ConfigMap" => ("configmaps", true),
        "Deployment" => ("deployments", true),
        other => anyhow::bail!("no plural known for kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Ok((ApiResource::from_gvk_with_plural(&gvk, plural), namespaced))
}

#[tokio::test]
async fn every_manifest_passes_a_server_side_dry_run() -> Result<()> {
    let env = TestEnv::shared()?;
    let client = env.client()?;
    let params = PatchParams::apply("concord-examples-manifests")
        .force()
        .dry_run();
    for (example, ..) in EXAMPLES {
        // Namespaced objects go to a fresh namespace: a dry-run does not
        // create the manifests' own Namespace.
        let ns = env.namespace().await?;
        let objects = manifests(example)?;
        assert!(
            objects.len() >= 6,
            "{example}: every manifest is listed in kustomization.yaml"
        );
        for (file, mut object) in objects {
            let (resource, namespaced) = resource_of(&object)?;
            if namespaced {
                object["metadata"]["namespace"] = ns.name().into();
            }
            if let Some(subjects) = object.get_mut("subjects").and_then(Value::as_array_mut) {
                for subject in subjects {
                    subject["namespace"] = ns.name().into();
                }
            }
            let name = object["metadata"]["name"]
                .as_str()
                .context("name")?
                .to_owned();
            let api: Api<DynamicObject> = if namespaced {
                Api::namespaced_with(client.clone(), ns.name(), &resource)
            } else {
                Api::all_with(client.clone(), &resource)
            };
            api.patch(&name, &params, &Patch::Apply(&object))
                .await
                .with_context(|| {
                    format!(
                        "{example}/{file}: server-side dry-run of {} {name}",
                        resource.kind
                    )
                })?;
            assert!(
                api.get_opt(&name).await?.is_none() || !namespaced,
                "{example}/{file}: a dry-run creates nothing"
            );
        }
    }
    Ok(())
}

#[test]
fn generated_manifests_match_the_code_and_configuration() -> Result<()> {
    for (example, config_path, registry, permissions) in EXAMPLES {
        let dir = deploy_dir(example);
        let config = load_config(&ManagerArgs::new().with_config(config_path), registry())?;
        let role: Role =
            serde_yaml::from_value(serde_yaml::to_value(read_yaml(&dir.join("role.yaml"))?)?)?;
        assert_eq!(
            role.rules.unwrap_or_default(),
            permissions(config.strategies()).rules(),
            "{example}/role.yaml is stale: regenerate it with `cargo run --example {example} -- --print-rbac --namespace {example}`"
        );
        let configmap = read_yaml(&dir.join("configmap.yaml"))?;
        assert_eq!(
            configmap["data"]["config.yaml"].as_str(),
            Some(std::fs::read_to_string(config_path)?.as_str()),
            "{example}/configmap.yaml holds the example's config.yaml"
        );
        let deployment = read_yaml(&dir.join("deployment.yaml"))?;
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        for flag in [
            "--serve",
            "--config=/etc/concord/config.yaml",
            "--leader-elect",
        ] {
            assert!(
                args.as_array().unwrap().iter().any(|a| a == flag),
                "{example}: deployment passes {flag}"
            );
        }
    }
    let crd = read_yaml(&deploy_dir("crd-operator").join("crd.yaml"))?;
    assert_eq!(
        crd,
        serde_json::to_value(widgets::Widget::crd())?,
        "crd.yaml is stale: regenerate it with `cargo run --example crd-operator -- --print-crd`"
    );
    Ok(())
}
