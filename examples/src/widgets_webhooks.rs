//! The CRD operator's webhooks: a validator, a defaulter and the
//! `v1alpha1` ⇄ `v1` conversion, and the manifests that make the API
//! server call them (`examples/deploy/crd-operator/` is generated from
//! these functions; `tests/tests/examples/manifests.rs` keeps it so).

use concord::webhook::WebhookOptions;
use concord::webhook::{Conversion, Defaulter, Validator, Verdict, WebhookClient, Webhooks};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

use crate::widgets::Widget;
use crate::widgets_v1alpha1;

/// The namespace the deploy manifests install the operator into.
pub const NAMESPACE: &str = "crd-operator";
/// The Service in front of the webhook port.
pub const SERVICE: &str = "crd-operator-webhook";
/// The cert-manager `Certificate` whose Secret the Deployment mounts at
/// `--webhook-cert-dir`, and whose CA cert-manager injects.
pub const CERTIFICATE: &str = "crd-operator-serving-cert";
/// `metadata.name` of the generated webhook configurations.
pub const CONFIGURATION: &str = "crd-operator";
/// The most shards a Widget may ask for (`v1`'s schema says the same;
/// `v1alpha1`'s said nothing).
pub const MAX_SHARDS: i32 = 20;
/// What the defaulter puts in an empty `spec.message`.
pub const DEFAULT_MESSAGE: &str = "hello from concord";

// ANCHOR: validator
/// Bounds `spec.shards` whatever version the client wrote, and keeps
/// `spec.message` as it was created: the shards hold it, so a new message
/// is a new Widget.
#[derive(Debug, Default)]
pub struct WidgetValidator;

#[concord::async_trait]
impl Validator<Widget> for WidgetValidator {
    async fn validate_create(&self, widget: &Widget) -> Verdict {
        check_shards(widget)
    }

    async fn validate_update(&self, old: &Widget, new: &Widget) -> Verdict {
        if old.spec.message != new.spec.message {
            return Verdict::deny(format!(
                "spec.message is immutable (was `{}`): create a new Widget instead",
                old.spec.message
            ));
        }
        check_shards(new)
    }
}

fn check_shards(widget: &Widget) -> Verdict {
    match widget.spec.shards {
        0 => Verdict::allow().with_warning("spec.shards is 0: the message is kept nowhere"),
        n if !(0..=MAX_SHARDS).contains(&n) => Verdict::deny(format!(
            "spec.shards must be between 0 and {MAX_SHARDS}, got {n}"
        )),
        _ => Verdict::allow(),
    }
}

/// Fills an empty or missing `spec.message` (`v1alpha1` clients may leave
/// `text` out, `v1` clients `message`): the framework reads a field the
/// object leaves out as its zero value, `""` here.
#[derive(Debug, Default)]
pub struct WidgetDefaulter;

impl Defaulter<Widget> for WidgetDefaulter {
    fn default(&self, widget: &mut Widget) {
        if widget.spec.message.is_empty() {
            DEFAULT_MESSAGE.clone_into(&mut widget.spec.message);
        }
    }
}
// ANCHOR_END: validator

// ANCHOR: webhooks
/// Everything the operator serves: validation and defaulting of `v1`
/// Widgets (requests in `v1alpha1` are converted first: `matchPolicy:
/// Equivalent`), and the conversion with `v1` as the hub.
pub fn webhooks() -> Webhooks {
    Webhooks::new()
        .with_validator::<Widget, _>(WidgetValidator, WebhookOptions::new())
        .with_defaulter::<Widget, _>(WidgetDefaulter, WebhookOptions::new())
        .with_conversion(Conversion::<Widget>::new().with_spoke::<widgets_v1alpha1::Widget>())
}

/// How the API server reaches the webhooks in the deploy manifests: the
/// Service on port 443, trusted through the CA cert-manager injects from
/// the Certificate.
pub fn in_cluster_client() -> WebhookClient {
    WebhookClient::service(NAMESPACE, SERVICE, 443)
        .with_cert_manager_certificate(format!("{NAMESPACE}/{CERTIFICATE}"))
        .with_configuration_name(CONFIGURATION)
}

/// The Widget CRD with both versions (`v1` stored) and its `conversion`
/// stanza pointing at `client`.
///
/// # Errors
///
/// When the two versions do not merge, or no conversion is registered.
pub fn crd(client: &WebhookClient) -> anyhow::Result<CustomResourceDefinition> {
    let both = merge_crds(vec![widgets_v1alpha1::Widget::crd(), Widget::crd()], "v1")?;
    Ok(webhooks().with_crd_conversion(both, client)?)
}
// ANCHOR_END: webhooks
