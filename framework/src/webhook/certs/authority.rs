//! The CA kept in the Secret, and the serving certificates it signs.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::sign::CertifiedKey;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Keys of the CA Secret's `data`.
pub(crate) const CA_CERT: &str = "ca.crt";
pub(crate) const CA_KEY: &str = "ca.key";
const CA_NAME: &str = "ca.name";
const CA_ISSUED: &str = "ca.issued";
const CA_NOT_AFTER: &str = "ca.not-after";
const PREVIOUS_CERT: &str = "previous-ca.crt";
const PREVIOUS_NOT_AFTER: &str = "previous-ca.not-after";

/// Certificates start this long before they are made, for clocks that
/// run a little behind the manager's.
const BACKDATE: u64 = 60;

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The CA as the Secret stores it: its certificate and key (PEM), its
/// subject, when it was made and when it expires, and the CA it replaced
/// while certificates it signed may still be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoredCa {
    pub(crate) name: String,
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    pub(crate) issued: u64,
    pub(crate) not_after: u64,
    pub(crate) previous: Option<(String, u64)>,
}

impl StoredCa {
    /// A new CA valid for `lifetime` from `issued`, replacing `replaced`
    /// (kept in the bundle until it expires).
    pub(crate) fn generate(
        prefix: &str,
        issued: u64,
        lifetime: Duration,
        replaced: Option<&StoredCa>,
    ) -> Result<Self, String> {
        let name = format!("{prefix}-webhook-ca-{issued}");
        let not_after = issued.saturating_add(lifetime.as_secs().max(1));
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let params = ca_params(&name, issued.saturating_sub(BACKDATE), not_after)?;
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
        Ok(StoredCa {
            name,
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issued,
            not_after,
            previous: replaced
                .filter(|old| old.not_after > issued)
                .map(|old| (old.cert_pem.clone(), old.not_after)),
        })
    }

    /// When the CA is due for renewal: two thirds of its lifetime.
    pub(crate) fn renew_at(&self) -> u64 {
        self.issued + (self.not_after.saturating_sub(self.issued)) * 2 / 3
    }

    /// What the API server trusts: this CA, and the one it replaced until
    /// that one expires.
    pub(crate) fn bundle(&self, at: u64) -> Vec<u8> {
        let mut pem = self.cert_pem.clone();
        if let Some((previous, not_after)) = &self.previous
            && *not_after > at
        {
            if !pem.ends_with('\n') {
                pem.push('\n');
            }
            pem.push_str(previous);
        }
        pem.into_bytes()
    }

    /// The Secret's `data`.
    pub(crate) fn to_data(&self) -> BTreeMap<String, ByteString> {
        let text = |s: &str| ByteString(s.as_bytes().to_vec());
        let mut data = BTreeMap::from([
            (CA_CERT.to_owned(), text(&self.cert_pem)),
            (CA_KEY.to_owned(), text(&self.key_pem)),
            (CA_NAME.to_owned(), text(&self.name)),
            (CA_ISSUED.to_owned(), text(&self.issued.to_string())),
            (CA_NOT_AFTER.to_owned(), text(&self.not_after.to_string())),
        ]);
        if let Some((cert, not_after)) = &self.previous {
            data.insert(PREVIOUS_CERT.to_owned(), text(cert));
            data.insert(PREVIOUS_NOT_AFTER.to_owned(), text(&not_after.to_string()));
        }
        data
    }

    /// Reads the CA back from a Secret's `data`; the error names the key
    /// at fault.
    pub(crate) fn from_data(data: &BTreeMap<String, ByteString>) -> Result<Self, String> {
        let text = |key: &str| -> Result<String, String> {
            let value = data
                .get(key)
                .ok_or_else(|| format!("data has no `{key}`"))?;
            String::from_utf8(value.0.clone()).map_err(|_| format!("`{key}` is not UTF-8"))
        };
        let number = |key: &str| -> Result<u64, String> {
            text(key)?
                .trim()
                .parse()
                .map_err(|_| format!("`{key}` is not a number of seconds"))
        };
        let previous = match data.get(PREVIOUS_CERT) {
            None => None,
            Some(_) => Some((text(PREVIOUS_CERT)?, number(PREVIOUS_NOT_AFTER)?)),
        };
        let ca = StoredCa {
            name: text(CA_NAME)?,
            cert_pem: text(CA_CERT)?,
            key_pem: text(CA_KEY)?,
            issued: number(CA_ISSUED)?,
            not_after: number(CA_NOT_AFTER)?,
            previous,
        };
        ca.issuer()?;
        Ok(ca)
    }

    /// The signer of serving certificates: the CA's subject and key.
    fn issuer(&self) -> Result<Issuer<'static, KeyPair>, String> {
        let key = KeyPair::from_pem(&self.key_pem).map_err(|e| format!("`{CA_KEY}`: {e}"))?;
        let params = ca_params(&self.name, self.issued, self.not_after)?;
        Ok(Issuer::new(params, key))
    }

    /// A serving certificate for `names` (DNS names or IP addresses),
    /// valid for `lifetime` from `issued`, signed by this CA.
    pub(crate) fn issue(
        &self,
        names: &[String],
        issued: u64,
        lifetime: Duration,
    ) -> Result<Arc<CertifiedKey>, String> {
        let issuer = self.issuer()?;
        let mut params = CertificateParams::new(names.to_vec()).map_err(|e| e.to_string())?;
        let mut subject = DistinguishedName::new();
        subject.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.distinguished_name = subject;
        // Never past the CA: a chain is only as valid as its root.
        let not_after = issued
            .saturating_add(lifetime.as_secs().max(1))
            .min(self.not_after);
        set_validity(&mut params, issued.saturating_sub(BACKDATE), not_after);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let der = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| e.to_string())?;
        let provider = rustls::crypto::ring::default_provider();
        CertifiedKey::from_der(chain, der, &provider)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }
}

fn ca_params(name: &str, not_before: u64, not_after: u64) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, name);
    params.distinguished_name = subject;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, not_before, not_after);
    Ok(params)
}

/// Valid from `from` to `to` (seconds after the epoch).
fn set_validity(params: &mut CertificateParams, from: u64, to: u64) {
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + Duration::from_secs(from);
    params.not_after = epoch + Duration::from_secs(to);
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_renewed_ca_keeps_the_old_one_in_the_bundle_until_it_expires() {
        let old = StoredCa::generate("demo", 1_000, DAY, None).unwrap();
        assert_eq!(old.bundle(1_000), old.cert_pem.as_bytes());
        assert_eq!(old.renew_at(), 1_000 + 86_400 * 2 / 3);
        let renewed_at = old.renew_at();
        let new = StoredCa::generate("demo", renewed_at, DAY, Some(&old)).unwrap();
        let bundle = String::from_utf8(new.bundle(renewed_at)).unwrap();
        assert!(bundle.starts_with(&new.cert_pem) && bundle.contains(&old.cert_pem));
        let after = String::from_utf8(new.bundle(old.not_after)).unwrap();
        assert_eq!(
            after, new.cert_pem,
            "the old CA leaves the bundle when it expires"
        );
        // Once expired it is not carried into a further renewal either.
        let next = StoredCa::generate("demo", old.not_after + 1, DAY, Some(&new)).unwrap();
        assert_eq!(next.previous.map(|p| p.0), Some(new.cert_pem.clone()));
    }

    #[test]
    fn the_secret_data_reads_back_and_a_missing_key_is_named() {
        let old = StoredCa::generate("demo", 1_000, DAY, None).unwrap();
        let ca = StoredCa::generate("demo", 2_000, DAY, Some(&old)).unwrap();
        assert_eq!(StoredCa::from_data(&ca.to_data()), Ok(ca.clone()));
        let mut data = ca.to_data();
        data.remove(CA_KEY);
        assert_eq!(
            StoredCa::from_data(&data),
            Err("data has no `ca.key`".to_owned())
        );
        let mut data = ca.to_data();
        data.insert(CA_KEY.to_owned(), ByteString(b"not a key".to_vec()));
        let error = StoredCa::from_data(&data).unwrap_err();
        assert!(error.starts_with("`ca.key`: "), "{error}");
    }
}
