//! The builder's webhooks: what it is asked to serve, and the server (with
//! the rotator of its certificates, when the manager makes them) that
//! `build` binds.

use std::sync::Arc;

use kube::Client;

use super::ManagerBuilder;
use crate::Error;
use crate::http::parse_bind;
use crate::manager::connection::pod_namespace;
use crate::webhook::WebhookServer;
use crate::webhook::certs::CertRotator;
use crate::writes::WriteRegistry;

impl ManagerBuilder {
    /// Serves these webhooks over HTTPS on `--webhook-bind-address`, with
    /// the certificates in `--webhook-cert-dir`, on every replica (leader
    /// or not) until [`Manager::run`](crate::Manager::run) returns.
    pub fn with_webhooks(mut self, webhooks: crate::webhook::Webhooks) -> Self {
        self.webhooks = Some(webhooks);
        self
    }

    /// What bounds a client of the webhook server: its header and body read
    /// timeouts and its connection limit (defaults 10 s, 30 s, 256; see
    /// [`WebhookLimits`](crate::webhook::WebhookLimits) for the ranges
    /// accepted). Nothing is clamped: [`build`](Self::build) refuses a
    /// value out of range. Without webhooks to serve, the limits are unused.
    ///
    /// ```no_run
    /// # async fn demo(webhooks: concord::webhook::Webhooks) -> Result<(), concord::Error> {
    /// use std::time::Duration;
    /// use concord::Manager;
    /// use concord::webhook::WebhookLimits;
    /// let manager = Manager::builder("widgets")
    ///     .with_webhooks(webhooks)
    ///     .with_webhook_limits(
    ///         WebhookLimits::new()
    ///             .with_header_read_timeout(Duration::from_secs(2))
    ///             .with_max_connections(64),
    ///     )
    ///     .build()
    ///     .await?;
    /// # let _ = manager;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_webhook_limits(mut self, limits: crate::webhook::WebhookLimits) -> Self {
        self.webhook_limits = limits;
        self
    }

    /// Makes the webhook server's certificates instead of reading
    /// `--webhook-cert-dir`, as `--webhook-cert-managed` does (set here, it
    /// holds whatever [`with_args`](Self::with_args) says): a CA kept in a
    /// Secret of the manager's namespace, created if absent and shared by
    /// every replica; a serving certificate for the webhook Service signed
    /// by it, hot-swapped when renewed; the CA (with the one it replaced,
    /// while that one's certificates may be in service) written into the
    /// `caBundle` of the configurations and CRD conversions `webhooks`
    /// registers, and nowhere else. `/readyz` passes its `webhooks` check
    /// once that bundle is written.
    ///
    /// The writes go through the strategy table (operation `other`); the
    /// identity needs [`Permissions::managed_webhook_certificates`](crate::rbac::Permissions::managed_webhook_certificates).
    ///
    /// ```no_run
    /// # async fn demo(webhooks: concord::webhook::Webhooks) -> Result<(), concord::Error> {
    /// use concord::Manager;
    /// use concord::webhook::ManagedCertificates;
    /// let manager = Manager::builder("widgets")
    ///     .with_webhooks(webhooks)
    ///     .with_managed_webhook_certificates(ManagedCertificates::new("widgets-webhook"))
    ///     .build()
    ///     .await?;
    /// # let _ = manager;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_managed_webhook_certificates(
        mut self,
        certificates: crate::webhook::ManagedCertificates,
    ) -> Self {
        self.managed_certificates = Some(certificates);
        self
    }

    /// Binds the webhook server `build` starts, and starts the rotator of
    /// its certificates when the manager makes them: now, so that a bad
    /// certificate or setting fails the build. `(None, None)` when there
    /// is nothing to serve.
    pub(super) async fn bind_webhooks(
        &mut self,
        client: &Client,
        writes: &Arc<WriteRegistry>,
    ) -> Result<(Option<WebhookServer>, Option<CertRotator>), Error> {
        let managed = self.managed_certificates.take().or_else(|| {
            self.args
                .webhook_cert_managed
                .clone()
                .map(crate::webhook::ManagedCertificates::new)
        });
        let bound = match (
            self.webhooks.take(),
            parse_bind("--webhook-bind-address", &self.args.webhook_bind_address)?,
            managed,
        ) {
            (Some(webhooks), Some(at), Some(options)) if !webhooks.is_empty() => {
                let namespace = options.namespace.clone().unwrap_or_else(pod_namespace);
                let rotator = crate::webhook::certs::CertRotator::start(
                    &options,
                    &namespace,
                    &self.name,
                    client.clone(),
                    writes,
                    &webhooks,
                )
                .await?;
                let server = crate::webhook::WebhookServer::bind_with(
                    at,
                    rotator.certificate(),
                    None,
                    webhooks,
                )
                .await?
                .try_with_limits(self.webhook_limits)?;
                (Some(server), Some(rotator))
            }
            (_, _, Some(_)) => {
                return Err(
                    crate::webhook::WebhookError::ManagedCertificateSettings(vec![
                        "no webhook is served to make certificates for: register webhooks with \
                     with_webhooks and give a --webhook-bind-address other than 0"
                            .to_owned(),
                    ])
                    .into(),
                );
            }
            (Some(webhooks), Some(at), None) if !webhooks.is_empty() => (
                Some(
                    crate::webhook::WebhookServer::bind(at, &self.args.webhook_cert_dir, webhooks)
                        .await?
                        .try_with_limits(self.webhook_limits)?,
                ),
                None,
            ),
            _ => (None, None),
        };
        Ok(bound)
    }
}
