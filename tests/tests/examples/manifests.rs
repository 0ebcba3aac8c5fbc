//! The deployment manifests of the example operators (`examples/deploy/`):
//! the committed files are the ones `examples/src/deploy.rs` generates,
//! every object passes a server-side dry-run on the real control plane, the
//! Role, ConfigMap, CRD and webhook configurations match what the code and
//! the configuration say today, and the crd-operator's cert-manager
//! Certificate, Service and Deployment fit the names the webhook manifests
//! use.
//!
//! ```text
//! cargo test -p concord-tests --test examples manifests::
//! ```

use concord_tests::{DryRun, dry_run_manifest};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use concord::featuregates::StrategyTable;
use concord::{ManagerArgs, featuregates::FeatureRegistry, rbac::Permissions};
use concord_examples::{argo, kueue, load_config, widgets, widgets_webhooks};
use concord_testenv::TestEnv;
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::Deserialize as _;
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
    concord_examples::deploy::dir(name)
}

/// The objects of a file of one or more YAML documents.
fn documents(path: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = Value::deserialize(document).with_context(|| path.display().to_string())?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// The one object of `kind` in `file` (named `name` when given).
fn object(dir: &Path, file: &str, kind: &str, name: Option<&str>) -> Result<Value> {
    let mut found = documents(&dir.join(file))?
        .into_iter()
        .filter(|o| o["kind"] == kind && name.is_none_or(|n| o["metadata"]["name"] == n));
    let object = found
        .next()
        .with_context(|| format!("{file} has a {kind}"))?;
    anyhow::ensure!(found.next().is_none(), "{file} has one {kind}");
    Ok(object)
}

/// The manifests of `name` in the order of its kustomization.
fn manifests(name: &str) -> Result<Vec<(String, Value)>> {
    let dir = deploy_dir(name);
    let kustomization = object(&dir, "kustomization.yaml", "Kustomization", None)?;
    let files = kustomization["resources"].as_array().context("resources")?;
    let mut out = Vec::new();
    for file in files {
        let file = file.as_str().context("file name")?;
        for value in documents(&dir.join(file))? {
            out.push((file.to_owned(), value));
        }
    }
    Ok(out)
}

/// The files of a directory and its subdirectories, relative to it.
fn files_under(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files_under(root, &path, out)?;
        } else {
            let relative = path.strip_prefix(root)?.to_string_lossy().into_owned();
            out.insert(relative, std::fs::read_to_string(&path)?);
        }
    }
    Ok(())
}

#[test]
fn committed_manifests_are_the_generated_ones() -> Result<()> {
    for example in concord_examples::deploy::EXAMPLES {
        let dir = deploy_dir(example);
        let generated: BTreeMap<String, String> = concord_examples::deploy::bundle(example)?
            .files()?
            .into_iter()
            .collect();
        let mut committed = BTreeMap::new();
        files_under(&dir, &dir, &mut committed)?;
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            names(&committed),
            names(&generated),
            "examples/deploy/{example} holds exactly the generated files: {REGENERATE}"
        );
        for (file, text) in &generated {
            assert_eq!(
                &committed[file], text,
                "examples/deploy/{example}/{file} is stale: {REGENERATE}"
            );
        }
    }
    Ok(())
}

const REGENERATE: &str = "run `cargo run -p concord-examples --example deploy-manifests`";

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
    for (example, ..) in EXAMPLES {
        // Namespaced objects go to a fresh namespace: a dry-run does not
        // create the manifests' own Namespace.
        let ns = env.namespace().await?;
        let objects = manifests(example)?;
        assert!(
            objects.len() >= 6,
            "{example}: every manifest is listed in kustomization.yaml"
        );
        for (file, object) in objects {
            let DryRun {
                name,
                namespaced,
                api,
                ..
            } = dry_run_manifest(&client, ns.name(), "concord-examples-manifests", object)
                .await
                .with_context(|| format!("{example}/{file}"))?;
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
        let role: Role = serde_json::from_value(object(&dir, "rbac.yaml", "Role", None)?)?;
        assert_eq!(
            role.rules.unwrap_or_default(),
            permissions(config.strategies()).rules(),
            "{example}/rbac.yaml holds the Role `--print-rbac` prints"
        );
        let configmap = object(&dir, "configmap.yaml", "ConfigMap", None)?;
        assert_eq!(
            configmap["data"]["config.yaml"].as_str(),
            Some(std::fs::read_to_string(config_path)?.as_str()),
            "{example}/configmap.yaml holds the example's config.yaml"
        );
        let deployment = object(&dir, "deployment.yaml", "Deployment", None)?;
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
        object(&dir, "crds.yaml", "CustomResourceDefinition", None)?,
        serde_json::to_value(widgets_webhooks::crd(&in_cluster)?)?,
        "crds.yaml holds the Widget CRD of the Rust types"
    );
    let webhooks = widgets_webhooks::webhooks();
    assert_eq!(
        object(
            &dir,
            "webhooks.yaml",
            "ValidatingWebhookConfiguration",
            None
        )?,
        serde_json::to_value(webhooks.validating_configuration(&in_cluster))?,
    );
    assert_eq!(
        object(&dir, "webhooks.yaml", "MutatingWebhookConfiguration", None)?,
        serde_json::to_value(webhooks.mutating_configuration(&in_cluster))?,
    );
    Ok(())
}

/// The crd-operator's Service, Issuer, Certificate and Deployment use the
/// names its CRD and webhook configurations point at.
#[test]
fn crd_operator_certificate_service_and_deployment_fit_together() -> Result<()> {
    use widgets_webhooks::{CERTIFICATE, NAMESPACE, SERVICE};
    let dir = deploy_dir("crd-operator");
    let crd = object(&dir, "crds.yaml", "CustomResourceDefinition", None)?;
    let validating = object(
        &dir,
        "webhooks.yaml",
        "ValidatingWebhookConfiguration",
        None,
    )?;
    let mutating = object(&dir, "webhooks.yaml", "MutatingWebhookConfiguration", None)?;
    let certificate = object(&dir, "certificate.yaml", "Certificate", None)?;
    let issuer = object(&dir, "issuer.yaml", "Issuer", None)?;
    let service = object(&dir, "service.yaml", "Service", Some(SERVICE))?;
    let deployment = object(&dir, "deployment.yaml", "Deployment", None)?;

    // cert-manager injects the CA of this Certificate everywhere the API
    // server has to trust the webhook server.
    let inject = format!("{NAMESPACE}/{CERTIFICATE}");
    for (what, object) in [
        ("the CRD", &crd),
        ("the ValidatingWebhookConfiguration", &validating),
        ("the MutatingWebhookConfiguration", &mutating),
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
