//! The CA Secret: created if absent, read back, renewed.

use std::time::Duration;

use concord_strategies::Mutation;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta};

use super::authority::{CA_CERT, StoredCa, now};
use crate::webhook::WebhookError;
use crate::writes::ResourceWriter;

/// The label marking the Secret as the manager's.
pub(crate) const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Where the CA lives and how it is written.
#[derive(Clone, Debug)]
pub(crate) struct CaSecret {
    pub(crate) api: Api<Secret>,
    pub(crate) writer: ResourceWriter<Secret>,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The manager's name: the Secret's `managed-by` label and the CA's
    /// subject prefix.
    pub(crate) owner: String,
    pub(crate) lifetime: Duration,
}

impl CaSecret {
    fn fault(&self, message: impl Into<String>) -> WebhookError {
        WebhookError::ManagedCertificate {
            object: format!("Secret {}/{}", self.namespace, self.name),
            message: message.into(),
        }
    }

    /// The stored CA, or `None` when the Secret does not exist.
    pub(crate) async fn read(&self) -> Result<Option<(Secret, StoredCa)>, WebhookError> {
        let Some(secret) = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(|e| self.fault(format!("cannot be read: {e}")))?
        else {
            return Ok(None);
        };
        let data = secret.data.clone().unwrap_or_default();
        let ca = StoredCa::from_data(&data).map_err(|e| {
            self.fault(format!(
                "exists but does not hold a CA this manager can use ({e}); delete it or name another with with_secret_name"
            ))
        })?;
        Ok(Some((secret, ca)))
    }

    /// The stored CA, made and stored first if there is none. Replicas
    /// starting together may each try to create it: whoever loses reads
    /// the winner's.
    pub(crate) async fn ensure(&self) -> Result<StoredCa, WebhookError> {
        if let Some((_, ca)) = self.read().await? {
            return Ok(ca);
        }
        let ca = StoredCa::generate(&self.owner, now(), self.lifetime, None)
            .map_err(|e| self.fault(format!("cannot make a CA: {e}")))?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some([(MANAGED_BY.to_owned(), self.owner.clone())].into()),
                ..ObjectMeta::default()
            },
            data: Some(ca.to_data()),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        let created = self.writer.create(&secret).await;
        match (created, self.read().await?) {
            (_, Some((_, stored))) => Ok(stored),
            (Err(e), None) => Err(self.fault(format!("cannot be created: {e}"))),
            (Ok(_), None) => Err(self.fault("was created but cannot be read back")),
        }
    }

    /// Renews the CA if it is past two thirds of its lifetime, keeping the
    /// old one in the bundle; returns the CA now stored. When replicas
    /// renew together, the write lands only on a Secret that still holds
    /// the CA this replica read, so one new CA wins and the others adopt
    /// it.
    pub(crate) async fn renew_if_due(&self) -> Result<StoredCa, WebhookError> {
        let Some((secret, ca)) = self.read().await? else {
            return self.ensure().await;
        };
        if now() < ca.renew_at() {
            return Ok(ca);
        }
        let next = StoredCa::generate(&self.owner, now(), self.lifetime, Some(&ca))
            .map_err(|e| self.fault(format!("cannot make a CA: {e}")))?;
        let seen = ca.cert_pem.clone().into_bytes();
        let data = next.to_data();
        let renew = Mutation::typed(move |s: &mut Secret| {
            let current = s
                .data
                .as_ref()
                .and_then(|d| d.get(CA_CERT))
                .map(|v| v.0.as_slice());
            if current == Some(seen.as_slice()) {
                s.data = Some(data.clone());
            }
        });
        self.writer
            .write(&secret, &renew)
            .await
            .map_err(|e| self.fault(format!("cannot renew the CA: {e}")))?;
        tracing::info!(secret = %self.name, "webhook CA renewed");
        match self.read().await? {
            Some((_, stored)) => Ok(stored),
            None => Err(self.fault("disappeared while the CA was renewed")),
        }
    }
}
