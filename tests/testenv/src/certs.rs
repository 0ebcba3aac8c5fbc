//! A throw-away certificate authority for webhook tests: the API server
//! trusts it through a webhook configuration's `caBundle`, the webhook
//! server presents a serving certificate it signed.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Why a test certificate could not be made or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
    /// Generating a key or signing a certificate failed.
    #[error("generating a test certificate failed")]
    Generate(#[source] rcgen::Error),
    /// Writing `tls.crt` or `tls.key` failed.
    #[error("writing {path} failed")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A certificate authority that lives as long as the test.
///
/// ```no_run
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ca = concord_testenv::TestCa::new()?;
/// let serving = ca.serving_cert(&["127.0.0.1", "localhost"])?;
/// serving.write_to(std::path::Path::new("/tmp/certs"))?; // tls.crt and tls.key
/// let ca_bundle: Vec<u8> = ca.pem().as_bytes().to_vec(); // for the webhook configuration
/// # Ok(()) }
/// ```
pub struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A serving certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct ServingCert {
    /// The certificate, PEM (`tls.crt`).
    pub cert_pem: String,
    /// The private key, PKCS#8 PEM (`tls.key`).
    pub key_pem: String,
}

impl TestCa {
    /// A new CA with a fresh ECDSA P-256 key.
    ///
    /// # Errors
    ///
    /// [`CertError::Generate`] when key generation or signing fails.
    pub fn new() -> Result<Self, CertError> {
        let key = KeyPair::generate().map_err(CertError::Generate)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "concord test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).map_err(CertError::Generate)?;
        Ok(TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM: what a webhook configuration's `caBundle` holds.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A serving certificate for these DNS names or IP addresses, signed by
    /// this CA.
    ///
    /// # Errors
    ///
    /// [`CertError::Generate`] when a name is invalid or signing fails.
    pub fn serving_cert(&self, names: &[&str]) -> Result<ServingCert, CertError> {
        let key = KeyPair::generate().map_err(CertError::Generate)?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names.clone()).map_err(CertError::Generate)?;
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(CertError::Generate)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

impl ServingCert {
    /// Writes `tls.crt` and `tls.key` into `dir` (created if missing), the
    /// layout `--webhook-cert-dir` expects. The key is written first and
    /// both files are replaced by rename, so a server watching the directory
    /// never reads a half-written pair.
    ///
    /// # Errors
    ///
    /// [`CertError::Write`] naming the file that could not be written.
    pub fn write_to(&self, dir: &Path) -> Result<(), CertError> {
        let write = |name: &str, contents: &str| {
            let path = dir.join(name);
            let fail = |source| CertError::Write {
                path: path.display().to_string(),
                source,
            };
            std::fs::create_dir_all(dir).map_err(fail)?;
            let staging = dir.join(format!(".{name}.tmp"));
            std::fs::write(&staging, contents).map_err(fail)?;
            std::fs::rename(&staging, &path).map_err(fail)
        };
        write("tls.key", &self.key_pem)?;
        write("tls.crt", &self.cert_pem)
    }
}
