//! The deploy objects of the example operators, as one
//! [`cargo_concord::deploy::Bundle`] each: `examples/deploy/<example>/` is
//! their kustomize base and `examples/deploy/<example>/chart/<example>/`
//! their Helm chart, both written by
//! `cargo run -p concord-examples --example deploy-manifests` and kept equal
//! to this code by `tests/tests/examples/manifests.rs`.

use std::path::{Path, PathBuf};

use cargo_concord::deploy::{Bundle, Webhook};
use concord::featuregates::StrategyTable;
use concord::{ManagerArgs, featuregates::FeatureRegistry, rbac::Permissions};

use crate::{argo, kueue, load_config, widgets, widgets_webhooks};

/// The examples that have deploy manifests, in the order they are listed.
pub const EXAMPLES: [&str; 3] = ["kueue-finalizer", "argo-cleanup", "crd-operator"];

/// Where the manifests of `example` live.
pub fn dir(example: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(example)
}

/// The Secret cert-manager writes the crd-operator's serving certificate to.
pub const WEBHOOK_SECRET: &str = "crd-operator-webhook-cert";
/// Where the crd-operator reads it (`--webhook-cert-dir`).
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// The crd-operator's self-signed cert-manager Issuer.
pub const ISSUER: &str = "crd-operator-selfsigned";

/// The deploy objects of `example`.
///
/// # Errors
///
/// When `example` is not one of [`EXAMPLES`], or its configuration,
/// CRD or webhooks cannot be built.
pub fn bundle(example: &str) -> anyhow::Result<Bundle> {
    type Permit = fn(&StrategyTable) -> Permissions<'_>;
    let (config_path, registry, permissions): (&str, FeatureRegistry, Permit) = match example {
        "kueue-finalizer" => (kueue::CONFIG, kueue::registry()?.0, kueue::permissions),
        "argo-cleanup" => (argo::CONFIG, FeatureRegistry::new(), argo::permissions),
        "crd-operator" => (
            widgets::CONFIG,
            FeatureRegistry::new(),
            widgets::permissions,
        ),
        other => anyhow::bail!("no deploy manifests for example {other:?}; known: {EXAMPLES:?}"),
    };
    let config = load_config(&ManagerArgs::new().with_config(config_path), registry)?;
    // Every example deploys into a namespace named after it.
    let namespace = example;
    // ANCHOR: bundle
    let mut bundle = Bundle::new(example, namespace)
        .with_generated_by("`cargo run -p concord-examples --example deploy-manifests`")
        .with_image(format!("registry.example.com/concord/{example}:0.1.0"))
        .with_label("app.kubernetes.io/part-of", "concord-examples")
        .with_arg("--serve")
        .with_config(std::fs::read_to_string(config_path)?)
        .with_rbac(permissions(config.strategies()).role(example, namespace))?;
    // ANCHOR_END: bundle
    if example == "crd-operator" {
        bundle = crd_operator(bundle)?;
    }
    Ok(bundle)
}

// ANCHOR: webhook
/// The crd-operator's CRD (with its conversion webhook), its validating and
/// defaulting webhooks behind a Service on port 443 served on the
/// container's port 9443, and cert-manager's Issuer and Certificate for
/// the Service's DNS names, written to the Secret the Deployment mounts.
fn crd_operator(bundle: Bundle) -> anyhow::Result<Bundle> {
    use widgets_webhooks::{CERTIFICATE, NAMESPACE, SERVICE};
    let client = widgets_webhooks::in_cluster_client();
    let webhooks = widgets_webhooks::webhooks();
    let webhook = Webhook::new(SERVICE, 443, 9443, WEBHOOK_SECRET, WEBHOOK_CERT_DIR)
        .with_configuration(webhooks.validating_configuration(&client))?
        .with_configuration(webhooks.mutating_configuration(&client))?;
    let labels = serde_json::json!({
        "app.kubernetes.io/name": "crd-operator",
        "app.kubernetes.io/part-of": "concord-examples",
    });
    let issuer = serde_json::json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": ISSUER, "namespace": NAMESPACE, "labels": labels},
        "spec": {"selfSigned": {}},
    });
    let certificate = serde_json::json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": CERTIFICATE, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "secretName": WEBHOOK_SECRET,
            "dnsNames": [
                format!("{SERVICE}.{NAMESPACE}.svc"),
                format!("{SERVICE}.{NAMESPACE}.svc.cluster.local"),
            ],
            "issuerRef": {"kind": "Issuer", "name": ISSUER},
        },
    });
    Ok(bundle
        .with_crd(widgets_webhooks::crd(&client)?)?
        .with_webhook(webhook)
        .with_object("issuer.yaml", issuer)?
        .with_object("certificate.yaml", certificate)?)
}
// ANCHOR_END: webhook
