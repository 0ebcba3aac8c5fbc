use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::watch;

use super::connection::{candidate_identity, pod_namespace};
use super::{Manager, ShutdownHandle};
use crate::Error;
use crate::http::{Endpoints, serve};
use crate::leader::LeaderElector;
use crate::serve::{Plain, Tls};
use crate::task::Task;

impl Manager {
    /// Runs every controller until shutdown (SIGTERM, SIGINT or a
    /// [`ShutdownHandle`]) or, with leader election, until leadership is lost.
    ///
    /// # Errors
    ///
    /// [`Error::LeaderElection`] when the lease is lost; the controllers are
    /// stopped gracefully first.
    pub async fn run(mut self) -> Result<(), Error> {
        let written = self.writes.resources();
        let table = self.config.strategies();
        // Only a row that matches no watched resource needs the server's list.
        let served = if table
            .rows()
            .iter()
            .all(|row| written.iter().any(|resource| row.matches(resource)))
        {
            None
        } else {
            super::table_check::served(&self.client).await
        };
        let findings = super::table_check::findings(table, &written, served.as_deref());
        super::table_check::report(&findings);
        // The endpoints answer probes and scrapes through the shutdown
        // grace period and stop when `run` returns (the senders drop).
        let (_metrics_running, metrics_stop) = tokio::sync::oneshot::channel::<()>();
        if let Some(listener) = self.metrics_listener.take() {
            let stop = async move {
                let _ = metrics_stop.await;
            };
            match self.metrics_secure.clone() {
                None => {
                    let endpoints = Endpoints::Metrics {
                        metrics: self.metrics.clone(),
                        reviewer: None,
                    };
                    tokio::spawn(serve(listener, Plain, endpoints, self.endpoints, stop));
                }
                Some((tls, reviewer)) => {
                    let endpoints = Endpoints::Metrics {
                        metrics: self.metrics.clone(),
                        reviewer: Some(reviewer),
                    };
                    let handshake = Tls::new(tls.acceptor(), "metrics");
                    let limits = self.endpoints;
                    tokio::spawn(async move {
                        tokio::select! {
                            () = serve(listener, handshake, endpoints, limits, stop) => {}
                            () = tls.reload(std::time::Duration::from_secs(1)) => {}
                        }
                    });
                }
            }
        }
        // Every readiness check is in place before the first probe.
        let webhooks_serving = Arc::new(AtomicBool::new(false));
        if self.webhook_server.is_some() {
            let waiting = if self.cert_rotator.is_some() {
                "not serving a certificate the API server trusts"
            } else {
                "not serving"
            };
            self.health
                .readiness
                .add("webhooks", waiting, webhooks_serving.clone());
        }
        let joined = Arc::new(AtomicBool::new(false));
        if self.sharding.is_some() {
            self.health
                .readiness
                .add("shard-ring", "not joined", joined.clone());
        }
        let watchdog = self.health.watchdog.clone();
        let _watchdog = Running(vec![tokio::spawn(async move { watchdog.run().await })]);
        let _releasing = Running(match self.memory_release {
            crate::memory::MemoryRelease::WhenIdle { after } => vec![tokio::spawn(
                crate::memory::release_when_idle(self.metrics.clone(), after),
            )],
            crate::memory::MemoryRelease::Off => Vec::new(),
        });
        let (_health_running, health_stop) = tokio::sync::oneshot::channel::<()>();
        if let Some(listener) = self.health_listener.take() {
            let endpoints = Endpoints::Health(self.health.clone());
            tokio::spawn(serve(
                listener,
                Plain,
                endpoints,
                self.endpoints,
                async move {
                    let _ = health_stop.await;
                },
            ));
        }
        if self.signals {
            tokio::spawn(stop_on_signals(self.shutdown_handle()));
        }
        // Webhooks stop when `run` returns (the sender drops), not at the
        // shutdown signal: the controllers' last writes may need them.
        let (_webhooks_running, webhooks_stop) = tokio::sync::oneshot::channel::<()>();
        let serving_webhooks = self.webhook_server.is_some();
        // Managed certificates: ready once the CA is in the owned objects'
        // caBundle; renewed until `run` returns.
        let rotator = self.cert_rotator.take();
        let ready_at_start = rotator.is_none();
        let trusted = webhooks_serving.clone();
        let _rotating = Running(
            rotator
                .map(|r| tokio::spawn(r.run(trusted)))
                .into_iter()
                .collect(),
        );
        if let Some(server) = self.webhook_server.take() {
            // Bound with its certificate loaded at build; serving from
            // this task's first poll on.
            tokio::spawn(async move {
                if ready_at_start {
                    webhooks_serving.store(true, Ordering::Release);
                }
                server
                    .serve(async move {
                        let _ = webhooks_stop.await;
                    })
                    .await;
            });
        }
        let stop = self.shutdown.subscribe();
        // The caches fill while a replica waits for leadership, so a
        // standby is ready (and warm) when it takes over. A sharded
        // replica's selection is known once it has joined its ring.
        let mut watches = Running(Vec::new());
        let cold = self.args.leader_elect && self.args.cold_standby;
        if self.sharding.is_none() && !cold {
            watches = start(std::mem::take(&mut self.watches), &stop);
        }
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
        if cold {
            // Ready already while standing by; from now on each cache is
            // ready once its first list is in.
            self.standing_by
                .store(false, std::sync::atomic::Ordering::Release);
            if self.sharding.is_none() {
                watches = start(std::mem::take(&mut self.watches), &stop);
            }
        }
        let mut sharding = self.sharding.take();
        if let Some(sharding) = sharding.as_mut() {
            sharding.join().await?;
            // How objects are placed, when the server was asked, in
            // `/readyz?verbose` as in the log.
            if sharding.probed() {
                self.health.readiness.add(
                    &format!("shard-mode:{}", sharding.mode()),
                    "",
                    Arc::new(AtomicBool::new(true)),
                );
            }
            joined.store(true, Ordering::Release);
            watches = start(std::mem::take(&mut self.watches), &stop);
        }

        let (done_tx, mut done_rx) = watch::channel(false);
        let mut shard_done = done_rx.clone();
        let grace = self.grace;
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
        drop(watches);
        held.and(member)
    }
}

/// Tasks that end when `run` returns, however it returns.
struct Running(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Spawns `tasks`, each stopping at the shutdown signal `stop`.
fn start(tasks: Vec<Task>, stop: &watch::Receiver<bool>) -> Running {
    Running(
        tasks
            .into_iter()
            .map(|task| tokio::spawn(task(stop.clone())))
            .collect(),
    )
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
