//! The deployment manifests of the example operators (`examples/deploy/`):
//! every object passes a server-side dry-run on the real control plane, and
//! the generated parts (Role, ConfigMap, CRD, webhook configurations) match
//! what the code and the configuration say today; the crd-operator's
//! cert-manager Certificate, Service and Deployment fit the names the
//! generated webhook manifests use.
//!
//! ```text
//! cargo test -p concord-tests --test examples_manifests
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use concord::featuregates::StrategyTable;
use concord::{FeatureRegistry, ManagerArgs, Permissions};
use concord_examples::{argo, kueue, load_config, widgets, widgets_webhooks};
use concord_testenv::TestEnv;
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
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
        "Service" => ("services", true),
        "ValidatingWebhookConfiguration" => ("validatingwebhookconfigurations", false),
        "MutatingWebhookConfiguration" => ("mutatingwebhookconfigurations", false),
        "Issuer" => ("issuers", true),
        "Certificate" => ("certificates", true),
        other => anyhow::bail!("no plural known for kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Ok((ApiResource::from_gvk_with_plural(&gvk, plural), namespaced))
}

/// A STAND-IN for cert-manager's `<plural>.cert-manager.io` CRD, written
/// for this test (the test control plane has no cert-manager): it accepts
/// any `spec`, so the dry-run below only checks the object's apiVersion,
/// kind, name and namespace. What the crd-operator's Certificate says is
/// checked against the other manifests in
/// `crd_operator_certificate_service_and_deployment_fit_together`.
fn cert_manager_stand_in(kind: &str, plural: &str) -> Result<CustomResourceDefinition> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.cert-manager.io")},
        "spec": {
            "group": "cert-manager.io",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {"spec": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": true
                    }}
                }}
            }]
        }
    }))?)
}

#[tokio::test]
async fn every_manifest_passes_a_server_side_dry_run() -> Result<()> {
    let env = TestEnv::shared()?;
    let client = env.client()?;
    // The crd-operator ships a cert-manager Issuer and Certificate.
    env.install_crd(cert_manager_stand_in("Issuer", "issuers")?)
        .await?;
    env.install_crd(cert_manager_stand_in("Certificate", "certificates")?)
        .await?;
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
    let dir = deploy_dir("crd-operator");
    let in_cluster = widgets_webhooks::in_cluster_client();
    assert_eq!(
        read_yaml(&dir.join("crd.yaml"))?,
        serde_json::to_value(widgets_webhooks::crd(&in_cluster)?)?,
        "crd.yaml is stale: regenerate it with `cargo run --example crd-operator -- --print-crd`"
    );
    let webhooks = widgets_webhooks::webhooks();
    let stale =
        "is stale: regenerate it with `cargo run --example crd-operator -- --print-webhooks`";
    assert_eq!(
        read_yaml(&dir.join("validatingwebhookconfiguration.yaml"))?,
        serde_json::to_value(webhooks.validating_configuration(&in_cluster))?,
        "validatingwebhookconfiguration.yaml {stale}"
    );
    assert_eq!(
        read_yaml(&dir.join("mutatingwebhookconfiguration.yaml"))?,
        serde_json::to_value(webhooks.mutating_configuration(&in_cluster))?,
        "mutatingwebhookconfiguration.yaml {stale}"
    );
    Ok(())
}

/// The hand-written crd-operator manifests (Service, Issuer, Certificate,
/// Deployment) use the names the generated ones point at.
#[test]
fn crd_operator_certificate_service_and_deployment_fit_together() -> Result<()> {
    use widgets_webhooks::{CERTIFICATE, NAMESPACE, SERVICE};
    let dir = deploy_dir("crd-operator");
    let crd = read_yaml(&dir.join("crd.yaml"))?;
    let validating = read_yaml(&dir.join("validatingwebhookconfiguration.yaml"))?;
    let mutating = read_yaml(&dir.join("mutatingwebhookconfiguration.yaml"))?;
    let certificate = read_yaml(&dir.join("certificate.yaml"))?;
    let issuer = read_yaml(&dir.join("issuer.yaml"))?;
    let service = read_yaml(&dir.join("service.yaml"))?;
    let deployment = read_yaml(&dir.join("deployment.yaml"))?;

    // cert-manager injects the CA of this Certificate everywhere the API
    // server has to trust the webhook server.
    let inject = format!("{NAMESPACE}/{CERTIFICATE}");
    for (what, object) in [
        ("crd.yaml", &crd),
        ("validatingwebhookconfiguration.yaml", &validating),
        ("mutatingwebhookconfiguration.yaml", &mutating),
    ] {
        assert_eq!(
            object["metadata"]["annotations"][concord::webhook::INJECT_CA_FROM],
            inject.as_str(),
            "{what}"
        );
    }
    assert_eq!(certificate["kind"], "Certificate");
    assert_eq!(certificate["metadata"]["name"], CERTIFICATE);
    assert_eq!(certificate["metadata"]["namespace"], NAMESPACE);
    assert_eq!(issuer["kind"], "Issuer");
    assert_eq!(
        certificate["spec"]["issuerRef"]["name"],
        issuer["metadata"]["name"]
    );
    assert_eq!(certificate["spec"]["issuerRef"]["kind"], "Issuer");
    assert_eq!(issuer["metadata"]["namespace"], NAMESPACE);
    let dns = certificate["spec"]["dnsNames"]
        .as_array()
        .context("dnsNames")?;
    assert!(
        dns.iter()
            .any(|n| n == &format!("{SERVICE}.{NAMESPACE}.svc")),
        "the certificate names the Service: {dns:?}"
    );

    // Every generated webhook goes to the Service, which reaches the
    // container's webhook port.
    let mut references = vec![&crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]];
    for config in [&validating, &mutating] {
        for webhook in config["webhooks"].as_array().context("webhooks")? {
            references.push(&webhook["clientConfig"]["service"]);
        }
    }
    assert_eq!(references.len(), 3, "conversion, validation, defaulting");
    for reference in references {
        assert_eq!(reference["name"], SERVICE);
        assert_eq!(reference["namespace"], NAMESPACE);
        assert_eq!(reference["port"], service["spec"]["ports"][0]["port"]);
    }
    assert_eq!(service["metadata"]["name"], SERVICE);
    assert_eq!(service["metadata"]["namespace"], NAMESPACE);
    let pod = &deployment["spec"]["template"];
    for (key, value) in service["spec"]["selector"]
        .as_object()
        .context("selector")?
    {
        assert_eq!(&pod["metadata"]["labels"][key], value, "selector {key}");
    }
    let container = &pod["spec"]["containers"][0];
    let port_name = service["spec"]["ports"][0]["targetPort"].clone();
    let port = container["ports"]
        .as_array()
        .context("ports")?
        .iter()
        .find(|p| p["name"] == port_name)
        .context("the Service's targetPort is a named container port")?;
    let args: Vec<&str> = container["args"]
        .as_array()
        .context("args")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.contains(&format!("--webhook-bind-address=:{}", port["containerPort"]).as_str()),
        "{args:?}"
    );

    // The Certificate's Secret is mounted where --webhook-cert-dir points.
    let cert_dir = args
        .iter()
        .find_map(|a| a.strip_prefix("--webhook-cert-dir="))
        .context("--webhook-cert-dir")?;
    let volume = pod["spec"]["volumes"]
        .as_array()
        .context("volumes")?
        .iter()
        .find(|v| v["secret"]["secretName"] == certificate["spec"]["secretName"])
        .context("a volume of the Certificate's Secret")?;
    let mounted = container["volumeMounts"]
        .as_array()
        .context("volumeMounts")?
        .iter()
        .find(|m| m["name"] == volume["name"])
        .context("the Secret volume is mounted")?;
    assert_eq!(mounted["mountPath"], cert_dir);
    Ok(())
}
