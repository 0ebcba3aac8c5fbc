use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use concord_featuregates::StrategyName;
use concord_strategies::{LATENCY_BUCKETS, Verb, WriteMetrics};

use crate::ClientCounters;

/// Counters of one controller's reconciles.
#[derive(Debug, Default)]
pub(crate) struct ReconcileCounters {
    pub(crate) ok: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) in_flight: AtomicI64,
    pub(crate) seconds_micros: AtomicU64,
}

/// Where the metrics read the write counters from (the manager's write
/// registry), so that the metrics know nothing of how writers are built.
pub(crate) trait WriteSeries: Send + Sync + std::fmt::Debug {
    /// Every (resource, strategy) that has a writer, with its counters.
    fn series(&self) -> Vec<((String, StrategyName), Arc<WriteMetrics>)>;
}

/// The manager's metrics, rendered in the Prometheus text format.
#[derive(Debug)]
pub struct Metrics {
    writes: Arc<dyn WriteSeries>,
    reconciles: Mutex<BTreeMap<String, Arc<ReconcileCounters>>>,
    leader: AtomicU64,
    client: Arc<ClientCounters>,
    sharding: std::sync::OnceLock<Arc<crate::sharding::ShardStats>>,
    webhooks: std::sync::OnceLock<Arc<crate::webhook::WebhookMetrics>>,
}

impl Metrics {
    pub(crate) fn new(writes: Arc<dyn WriteSeries>, client: Arc<ClientCounters>) -> Self {
        Metrics {
            writes,
            reconciles: Mutex::new(BTreeMap::new()),
            leader: AtomicU64::new(0),
            client,
            sharding: std::sync::OnceLock::new(),
            webhooks: std::sync::OnceLock::new(),
        }
    }

    /// The webhook server's series join the manager's `/metrics`.
    pub(crate) fn set_webhooks(&self, webhooks: Arc<crate::webhook::WebhookMetrics>) {
        let _ = self.webhooks.set(webhooks);
    }

    pub(crate) fn set_sharding(&self, stats: Arc<crate::sharding::ShardStats>) {
        let _ = self.sharding.set(stats);
    }

    pub(crate) fn controller(&self, name: &str) -> Arc<ReconcileCounters> {
        let mut map = self
            .reconciles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(name.to_owned()).or_default().clone()
    }

    /// The counters of the manager's own client (429/503/504 answers that
    /// kube's client retried).
    pub fn client(&self) -> Arc<ClientCounters> {
        self.client.clone()
    }

    pub(crate) fn set_leader(&self, leader: bool) {
        self.leader.store(u64::from(leader), Relaxed);
    }

    /// Total successful reconciles of `controller` so far.
    pub fn reconciles(&self, controller: &str) -> u64 {
        self.controller(controller).ok.load(Relaxed)
    }

    /// The metrics in the Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.render_reconciles(&mut out);
        self.render_writes(&mut out);
        header(
            &mut out,
            "concord_client_retried_responses_total",
            "counter",
            "Answers the client retried by itself, honouring Retry-After (429 throttling, 503, 504).",
        );
        for (code, n) in self.client.by_code() {
            let _ = writeln!(
                out,
                "concord_client_retried_responses_total{{code=\"{code}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP concord_leader Whether this replica holds the leader-election lease (1 without leader election)."
        );
        let _ = writeln!(out, "# TYPE concord_leader gauge");
        let _ = writeln!(out, "concord_leader {}", self.leader.load(Relaxed));
        if let Some(stats) = self.sharding.get() {
            stats.render(&mut out);
        }
        if let Some(webhooks) = self.webhooks.get() {
            out.push_str(&webhooks.render());
        }
        out
    }

    fn render_reconciles(&self, out: &mut String) {
        let map = self
            .reconciles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        header(
            out,
            "concord_reconcile_total",
            "counter",
            "Reconciles by controller and result.",
        );
        for (name, c) in map.iter() {
            let _ = writeln!(
                out,
                "concord_reconcile_total{{controller=\"{name}\",result=\"success\"}} {}",
                c.ok.load(Relaxed)
            );
            let _ = writeln!(
                out,
                "concord_reconcile_total{{controller=\"{name}\",result=\"error\"}} {}",
                c.errors.load(Relaxed)
            );
        }
        header(
            out,
            "concord_reconcile_in_flight",
            "gauge",
            "Reconciles running now.",
        );
        for (name, c) in map.iter() {
            let _ = writeln!(
                out,
                "concord_reconcile_in_flight{{controller=\"{name}\"}} {}",
                c.in_flight.load(Relaxed)
            );
        }
        header(
            out,
            "concord_reconcile_seconds_total",
            "counter",
            "Time spent reconciling.",
        );
        for (name, c) in map.iter() {
            let secs = c.seconds_micros.load(Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "concord_reconcile_seconds_total{{controller=\"{name}\"}} {secs}"
            );
        }
    }

    fn render_writes(&self, out: &mut String) {
        let all = self.writes.series();
        let snapshots: Vec<_> = all
            .iter()
            .map(|((r, s), m)| (r.as_str(), s.as_str(), m.snapshot()))
            .collect();
        header(
            out,
            "concord_write_total",
            "counter",
            "Logical writes by resource, strategy and result.",
        );
        for (r, s, m) in &snapshots {
            for (result, n) in [
                ("success", m.writes),
                ("error", m.errors),
                ("unchanged", m.unchanged),
                ("gone", m.gone),
            ] {
                let _ = writeln!(
                    out,
                    "concord_write_total{{resource=\"{r}\",strategy=\"{s}\",result=\"{result}\"}} {n}"
                );
            }
        }
        header(
            out,
            "concord_write_requests_total",
            "counter",
            "API requests sent by writes, by verb.",
        );
        for (r, s, m) in &snapshots {
            for verb in Verb::ALL {
                let _ = writeln!(
                    out,
                    "concord_write_requests_total{{resource=\"{r}\",strategy=\"{s}\",verb=\"{}\"}} {}",
                    verb.as_str(),
                    m.requests(verb)
                );
            }
        }
        header(
            out,
            "concord_write_rereads_total",
            "counter",
            "Re-reads after a conflict, by source: the shared watch cache or a GET.",
        );
        for (r, s, m) in &snapshots {
            for (source, n) in [("cache", m.rereads_from_cache), ("get", m.rereads_by_get)] {
                let _ = writeln!(
                    out,
                    "concord_write_rereads_total{{resource=\"{r}\",strategy=\"{s}\",source=\"{source}\"}} {n}"
                );
            }
        }
        for (name, help, pick) in [
            (
                "concord_write_conflicts_total",
                "409 Conflict answers met by writes.",
                0,
            ),
            (
                "concord_write_retries_total",
                "Write attempts after the first.",
                1,
            ),
            (
                "concord_write_throttled_total",
                "429 Too Many Requests answers met by writes.",
                2,
            ),
            (
                "concord_write_fallbacks_total",
                "Apply writes that fell back to a guarded patch.",
                3,
            ),
            (
                "concord_write_rebased_total",
                "Writes that started from the copy this process's previous write of the object stored.",
                4,
            ),
        ] {
            header(out, name, "counter", help);
            for (r, s, m) in &snapshots {
                let n = [m.conflicts, m.retries, m.throttled, m.fell_back, m.rebased][pick];
                let _ = writeln!(out, "{name}{{resource=\"{r}\",strategy=\"{s}\"}} {n}");
            }
        }
        header(
            out,
            "concord_write_duration_seconds",
            "histogram",
            "Latency of logical writes, retries included.",
        );
        for (r, s, m) in &snapshots {
            let mut cumulative = 0;
            for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
                cumulative += m.latency_buckets[i];
                let _ = writeln!(
                    out,
                    "concord_write_duration_seconds_bucket{{resource=\"{r}\",strategy=\"{s}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            cumulative += m.latency_buckets[LATENCY_BUCKETS.len()];
            let _ = writeln!(
                out,
                "concord_write_duration_seconds_bucket{{resource=\"{r}\",strategy=\"{s}\",le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(
                out,
                "concord_write_duration_seconds_sum{{resource=\"{r}\",strategy=\"{s}\"}} {}",
                m.latency_micros as f64 / 1e6
            );
            let _ = writeln!(
                out,
                "concord_write_duration_seconds_count{{resource=\"{r}\",strategy=\"{s}\"}} {cumulative}"
            );
        }
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}
