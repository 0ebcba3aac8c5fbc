use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::Error;
use crate::webhook::WebhookError;
use crate::webhook::tls::{ReloadingCert, server_config};

/// The metrics endpoint's TLS: a certificate from `--metrics-cert-dir`,
/// re-read when it changes, or one self-signed at start.
pub(crate) struct MetricsTls {
    acceptor: TlsAcceptor,
    /// Polled for new files; `None` when self-signed.
    reloading: Option<Arc<ReloadingCert>>,
}

impl std::fmt::Debug for MetricsTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsTls")
            .field("from_dir", &self.reloading.is_some())
            .finish_non_exhaustive()
    }
}

impl MetricsTls {
    /// Loads `tls.crt` and `tls.key` from `dir`, or self-signs a
    /// certificate for `localhost` and `127.0.0.1` when `dir` is `None`.
    ///
    /// # Errors
    ///
    /// [`Error::MetricsCertificate`] naming the file at fault, or saying
    /// that no certificate could be made.
    pub(crate) fn load(dir: Option<&Path>) -> Result<Self, Error> {
        let bad = |error: WebhookError, dir: Option<&Path>| match error {
            WebhookError::Certificate { path, message } => Error::MetricsCertificate {
                path: if path.is_empty() {
                    dir.map(PathBuf::from).unwrap_or_default()
                } else {
                    PathBuf::from(path)
                },
                message,
            },
            other => Error::MetricsCertificate {
                path: dir.map(PathBuf::from).unwrap_or_default(),
                message: other.to_string(),
            },
        };
        match dir {
            Some(dir) => {
                let cert = Arc::new(ReloadingCert::load(dir).map_err(|e| bad(e, Some(dir)))?);
                let config = server_config(cert.clone()).map_err(|e| bad(e, Some(dir)))?;
                Ok(MetricsTls {
                    acceptor: TlsAcceptor::from(Arc::new(config)),
                    reloading: Some(cert),
                })
            }
            None => {
                let key = self_signed()?;
                let config =
                    server_config(Arc::new(Fixed(Arc::new(key)))).map_err(|e| bad(e, None))?;
                Ok(MetricsTls {
                    acceptor: TlsAcceptor::from(Arc::new(config)),
                    reloading: None,
                })
            }
        }
    }

    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// Re-reads the cert dir every `every` until dropped; a pair that does
    /// not load keeps the previous one in service.
    pub(crate) async fn reload(&self, every: Duration) {
        let Some(cert) = self.reloading.clone() else {
            return std::future::pending().await;
        };
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            match cert.poll() {
                Ok(true) => tracing::info!("metrics certificate reloaded"),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, "keeping the previous metrics certificate")
                }
            }
        }
    }
}

/// One certificate, for every handshake.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

fn self_signed() -> Result<CertifiedKey, Error> {
    let failed = |message: String| Error::MetricsCertificate {
        path: PathBuf::from("(self-signed)"),
        message: format!("cannot make a certificate: {message}"),
    };
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .map_err(|e| failed(e.to_string()))?;
    let chain = vec![CertificateDer::from(made.cert.der().to_vec())];
    let key = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| failed(e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_dir_the_certificate_is_self_signed() {
        assert!(MetricsTls::load(None).is_ok());
    }

    #[test]
    fn a_missing_cert_dir_names_the_file() {
        let dir = std::env::temp_dir().join("concord-no-such-metrics-certs");
        let error = MetricsTls::load(Some(&dir)).err().map(|e| e.to_string());
        let error = error.unwrap_or_default();
        assert!(
            error.starts_with(&format!(
                "metrics certificate {} (--metrics-cert-dir):",
                dir.join("tls.crt").display()
            )),
            "{error}"
        );
    }
}
