//! [`Webhook`]: the webhook server an operator's deployment serves.

use serde_yaml::Value;

use super::yaml::to_value;
use crate::Error;

/// The webhook server of an operator: the Service the API server calls,
/// the port the container serves on, and the Secret holding its serving
/// certificate (made by cert-manager or by hand), mounted at
/// `--webhook-cert-dir`.
#[derive(Clone, Debug)]
#[must_use]
pub struct Webhook {
    pub(super) service: String,
    pub(super) port: i32,
    pub(super) container_port: i32,
    pub(super) cert_dir: String,
    pub(super) secret: String,
    pub(super) configurations: Vec<Value>,
}

impl Webhook {
    /// A webhook server behind the Service `service` on `port`, serving on
    /// `container_port`, its certificate from the Secret `secret` mounted
    /// at `cert_dir`.
    pub fn new(
        service: impl Into<String>,
        port: i32,
        container_port: i32,
        secret: impl Into<String>,
        cert_dir: impl Into<String>,
    ) -> Self {
        Webhook {
            service: service.into(),
            port,
            container_port,
            cert_dir: cert_dir.into(),
            secret: secret.into(),
            configurations: Vec::new(),
        }
    }

    /// Adds a ValidatingWebhookConfiguration or MutatingWebhookConfiguration
    /// (as `Webhooks::validating_configuration` renders it).
    ///
    /// # Errors
    ///
    /// [`Error::Serialize`] when it cannot be serialised.
    pub fn with_configuration(mut self, object: impl serde::Serialize) -> Result<Self, Error> {
        self.configurations
            .push(to_value(object, "a webhook configuration")?);
        Ok(self)
    }
}
