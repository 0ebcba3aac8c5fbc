use std::sync::atomic::Ordering;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::watch;

use super::connection::{candidate_identity, pod_namespace};
use super::{Manager, ShutdownHandle};
use crate::Error;
use crate::http::{Endpoints, serve};
use crate::leader::LeaderElector;

impl Manager {
    /// Runs every controller until shutdown (SIGTERM, SIGINT or a
    /// [`ShutdownHandle`]) or, with leader election, until leadership is lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaderElection`] when the lease is lost; the controllers are
    /// stopped gracefully first.
    pub async fn run(mut self) -> Result<(), Error> {
        let findings =
            super::table_check::findings(self.config.strategies(), &self.writes.resources());
        super::table_check::report(&findings);
        // The endpoints answer probes and scrapes through the shutdown
        // grace period and stop when `run` returns (the senders drop).
        let (_metrics_running, metrics_stop) = tokio::sync::oneshot::channel::<()>();
        if let Some(listener) = self.metrics_listener.take() {
            let endpoints = Endpoints::Metrics(self.metrics.clone());
            tokio::spawn(serve(listener, endpoints, self.endpoints, async move {
                let _ = metrics_stop.await;
            }));
        }
        let (_health_running, health_stop) = tokio::sync::oneshot::channel::<()>();
        if let Some(listener) = self.health_listener.take() {
            let endpoints = Endpoints::Health(self.ready.clone());
            tokio::spawn(serve(listener, endpoints, self.endpoints, async move {
                let _ = health_stop.await;
            }));
        }
        if self.signals {
            tokio::spawn(stop_on_signals(self.shutdown_handle()));
        }
        // Webhooks stop when `run` returns (the sender drops), not at the
        // shutdown signal: the controllers' last writes may need them.
        let (_webhooks_running, webhooks_stop) = tokio::sync::oneshot::channel::<()>();
        let serving_webhooks = self.webhook_server.is_some();
        if let Some(server) = self.webhook_server.take() {
            tokio::spawn(server.serve(async move {
                let _ = webhooks_stop.await;
            }));
        }
        self.ready.store(true, Ordering::Relaxed);
        let mut shutdown = self.shutdown.subscribe();
        let mut elector = if self.args.leader_elect {
            let namespace = self
                .args
                .leader_election_namespace
                .clone()
                .unwrap_or_else(pod_namespace);
            let identity = candidate_identity();
            let mut elector = LeaderElector::new(
                Api::<Lease>::namespaced(self.client.clone(), &namespace),
                self.args.leader_election_id.clone(),
                identity,
                self.leader,
            );
            tracing::info!(lease = %elector.lease_name(), "waiting for leadership");
            if !elector.acquire(&mut shutdown).await {
                return Ok(());
            }
            tracing::info!(lease = %elector.lease_name(), "became leader");
            Some(elector)
        } else {
            None
        };
        self.metrics.set_leader(true);
        let mut sharding = self.sharding.take();
        if let Some(sharding) = sharding.as_mut() {
            sharding.join().await?;
        }

        let (done_tx, mut done_rx) = watch::channel(false);
        let mut shard_done = done_rx.clone();
        let grace = self.grace;
        let stop = self.shutdown.subscribe();
        let futures: Vec<_> = self
            .controllers
            .into_iter()
            .map(|start| start(stop.clone()))
            .collect();
        let controllers = async {
            let mut stop = stop.clone();
            tokio::select! {
                _ = futures::future::join_all(futures) => {}
                _ = async {
                    let _ = stop.wait_for(|s| *s).await;
                    tokio::time::sleep(grace).await;
                } => tracing::warn!("in-flight reconciles did not finish within the shutdown grace period; abandoning them"),
            }
            // Webhooks: a manager that serves them runs until told to stop,
            // even when its controllers are done (or it has none).
            if serving_webhooks {
                let _ = stop.clone().wait_for(|s| *s).await;
            }
            done_tx.send_replace(true);
        };
        let shutdown_tx = self.shutdown.clone();
        let metrics = self.metrics.clone();
        let holding = async {
            let Some(elector) = elector.as_mut() else {
                return Ok(());
            };
            let result = elector.hold(&mut done_rx).await;
            if result.is_err() {
                metrics.set_leader(false);
                shutdown_tx.send_replace(true);
            }
            result
        };
        let shutdown_tx = self.shutdown.clone();
        let member = async {
            let Some(sharding) = sharding.as_mut() else {
                return Ok(());
            };
            let result = sharding.hold(&mut shard_done).await;
            if result.is_err() {
                shutdown_tx.send_replace(true);
            }
            result
        };
        let ((), held, member) = tokio::join!(controllers, holding, member);
        held.and(member)
    }
}

async fn stop_on_signals(handle: ShutdownHandle) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
    }
    handle.shutdown();
}
