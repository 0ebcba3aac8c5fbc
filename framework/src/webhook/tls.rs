//! Serving certificates from `--webhook-cert-dir`, reloaded when they change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::WebhookError;

/// The certificate file in the cert directory (controller-runtime's name).
pub const CERT_FILE: &str = "tls.crt";
/// The key file in the cert directory.
pub const KEY_FILE: &str = "tls.key";

/// Inode, modification time and length of both files (symlinks
/// followed): what "changed" means. The inode catches kubelet's atomic
/// swap of a Secret volume's `..data` symlink even when the new files have
/// the old ones' size and a coarse clock gives them the same time.
type Stamp = [(u64, Option<SystemTime>, u64); 2];

/// Hands every new TLS handshake the current certificate; a reload swaps it
/// for the next handshake while connections already open keep theirs, so no
/// request is dropped.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    dir: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    stamp: Mutex<Stamp>,
}

impl ReloadingCert {
    pub(crate) fn load(dir: &Path) -> Result<Self, WebhookError> {
        let stamp = stamp(dir);
        let key = load(dir)?;
        Ok(ReloadingCert {
            dir: dir.to_owned(),
            current: RwLock::new(Arc::new(key)),
            stamp: Mutex::new(stamp),
        })
    }

    /// Reloads if either file changed. A pair that does not load (a key
    /// written before its certificate, say) keeps the previous pair in
    /// service and is tried again at the next poll.
    pub(crate) fn poll(&self) -> Result<bool, WebhookError> {
        let now = stamp(&self.dir);
        {
            let seen = self.stamp.lock().unwrap_or_else(PoisonError::into_inner);
            if *seen == now {
                return Ok(false);
            }
        }
        let key = load(&self.dir)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
        *self.stamp.lock().unwrap_or_else(PoisonError::into_inner) = now;
        Ok(true)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

fn stamp(dir: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt as _;
    let one = |name| {
        std::fs::metadata(dir.join(name))
            .map(|m| (m.ino(), m.modified().ok(), m.len()))
            .unwrap_or((0, None, 0))
    };
    [one(CERT_FILE), one(KEY_FILE)]
}

fn load(dir: &Path) -> Result<CertifiedKey, WebhookError> {
    let cert_path = dir.join(CERT_FILE);
    let key_path = dir.join(KEY_FILE);
    let bad = |path: &Path, message: String| WebhookError::Certificate {
        path: path.display().to_string(),
        message,
    };
    let chain = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| bad(&cert_path, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(&cert_path, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad(&cert_path, "no certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| bad(&key_path, e.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider)
        .map_err(|e| bad(&key_path, format!("does not fit {CERT_FILE}: {e}")))
}

/// The server's TLS configuration: HTTP/1.1, certificates from `cert`.
pub(crate) fn server_config(
    cert: Arc<dyn ResolvesServerCert>,
) -> Result<rustls::ServerConfig, WebhookError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookError::Certificate {
            path: String::new(),
            message: e.to_string(),
        })?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
