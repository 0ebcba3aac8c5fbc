use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;
use tokio::sync::watch;

use crate::Error;

/// Leader-election timings; the defaults are controller-runtime's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaderElectionConfig {
    /// How long a lease is valid after its last renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up (10 s).
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews (2 s).
    pub retry_period: Duration,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        LeaderElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// One candidate for a `coordination.k8s.io/v1` Lease.
///
/// Expiry is judged as client-go does: by how long this candidate has seen
/// the same record unchanged on its own clock, never by comparing clocks
/// with the holder.
pub(crate) struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    config: LeaderElectionConfig,
    observed: Option<(Option<String>, Option<MicroTime>)>,
    observed_at: Instant,
}

impl LeaderElector {
    pub(crate) fn new(
        api: Api<Lease>,
        name: String,
        identity: String,
        config: LeaderElectionConfig,
    ) -> Self {
        LeaderElector {
            api,
            name,
            identity,
            config,
            observed: None,
            observed_at: Instant::now(),
        }
    }

    pub(crate) fn lease_name(&self) -> String {
        format!(
            "{}/{}",
            self.api.namespace().unwrap_or("default"),
            self.name
        )
    }

    /// Waits until this candidate holds the lease (`true`) or shutdown is
    /// requested first (`false`).
    pub(crate) async fn acquire(&mut self, shutdown: &mut watch::Receiver<bool>) -> bool {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return true,
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, lease = %self.lease_name(), "leader election attempt failed")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = shutdown.changed() => return false,
            }
        }
    }

    /// Renews the lease until shutdown (then releases it, so a standby
    /// takes over at once) or until renewal fails for the renew deadline.
    ///
    /// # Errors
    ///
    /// [`Error::LeaderElection`] when leadership is lost.
    pub(crate) async fn hold(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), Error> {
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = shutdown.changed() => {
                    self.release().await;
                    return Ok(());
                }
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => return Err(self.lost("another candidate holds the lease")),
                Err(error) => {
                    tracing::warn!(%error, lease = %self.lease_name(), "renewing the lease failed")
                }
            }
            if renewed.elapsed() > self.config.renew_deadline {
                return Err(self.lost("the lease could not be renewed within the renew deadline"));
            }
        }
    }

    fn lost(&self, message: &str) -> Error {
        Error::LeaderElection {
            lease: self.lease_name(),
            message: message.into(),
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(now.clone(), now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (holder.clone(), spec.renew_time.clone());
        if self.observed.as_ref() != Some(&record) {
            self.observed = Some(record);
            self.observed_at = Instant::now();
        }
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(15).max(1)).unwrap_or(15),
        );
        let ours = holder.as_deref() == Some(self.identity.as_str());
        let expired = holder.is_none() || self.observed_at.elapsed() > duration;
        if !ours && !expired {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquired = if ours {
            spec.acquire_time.unwrap_or_else(|| now.clone())
        } else {
            now.clone()
        };
        lease.spec = Some(self.spec(acquired, now, transitions));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    fn spec(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(15),
            ),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        if let Err(error) = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(%error, lease = %self.lease_name(), "releasing the lease failed");
        }
    }
}
