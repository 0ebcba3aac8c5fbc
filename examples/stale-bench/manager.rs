//! The concord contenders: a ReplicaSet-like reconciler run by a real
//! `Manager` behind the fault proxy, with read-your-own-writes on (the
//! default) or off (`.with_read_your_writes(false)`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::{Context as _, Result};
use concord::{Action, Context, Manager, Reconciler, WriteError};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;
use kube::api::{Api, ObjectMeta};

use crate::tally::PARENT_LABEL;

/// How long the manager's cache may take to list the namespace.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the manager may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
enum Failed {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Cache(#[from] concord::cache::CacheError),
}

// ANCHOR: reconciler
/// Keeps `data.replicas` children per parent, counting them in the
/// manager's cache: what a ReplicaSet-like controller does.
#[derive(Clone, Default)]
struct Replicas {
    reconciles: Arc<AtomicU64>,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Replicas {
    type Error = Failed;

    async fn reconcile(
        &self,
        parent: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Failed> {
        self.reconciles.fetch_add(1, Relaxed);
        let want: usize = parent
            .data
            .as_ref()
            .and_then(|d| d.get("replicas"))
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let name = parent.name_any();
        let children = ctx.cache::<ConfigMap>()?.list(
            parent.namespace().as_deref(),
            Some(&format!("{PARENT_LABEL}={name}")),
        )?;
        for _ in children.len()..want {
            let child = ConfigMap {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{name}-")),
                    labels: Some(BTreeMap::from([(PARENT_LABEL.to_owned(), name.clone())])),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            ctx.create_owned(&parent, child).await?;
        }
        for child in children.iter().skip(want) {
            match ctx.delete(child.as_ref()).await {
                // Changed since the cache's copy: decided again on the next event.
                Ok(_) | Err(WriteError::Conflict { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Action::await_change())
    }
}
// ANCHOR_END: reconciler

/// A concord contender running on one namespace.
pub(crate) struct Running {
    reconciles: Arc<AtomicU64>,
    metrics: Arc<concord::metrics::Metrics>,
    stop: concord::manager::ShutdownHandle,
    task: tokio::task::JoinHandle<Result<(), concord::Error>>,
}

/// What a concord contender reports when it stops.
pub(crate) struct Stopped {
    /// Reconciles it ran.
    pub(crate) reconciles: u64,
    /// Reconciles the gate held back until the cache showed the manager's
    /// own writes, then ran.
    pub(crate) held_ran: u64,
    /// Reconciles the gate held back, then requeued (the watch took longer
    /// than the gate waits).
    pub(crate) held_requeued: u64,
    /// Seconds reconciles waited at the gate, summed.
    pub(crate) held_seconds: f64,
}

/// Starts the contender on `namespace`, connecting through `config` (the
/// fault proxy's), and waits until its cache has listed the namespace.
///
/// # Errors
///
/// When the manager cannot be built or its cache does not fill in time.
pub(crate) async fn start(
    config: kube::Config,
    namespace: &str,
    read_your_writes: bool,
    concurrency: u16,
) -> Result<Running> {
    let mut manager = Manager::builder("stale-bench")
        .with_builtin_type::<ConfigMap>()
        .with_kube_config(config)
        .with_signal_handling(false)
        .build()
        .await
        .context("building the concord manager")?;
    let maps: Api<ConfigMap> = Api::namespaced(manager.client().clone(), namespace);
    let replicas = Replicas::default();
    // ANCHOR: controller
    let store = manager.cache(maps.clone());
    manager
        .controller("replicas", maps.clone(), replicas.clone())
        .with_labels("role=parent")
        .owns(maps)
        .with_concurrency(concurrency)
        .with_read_your_writes(read_your_writes)
        .add()?;
    // ANCHOR_END: controller
    let running = Running {
        reconciles: replicas.reconciles,
        metrics: manager.metrics(),
        stop: manager.shutdown_handle(),
        task: tokio::spawn(manager.run()),
    };
    tokio::time::timeout(READY_TIMEOUT, store.wait_until_ready())
        .await
        .with_context(|| format!("the manager's cache did not fill within {READY_TIMEOUT:?}"))?
        .context("the manager stopped before its cache filled")?;
    Ok(running)
}

impl Running {
    /// Stops the manager and reads its figures.
    ///
    /// # Errors
    ///
    /// When the manager failed or does not stop in time.
    pub(crate) async fn stop(self) -> Result<Stopped> {
        self.stop.shutdown();
        tokio::time::timeout(STOP_TIMEOUT, self.task)
            .await
            .with_context(|| format!("the manager did not stop within {STOP_TIMEOUT:?}"))??
            .context("the concord manager failed")?;
        let text = self.metrics.render();
        let metric = |name: &str, outcome: Option<&str>| {
            text.lines()
                .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
                .filter(|l| outcome.is_none_or(|o| l.contains(&format!("outcome=\"{o}\""))))
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum::<f64>()
        };
        Ok(Stopped {
            reconciles: self.reconciles.load(Relaxed),
            held_ran: metric("concord_reconcile_stale_cache_total", Some("ran")) as u64,
            held_requeued: metric("concord_reconcile_stale_cache_total", Some("requeued")) as u64,
            held_seconds: metric("concord_reconcile_stale_cache_wait_seconds_total", None),
        })
    }
}
