//! The configuration objects that tell the API server to call the webhooks.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1 as adm;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
use kube::api::ObjectMeta;

use super::registry::{Entry, WebhookKind};
use super::{WebhookError, Webhooks};

/// The annotation cert-manager's CA injector reads to fill `caBundle`.
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";

#[derive(Clone, Debug, PartialEq, Eq)]
enum Endpoint {
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
    Url(String),
}

/// How the API server reaches the webhook server, and how it trusts it.
///
/// ```
/// use concord::webhook::WebhookClient;
/// let client = WebhookClient::service("widgets-system", "widgets-webhook", 443)
///     .with_cert_manager_certificate("widgets-system/widgets-webhook")
///     .with_configuration_name("widgets");
/// # let _ = client;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct WebhookClient {
    endpoint: Endpoint,
    ca_bundle: Option<Vec<u8>>,
    inject_ca_from: Option<String>,
    configuration_name: String,
}

impl WebhookClient {
    /// Through a Service in the cluster (the usual deployment).
    pub fn service(namespace: impl Into<String>, name: impl Into<String>, port: i32) -> Self {
        WebhookClient {
            endpoint: Endpoint::Service {
                namespace: namespace.into(),
                name: name.into(),
                port,
            },
            ca_bundle: None,
            inject_ca_from: None,
            configuration_name: "concord-webhooks".into(),
        }
    }

    /// At a URL, `https://host:port` without a path (tests, or a webhook
    /// outside the cluster); each webhook's path is appended.
    pub fn url(base: impl Into<String>) -> Self {
        WebhookClient {
            endpoint: Endpoint::Url(base.into().trim_end_matches('/').to_owned()),
            ca_bundle: None,
            inject_ca_from: None,
            configuration_name: "concord-webhooks".into(),
        }
    }

    /// The PEM CA the API server verifies the serving certificate with.
    pub fn with_ca_bundle(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca_bundle = Some(pem.into());
        self
    }

    /// Lets cert-manager inject the CA of this `namespace/name` Certificate
    /// (the `cert-manager.io/inject-ca-from` annotation).
    pub fn with_cert_manager_certificate(mut self, certificate: impl Into<String>) -> Self {
        self.inject_ca_from = Some(certificate.into());
        self
    }

    /// `metadata.name` of the generated configurations (default `concord-webhooks`).
    pub fn with_configuration_name(mut self, name: impl Into<String>) -> Self {
        self.configuration_name = name.into();
        self
    }

    fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.configuration_name.clone()),
            annotations: self
                .inject_ca_from
                .as_ref()
                .map(|c| BTreeMap::from([(INJECT_CA_FROM.to_owned(), c.clone())])),
            ..ObjectMeta::default()
        }
    }

    fn admission(&self, path: &str) -> adm::WebhookClientConfig {
        let (service, url) = match &self.endpoint {
            Endpoint::Service {
                namespace,
                name,
                port,
            } => (
                Some(adm::ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    port: Some(*port),
                    path: Some(path.to_owned()),
                }),
                None,
            ),
            Endpoint::Url(base) => (None, Some(format!("{base}{path}"))),
        };
        adm::WebhookClientConfig {
            ca_bundle: self.ca_bundle.clone().map(ByteString),
            service,
            url,
        }
    }

    fn conversion(&self, path: &str) -> ext::WebhookClientConfig {
        let config = self.admission(path);
        ext::WebhookClientConfig {
            ca_bundle: config.ca_bundle,
            service: config.service.map(|s| ext::ServiceReference {
                namespace: s.namespace,
                name: s.name,
                port: s.port,
                path: s.path,
            }),
            url: config.url,
        }
    }
}

fn rules(entry: &Entry) -> Vec<adm::RuleWithOperations> {
    let mut operations = vec!["CREATE".to_owned(), "UPDATE".to_owned()];
    if entry.kind == WebhookKind::Validating && entry.options.delete {
        operations.push("DELETE".to_owned());
    }
    vec![adm::RuleWithOperations {
        api_groups: Some(vec![entry.target.group.clone()]),
        api_versions: Some(vec![entry.target.version.clone()]),
        resources: Some(vec![entry.target.plural.clone()]),
        operations: Some(operations),
        scope: Some("*".to_owned()),
    }]
}

impl Webhooks {
    /// The `ValidatingWebhookConfiguration` for every registered validator,
    /// or `None` when there is none. Each webhook carries its
    /// [`WebhookOptions`](super::WebhookOptions): `failurePolicy`,
    /// `timeoutSeconds`, the namespace selector; `sideEffects: None` and
    /// `matchPolicy: Equivalent` always.
    pub fn validating_configuration(
        &self,
        client: &WebhookClient,
    ) -> Option<adm::ValidatingWebhookConfiguration> {
        let webhooks: Vec<_> = self
            .entries
            .iter()
            .filter(|e| e.kind == WebhookKind::Validating)
            .map(|e| adm::ValidatingWebhook {
                name: e.name.clone(),
                admission_review_versions: vec!["v1".into()],
                client_config: client.admission(&e.path),
                failure_policy: Some(e.options.failure_policy.as_str().into()),
                match_policy: Some("Equivalent".into()),
                namespace_selector: e.options.namespace_selector.clone(),
                rules: Some(rules(e)),
                side_effects: "None".into(),
                timeout_seconds: Some(e.options.timeout_seconds()),
                ..adm::ValidatingWebhook::default()
            })
            .collect();
        (!webhooks.is_empty()).then(|| adm::ValidatingWebhookConfiguration {
            metadata: client.metadata(),
            webhooks: Some(webhooks),
        })
    }

    /// The `MutatingWebhookConfiguration` for every registered defaulter,
    /// or `None`. As the validating one, plus `reinvocationPolicy:
    /// IfNeeded`: defaults are filled again if a later mutating webhook
    /// changes the object.
    pub fn mutating_configuration(
        &self,
        client: &WebhookClient,
    ) -> Option<adm::MutatingWebhookConfiguration> {
        let webhooks: Vec<_> = self
            .entries
            .iter()
            .filter(|e| e.kind == WebhookKind::Mutating)
            .map(|e| adm::MutatingWebhook {
                name: e.name.clone(),
                admission_review_versions: vec!["v1".into()],
                client_config: client.admission(&e.path),
                failure_policy: Some(e.options.failure_policy.as_str().into()),
                match_policy: Some("Equivalent".into()),
                namespace_selector: e.options.namespace_selector.clone(),
                reinvocation_policy: Some("IfNeeded".into()),
                rules: Some(rules(e)),
                side_effects: "None".into(),
                timeout_seconds: Some(e.options.timeout_seconds()),
                ..adm::MutatingWebhook::default()
            })
            .collect();
        (!webhooks.is_empty()).then(|| adm::MutatingWebhookConfiguration {
            metadata: client.metadata(),
            webhooks: Some(webhooks),
        })
    }

    /// Sets the `conversion` stanza of `crd` to call the registered
    /// conversion for its group and kind, and the cert-manager annotation
    /// if `client` has one; rewrites its schemas with
    /// [`kubernetes_formats`](super::kubernetes_formats).
    ///
    /// # Errors
    ///
    /// [`WebhookError::Registration`] when no conversion is registered for
    /// the CRD's group and kind.
    pub fn with_crd_conversion(
        &self,
        crd: ext::CustomResourceDefinition,
        client: &WebhookClient,
    ) -> Result<ext::CustomResourceDefinition, WebhookError> {
        let (group, kind) = (&crd.spec.group, &crd.spec.names.kind);
        let entry = self
            .entries
            .iter()
            .find(|e| {
                e.kind == WebhookKind::Conversion
                    && &e.target.group == group
                    && &e.target.kind == kind
            })
            .ok_or_else(|| {
                WebhookError::Registration(vec![format!(
                    "no conversion registered for {kind}.{group}"
                )])
            })?;
        let mut crd = super::kubernetes_formats(crd);
        crd.spec.conversion = Some(ext::CustomResourceConversion {
            strategy: "Webhook".into(),
            webhook: Some(ext::WebhookConversion {
                client_config: Some(client.conversion(&entry.path)),
                conversion_review_versions: vec!["v1".into()],
            }),
        });
        if let Some(certificate) = &client.inject_ca_from {
            crd.metadata
                .annotations
                .get_or_insert_default()
                .insert(INJECT_CA_FROM.to_owned(), certificate.clone());
        }
        Ok(crd)
    }
}
