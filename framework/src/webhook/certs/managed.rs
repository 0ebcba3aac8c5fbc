//! How the manager makes and renews its own webhook certificates
//! ([`ManagedCertificates`]).

use std::net::IpAddr;
use std::time::Duration;

use crate::webhook::WebhookError;

/// How the manager makes and renews its own webhook certificates
/// ([`ManagerBuilder::with_managed_webhook_certificates`](crate::manager::ManagerBuilder::with_managed_webhook_certificates),
/// `--webhook-cert-managed`).
///
/// | setting | default |
/// | --- | --- |
/// | namespace of the Service and the CA Secret | the pod's namespace (`POD_NAMESPACE`, the service account's, else `default`) |
/// | CA Secret | `<service>-ca` |
/// | configurations whose `caBundle` is written | `concord-webhooks` (as [`WebhookClient`](crate::webhook::WebhookClient)) |
/// | names in the serving certificate | `<service>.<ns>.svc`, `<service>.<ns>.svc.cluster.local`, plus [`with_names`](Self::with_names) |
/// | CA lifetime | 365 days, renewed after two thirds |
/// | serving certificate lifetime | 30 days, renewed after two thirds |
///
/// ```
/// use std::time::Duration;
/// use concord::webhook::ManagedCertificates;
/// let certs = ManagedCertificates::new("widgets-webhook")
///     .with_namespace("widgets-system")
///     .with_configuration_name("widgets")
///     .with_lifetimes(Duration::from_secs(365 * 86_400), Duration::from_secs(30 * 86_400));
/// # let _ = certs;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct ManagedCertificates {
    pub(crate) service: String,
    pub(crate) namespace: Option<String>,
    pub(crate) secret: Option<String>,
    pub(crate) configuration_name: String,
    pub(crate) names: Vec<String>,
    pub(crate) ca_lifetime: Duration,
    pub(crate) serving_lifetime: Duration,
}

impl ManagedCertificates {
    /// Certificates for the webhook Service `service`.
    pub fn new(service: impl Into<String>) -> Self {
        ManagedCertificates {
            service: service.into(),
            namespace: None,
            secret: None,
            configuration_name: "concord-webhooks".into(),
            names: Vec::new(),
            ca_lifetime: Duration::from_secs(365 * 86_400),
            serving_lifetime: Duration::from_secs(30 * 86_400),
        }
    }

    /// The namespace of the Service and of the CA Secret.
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The name of the Secret holding the CA.
    pub fn with_secret_name(mut self, name: impl Into<String>) -> Self {
        self.secret = Some(name.into());
        self
    }

    /// `metadata.name` of the validating and mutating configurations whose
    /// `caBundle` is written (the name given to
    /// [`WebhookClient::with_configuration_name`](crate::webhook::WebhookClient::with_configuration_name)).
    pub fn with_configuration_name(mut self, name: impl Into<String>) -> Self {
        self.configuration_name = name.into();
        self
    }

    /// More DNS names or IP addresses the serving certificate is valid for
    /// (`127.0.0.1` for a webhook reached by URL on the same machine).
    pub fn with_names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.names.extend(names.into_iter().map(Into::into));
        self
    }

    /// How long the CA and each serving certificate are valid; each is
    /// renewed after two thirds of its lifetime. The CA must live at least
    /// three serving lifetimes, so that a certificate signed just before
    /// the CA is renewed expires before the CA does.
    pub fn with_lifetimes(mut self, ca: Duration, serving: Duration) -> Self {
        self.ca_lifetime = ca;
        self.serving_lifetime = serving;
        self
    }

    /// Every problem with the settings, at once.
    pub(crate) fn check(&self) -> Result<(), WebhookError> {
        let mut problems = Vec::new();
        if self.service.is_empty() {
            problems.push("the Service name is empty".to_owned());
        }
        if self.serving_lifetime < Duration::from_secs(3) {
            problems.push(format!(
                "the serving lifetime ({} s) is under 3 s",
                self.serving_lifetime.as_secs_f64()
            ));
        }
        if self.ca_lifetime < self.serving_lifetime.saturating_mul(3) {
            problems.push(format!(
                "the CA lifetime ({} s) is under three serving lifetimes ({} s)",
                self.ca_lifetime.as_secs(),
                self.serving_lifetime.saturating_mul(3).as_secs()
            ));
        }
        for name in &self.names {
            if name.parse::<IpAddr>().is_err() && !is_dns_name(name) {
                problems.push(format!("`{name}` is neither an IP address nor a DNS name"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(WebhookError::ManagedCertificateSettings(problems))
        }
    }

    /// The names in the serving certificate, in `namespace`.
    pub(crate) fn serving_names(&self, namespace: &str) -> Vec<String> {
        let mut names = vec![
            format!("{}.{namespace}.svc", self.service),
            format!("{}.{namespace}.svc.cluster.local", self.service),
        ];
        names.extend(self.names.iter().cloned());
        names
    }

    /// The CA Secret's name.
    pub(crate) fn secret_name(&self) -> String {
        self.secret
            .clone()
            .unwrap_or_else(|| format!("{}-ca", self.service))
    }

    /// How often the rotation loop looks: a tenth of the serving lifetime,
    /// at most a minute.
    pub(crate) fn check_every(&self) -> Duration {
        (self.serving_lifetime / 10).clamp(Duration::from_millis(100), Duration::from_secs(60))
    }
}

/// A DNS name a certificate may carry: dot-separated labels of letters,
/// digits and inner hyphens, the first label possibly `*`.
fn is_dns_name(name: &str) -> bool {
    let name = name.strip_prefix("*.").unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_report_every_problem_at_once() {
        let bad = ManagedCertificates::new("")
            .with_names([
                "127.0.0.1",
                "widgets.demo.svc",
                "*.demo.svc",
                "not a name!",
                "-x.svc",
            ])
            .with_lifetimes(Duration::from_secs(10), Duration::from_secs(2));
        let Err(WebhookError::ManagedCertificateSettings(problems)) = bad.check() else {
            panic!("settings with problems were accepted");
        };
        assert_eq!(
            problems,
            [
                "the Service name is empty",
                "the serving lifetime (2 s) is under 3 s",
                "`not a name!` is neither an IP address nor a DNS name",
                "`-x.svc` is neither an IP address nor a DNS name",
            ]
        );
        let short_ca = ManagedCertificates::new("w")
            .with_lifetimes(Duration::from_secs(17), Duration::from_secs(6));
        let Err(WebhookError::ManagedCertificateSettings(problems)) = short_ca.check() else {
            panic!("a CA shorter than three serving lifetimes was accepted");
        };
        assert_eq!(
            problems,
            ["the CA lifetime (17 s) is under three serving lifetimes (18 s)"]
        );
        assert!(ManagedCertificates::new("w").check().is_ok());
    }

    #[test]
    fn defaults_name_the_service_in_its_namespace() {
        let certs = ManagedCertificates::new("widgets-webhook").with_names(["127.0.0.1"]);
        assert_eq!(
            certs.serving_names("widgets-system"),
            [
                "widgets-webhook.widgets-system.svc",
                "widgets-webhook.widgets-system.svc.cluster.local",
                "127.0.0.1"
            ]
        );
        assert_eq!(certs.secret_name(), "widgets-webhook-ca");
    }
}
