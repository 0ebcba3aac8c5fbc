//! Renewing the CA and the serving certificate, and handing the new one
//! to the next TLS handshake.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::Api;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::authority::{StoredCa, now};
use super::inject::Owned;
use super::managed::ManagedCertificates;
use super::secret::CaSecret;
use crate::webhook::{WebhookError, Webhooks};
use crate::writes::WriteRegistry;

/// The serving certificate every new handshake gets; a renewal swaps it
/// for the next handshake while open connections keep theirs.
#[derive(Debug)]
pub(crate) struct SwappableCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl SwappableCert {
    fn swap(&self, key: Arc<CertifiedKey>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = key;
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// Keeps the CA Secret, the owned objects' `caBundle` and the serving
/// certificate current.
#[derive(Debug)]
pub(crate) struct CertRotator {
    secret: CaSecret,
    owned: Owned,
    names: Vec<String>,
    lifetime: Duration,
    every: Duration,
    cert: Arc<SwappableCert>,
    /// The CA that signed the certificate in service, and when that
    /// certificate is due for renewal.
    signer: String,
    renew_at: Instant,
    /// A CA whose bundle was written on an earlier pass: once the API
    /// server has had a pass to see it, certificates it signs are trusted.
    trusted: Option<String>,
}

impl CertRotator {
    /// Reads (or creates) the CA Secret in `namespace` and signs this
    /// replica's first serving certificate.
    ///
    /// # Errors
    ///
    /// [`WebhookError::ManagedCertificateSettings`] listing every problem
    /// with `options`; [`WebhookError::ManagedCertificate`] naming the
    /// Secret when it cannot be read, created or used.
    pub(crate) async fn start(
        options: &ManagedCertificates,
        namespace: &str,
        owner: &str,
        client: Client,
        writes: &WriteRegistry,
        webhooks: &Webhooks,
    ) -> Result<Self, WebhookError> {
        options.check()?;
        let secret = CaSecret {
            api: Api::namespaced(client.clone(), namespace),
            writer: writes.writer(&()),
            namespace: namespace.to_owned(),
            name: options.secret_name(),
            owner: owner.to_owned(),
            lifetime: options.ca_lifetime,
        };
        let ca = secret.ensure().await?;
        let names = options.serving_names(namespace);
        let lifetime = options.serving_lifetime;
        let key = issue(&secret, &ca, &names, lifetime)?;
        Ok(CertRotator {
            owned: Owned::new(client, writes, webhooks, &options.configuration_name),
            secret,
            names,
            lifetime,
            every: options.check_every(),
            cert: Arc::new(SwappableCert {
                current: RwLock::new(key),
            }),
            signer: ca.cert_pem,
            renew_at: Instant::now() + lifetime.mul_f64(2.0 / 3.0),
            trusted: None,
        })
    }

    /// What the webhook server's TLS acceptor asks for each handshake.
    pub(crate) fn certificate(&self) -> Arc<SwappableCert> {
        self.cert.clone()
    }

    /// Renews what is due, for as long as the task runs, and sets
    /// `trusted` once the CA is in every owned object's `caBundle` (the
    /// API server can trust the certificate in service). A pass that fails
    /// keeps what is in service and is tried again at the next.
    pub(crate) async fn run(mut self, trusted: Arc<AtomicBool>) {
        loop {
            match self.pass().await {
                Ok(()) => trusted.store(true, Ordering::Release),
                Err(error) => {
                    tracing::warn!(%error, "keeping the webhook certificate in service")
                }
            }
            tokio::time::sleep(self.every).await;
        }
    }

    async fn pass(&mut self) -> Result<(), WebhookError> {
        let ca = self.secret.renew_if_due().await?;
        let bundle = ca.bundle(now());
        let written = self.owned.inject(&bundle).await?;
        if written > 0 {
            tracing::info!(objects = written, "webhook caBundle written");
        }
        if ca.cert_pem != self.signer {
            if self.trusted.as_deref() != Some(ca.cert_pem.as_str()) {
                self.trusted = Some(ca.cert_pem);
                return Ok(());
            }
        } else if Instant::now() < self.renew_at {
            return Ok(());
        }
        self.cert
            .swap(issue(&self.secret, &ca, &self.names, self.lifetime)?);
        self.renew_at = Instant::now() + self.lifetime.mul_f64(2.0 / 3.0);
        self.signer = ca.cert_pem;
        tracing::info!("webhook serving certificate renewed");
        Ok(())
    }
}

fn issue(
    secret: &CaSecret,
    ca: &StoredCa,
    names: &[String],
    lifetime: Duration,
) -> Result<Arc<CertifiedKey>, WebhookError> {
    ca.issue(names, now(), lifetime)
        .map_err(|message| WebhookError::ManagedCertificate {
            object: format!("Secret {}/{}", secret.namespace, secret.name),
            message: format!("cannot sign a serving certificate: {message}"),
        })
}
