//! The `caBundle` writes: only to the objects the manager's own webhook
//! registry names, and only to its webhooks in them, through the strategy
//! table (operation `other`) like every other write of the manager.

use concord_strategies::Mutation;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;

use crate::webhook::registry::WebhookKind;
use crate::webhook::{WebhookError, Webhooks};
use crate::writes::ResourceWriter;
use crate::writes::WriteRegistry;

/// The objects whose `caBundle` the manager keeps, and their writers.
#[derive(Clone)]
pub(crate) struct Owned {
    client: Client,
    configuration: String,
    validating: Vec<String>,
    mutating: Vec<String>,
    crds: Vec<String>,
    validating_writer: ResourceWriter<ValidatingWebhookConfiguration>,
    mutating_writer: ResourceWriter<MutatingWebhookConfiguration>,
    crd_writer: ResourceWriter<CustomResourceDefinition>,
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owned")
            .field("configuration", &self.configuration)
            .field("validating", &self.validating)
            .field("mutating", &self.mutating)
            .field("crds", &self.crds)
            .finish_non_exhaustive()
    }
}

fn names_of(webhooks: &Webhooks, kind: WebhookKind) -> Vec<String> {
    webhooks
        .entries
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.name.clone())
        .collect()
}

fn missing(object: String, message: impl Into<String>) -> WebhookError {
    WebhookError::ManagedCertificate {
        object,
        message: message.into(),
    }
}

impl Owned {
    /// What `webhooks` registers: the configuration named `configuration`
    /// for validators and defaulters, `<plural>.<group>` for conversions.
    pub(crate) fn new(
        client: Client,
        writes: &WriteRegistry,
        webhooks: &Webhooks,
        configuration: &str,
    ) -> Self {
        Owned {
            client,
            configuration: configuration.to_owned(),
            validating: names_of(webhooks, WebhookKind::Validating),
            mutating: names_of(webhooks, WebhookKind::Mutating),
            crds: webhooks
                .entries
                .iter()
                .filter(|e| e.kind == WebhookKind::Conversion)
                .map(|e| format!("{}.{}", e.target.plural, e.target.group))
                .collect(),
            validating_writer: writes.writer(&()),
            mutating_writer: writes.writer(&()),
            crd_writer: writes.writer(&()),
        }
    }

    /// Writes `bundle` wherever it is not already; returns how many
    /// objects were written.
    ///
    /// # Errors
    ///
    /// [`WebhookError::ManagedCertificate`] naming an owned object that is
    /// missing, lacks one of the manager's webhooks (or, for a CRD, a
    /// webhook conversion), or could not be written.
    pub(crate) async fn inject(&self, bundle: &[u8]) -> Result<usize, WebhookError> {
        let mut written = 0;
        written += self
            .configuration(&self.validating, &self.validating_writer, bundle)
            .await?;
        written += self
            .configuration(&self.mutating, &self.mutating_writer, bundle)
            .await?;
        let api = Api::<CustomResourceDefinition>::all(self.client.clone());
        for name in &self.crds {
            let object = format!("CustomResourceDefinition {name}");
            let current = api
                .get_opt(name)
                .await
                .map_err(|e| missing(object.clone(), format!("cannot be read: {e}")))?
                .ok_or_else(|| missing(object.clone(), "does not exist"))?;
            let stored = current
                .spec
                .conversion
                .as_ref()
                .filter(|c| c.strategy == "Webhook")
                .and_then(|c| c.webhook.as_ref())
                .and_then(|w| w.client_config.as_ref())
                .ok_or_else(|| {
                    missing(
                        object.clone(),
                        "has no webhook conversion to trust the CA for (set it with Webhooks::with_crd_conversion)",
                    )
                })?;
            if stored.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(bundle) {
                continue;
            }
            let pem = ByteString(bundle.to_vec());
            let set = Mutation::typed(move |crd: &mut CustomResourceDefinition| {
                if let Some(config) = crd
                    .spec
                    .conversion
                    .as_mut()
                    .and_then(|c| c.webhook.as_mut())
                    .and_then(|w| w.client_config.as_mut())
                {
                    config.ca_bundle = Some(pem.clone());
                }
            });
            self.crd_writer
                .write(&current, &set)
                .await
                .map_err(|e| missing(object, format!("caBundle not written: {e}")))?;
            written += 1;
        }
        Ok(written)
    }
}

impl Owned {
    /// Writes `bundle` into the webhooks named `ours` of the manager's
    /// configuration of type `C` (none when `ours` is empty); 1 when it
    /// wrote, 0 when every one of them held it already.
    async fn configuration<C: Configuration>(
        &self,
        ours: &[String],
        writer: &ResourceWriter<C>,
        bundle: &[u8],
    ) -> Result<usize, WebhookError> {
        if ours.is_empty() {
            return Ok(0);
        }
        let api = Api::<C>::all(self.client.clone());
        let object = format!("{} {}", C::KIND, self.configuration);
        let current = api
            .get_opt(&self.configuration)
            .await
            .map_err(|e| missing(object.clone(), format!("cannot be read: {e}")))?
            .ok_or_else(|| missing(object.clone(), "does not exist"))?;
        if !needs(&object, ours, &current.bundles(), bundle)? {
            return Ok(0);
        }
        let (names, pem) = (ours.to_vec(), ByteString(bundle.to_vec()));
        let set = Mutation::typed(move |c: &mut C| c.set_bundle(&names, &pem));
        writer
            .write(&current, &set)
            .await
            .map_err(|e| missing(object, format!("caBundle not written: {e}")))?;
        Ok(1)
    }
}

/// A webhook configuration whose webhooks carry a `caBundle`.
trait Configuration: crate::Object {
    const KIND: &'static str;
    /// Each webhook's name and stored bundle.
    fn bundles(&self) -> Vec<(String, Option<ByteString>)>;
    /// Sets `pem` as the bundle of the webhooks named in `names`.
    fn set_bundle(&mut self, names: &[String], pem: &ByteString);
}

impl Configuration for ValidatingWebhookConfiguration {
    const KIND: &'static str = "ValidatingWebhookConfiguration";
    fn bundles(&self) -> Vec<(String, Option<ByteString>)> {
        let hooks = self.webhooks.iter().flatten();
        hooks
            .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
            .collect()
    }
    fn set_bundle(&mut self, names: &[String], pem: &ByteString) {
        let hooks = self.webhooks.iter_mut().flatten();
        for w in hooks.filter(|w| names.contains(&w.name)) {
            w.client_config.ca_bundle = Some(pem.clone());
        }
    }
}

impl Configuration for MutatingWebhookConfiguration {
    const KIND: &'static str = "MutatingWebhookConfiguration";
    fn bundles(&self) -> Vec<(String, Option<ByteString>)> {
        let hooks = self.webhooks.iter().flatten();
        hooks
            .map(|w| (w.name.clone(), w.client_config.ca_bundle.clone()))
            .collect()
    }
    fn set_bundle(&mut self, names: &[String], pem: &ByteString) {
        let hooks = self.webhooks.iter_mut().flatten();
        for w in hooks.filter(|w| names.contains(&w.name)) {
            w.client_config.ca_bundle = Some(pem.clone());
        }
    }
}

/// Whether any of `ours` lacks `bundle`; an error when one of them is not
/// in the object at all.
fn needs(
    object: &str,
    ours: &[String],
    stored: &[(String, Option<ByteString>)],
    bundle: &[u8],
) -> Result<bool, WebhookError> {
    let mut absent = Vec::new();
    let mut stale = false;
    for name in ours {
        match stored.iter().find(|(n, _)| n == name) {
            None => absent.push(name.as_str()),
            Some((_, have)) => stale |= have.as_ref().map(|b| b.0.as_slice()) != Some(bundle),
        }
    }
    if absent.is_empty() {
        Ok(stale)
    } else {
        Err(missing(
            object.to_owned(),
            format!("has no webhook named {}", absent.join(", ")),
        ))
    }
}
