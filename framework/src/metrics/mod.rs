//! The manager's metrics: one [`prometheus_client`] registry that every
//! part of the manager registers its own collectors into.

mod reconciles;
mod writes;

#[doc(no_inline)]
pub use prometheus_client;

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::client::ClientCounters;

pub(crate) use reconciles::{ReconcileCounters, ReconcileSeries};
pub(crate) use writes::{WriteCollector, WriteSeries};

/// The content type of [`Metrics::render`]: the Prometheus text format,
/// version 0.0.4.
pub const TEXT_CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// The content type of [`Metrics::render_openmetrics`]: OpenMetrics text
/// 1.0.0.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The manager's metrics: one [`Registry`] that the controllers, the
/// writers, the client, leader election, sharding and the webhook server
/// each register their collectors into when the manager is built.
///
/// `/metrics` serves [`render`](Self::render) (Prometheus text 0.0.4), or
/// [`render_openmetrics`](Self::render_openmetrics) to a scraper whose
/// `Accept` header asks for OpenMetrics; both carry the same series.
///
/// # Example
///
/// Series of your own join the manager's:
///
/// ```no_run
/// # async fn run(manager: concord::Manager) {
/// use concord::metrics::prometheus_client::metrics::counter::Counter;
///
/// let jobs: Counter = Counter::default();
/// manager.metrics().register(|registry| {
///     registry.register("myop_jobs", "Jobs my operator started.", jobs.clone());
/// });
/// jobs.inc();
/// # }
/// ```
#[derive(Debug)]
pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Arc<ReconcileSeries>,
    leader: Gauge<i64, AtomicI64>,
    client: Arc<ClientCounters>,
    memory_releases: Counter,
    /// Seconds those releases took.
    memory_release_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

impl Metrics {
    pub(crate) fn new(writes: Arc<dyn WriteSeries>, client: Arc<ClientCounters>) -> Self {
        let reconciles = Arc::new(ReconcileSeries::default());
        let leader = Gauge::<i64, AtomicI64>::default();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(reconciles.clone()));
        registry.register_collector(Box::new(WriteCollector(writes)));
        registry.register_collector(Box::new(client.clone()));
        registry.register(
            "concord_leader",
            "Whether this replica holds the leader-election lease (1 without leader election)",
            leader.clone(),
        );
        let memory_releases = Counter::default();
        registry.register(
            "concord_memory_releases",
            "Times the manager gave the allocator's free memory back to the system (MemoryRelease)",
            memory_releases.clone(),
        );
        let memory_release_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "concord_memory_release_seconds",
            "Time the manager's releases of free memory took",
            memory_release_seconds.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            reconciles,
            leader,
            client,
            memory_releases,
            memory_release_seconds,
        }
    }

    /// Lets `register` add metrics or collectors of its own to the
    /// manager's registry; they are served on `/metrics` with the rest.
    pub fn register(&self, register: impl FnOnce(&mut Registry)) {
        let mut registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        register(&mut registry);
    }

    /// Adds a part's collector (sharding, webhooks) to the registry.
    pub(crate) fn register_collector(&self, collector: impl Collector) {
        self.register(|registry| registry.register_collector(Box::new(collector)));
    }

    pub(crate) fn controller(&self, name: &str) -> Arc<ReconcileCounters> {
        self.reconciles.controller(name)
    }

    /// The counters of the manager's own client (429/503/504 answers that
    /// kube's client retried).
    pub fn client(&self) -> Arc<ClientCounters> {
        self.client.clone()
    }

    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Whether this replica leads — holds the leader-election Lease, or runs
    /// without leader election — as the `concord_leader` gauge says; false
    /// before [`Manager::run`](crate::Manager::run) and while a standby waits.
    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    /// Reconciles finished and in flight, over every controller.
    pub(crate) fn reconcile_activity(&self) -> (u64, i64) {
        self.reconciles.activity()
    }

    /// Counts one release of free memory, which took `took`.
    pub(crate) fn memory_released(&self, took: std::time::Duration) {
        self.memory_releases.inc();
        self.memory_release_seconds.inc_by(took.as_secs_f64());
    }

    /// Times the manager gave free memory back to the system
    /// ([`MemoryRelease`](crate::memory::MemoryRelease)), and the time that took:
    /// the `concord_memory_releases_total` and
    /// `concord_memory_release_seconds_total` counters.
    pub fn memory_releases(&self) -> (u64, std::time::Duration) {
        (
            self.memory_releases.get(),
            std::time::Duration::from_secs_f64(self.memory_release_seconds.get()),
        )
    }

    /// Total successful reconciles of `controller` so far.
    pub fn reconciles(&self, controller: &str) -> u64 {
        self.reconciles.successes(controller)
    }

    /// The metrics in the Prometheus text exposition format (version
    /// 0.0.4, [`TEXT_CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        encode_text(&registry)
    }

    /// The metrics in the OpenMetrics text format
    /// ([`OPENMETRICS_CONTENT_TYPE`]), ending with `# EOF`.
    pub fn render_openmetrics(&self) -> String {
        let registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::with_capacity(8192);
        if let Err(error) = text::encode(&mut out, &registry) {
            tracing::warn!(%error, "the metrics could not be encoded");
        }
        out
    }
}

/// `registry` in the Prometheus text format, version 0.0.4.
pub(crate) fn encode_text(registry: &Registry) -> String {
    let mut out = String::with_capacity(8192);
    if let Err(error) = prometheus_text::encode(&mut out, registry) {
        // Writing to a String fails only if a collector does.
        tracing::warn!(%error, "the metrics could not be encoded");
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[derive(Debug)]
    struct NoWrites;

    impl WriteSeries for NoWrites {
        fn series(
            &self,
        ) -> Vec<(
            (String, concord_featuregates::StrategyName),
            Arc<concord_strategies::WriteMetrics>,
        )> {
            vec![(
                ("pods".into(), concord_featuregates::StrategyName::Strict),
                Arc::default(),
            )]
        }
    }

    pub(crate) fn metrics() -> Metrics {
        Metrics::new(Arc::new(NoWrites), Arc::default())
    }

    #[test]
    fn render_keeps_the_names_labels_and_format() {
        let metrics = metrics();
        let counters = metrics.controller("pods");
        counters
            .ok
            .fetch_add(2, std::sync::atomic::Ordering::Relaxed);
        metrics.set_leader(true);
        let text = metrics.render();
        for line in [
            "# TYPE concord_reconcile_total counter",
            "concord_reconcile_total{controller=\"pods\",result=\"success\"} 2",
            "concord_reconcile_total{controller=\"pods\",result=\"error\"} 0",
            "concord_reconcile_in_flight{controller=\"pods\"} 0",
            "concord_write_requests_total{resource=\"pods\",strategy=\"strict\",verb=\"patch\"} 0",
            "concord_write_duration_seconds_bucket{resource=\"pods\",strategy=\"strict\",le=\"0.005\"} 0",
            "concord_write_duration_seconds_bucket{resource=\"pods\",strategy=\"strict\",le=\"+Inf\"} 0",
            "concord_client_retried_responses_total{code=\"429\"} 0",
            "# TYPE concord_leader gauge",
            "concord_leader 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
        assert!(!text.contains("# EOF"));
        assert_eq!(metrics.reconciles("pods"), 2);
    }

    #[test]
    fn openmetrics_ends_with_eof_and_keeps_the_samples() {
        let metrics = metrics();
        let _ = metrics.controller("pods");
        let text = metrics.render_openmetrics();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.lines()
                .any(|l| l == "concord_reconcile_total{controller=\"pods\",result=\"success\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn own_metrics_join_the_registry() {
        let metrics = metrics();
        let jobs: prometheus_client::metrics::counter::Counter = Default::default();
        metrics.register(|r| r.register("myop_jobs", "Jobs.", jobs.clone()));
        jobs.inc();
        assert!(metrics.render().lines().any(|l| l == "myop_jobs_total 1"));
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = metrics();
        let _ = metrics.controller("a\"b");
        let text = metrics.render();
        assert!(
            text.contains("concord_reconcile_in_flight{controller=\"a\\\"b\"} 0"),
            "{text}"
        );
    }
}
