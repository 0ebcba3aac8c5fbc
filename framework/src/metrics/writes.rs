//! The writers' series, per resource and strategy, read from the manager's
//! write registry at each scrape.

use std::sync::Arc;

use concord_featuregates::StrategyName;
use concord_strategies::{Fallback, LATENCY_BUCKETS, Verb, WriteMetrics};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

/// Where the metrics read the write counters from (the manager's write
/// registry), so that the metrics know nothing of how writers are built.
pub(crate) trait WriteSeries: Send + Sync + std::fmt::Debug {
    /// Every (resource, strategy) that has a writer, with its counters.
    fn series(&self) -> Vec<((String, StrategyName), Arc<WriteMetrics>)>;
}

/// The collector of every writer's series.
#[derive(Debug)]
pub(crate) struct WriteCollector(pub(crate) Arc<dyn WriteSeries>);

/// The counters that carry only the resource and strategy labels.
const PLAIN: [(&str, &str); 4] = [
    (
        "concord_write_conflicts",
        "409 Conflict answers met by writes.",
    ),
    ("concord_write_retries", "Write attempts after the first."),
    (
        "concord_write_throttled",
        "429 Too Many Requests answers met by writes.",
    ),
    (
        "concord_write_rebased",
        "Writes that started from the copy this process's previous write of the object stored.",
    ),
];

impl Collector for WriteCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let all = self.0.series();
        let snapshots: Vec<_> = all
            .iter()
            .map(|((r, s), m)| (r.as_str(), s.as_str(), m.snapshot()))
            .collect();
        let mut family = encoder.encode_descriptor(
            "concord_write",
            "Logical writes by resource, strategy and result.",
            None,
            MetricType::Counter,
        )?;
        for (r, s, m) in &snapshots {
            for (result, n) in [
                // Every write that returned without error (`unchanged` and
                // `gone` ones included, which are also counted apart).
                ("success", m.writes.saturating_sub(m.errors)),
                ("error", m.errors),
                ("unchanged", m.unchanged),
                ("gone", m.gone),
            ] {
                let labels = [("resource", *r), ("strategy", *s), ("result", result)];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_write_requests",
            "API requests sent by writes, by verb.",
            None,
            MetricType::Counter,
        )?;
        for (r, s, m) in &snapshots {
            for verb in Verb::ALL {
                let labels = [("resource", *r), ("strategy", *s), ("verb", verb.as_str())];
                ConstCounter::new(m.requests(verb)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_write_rereads",
            "Re-reads after a conflict, by source: the shared watch cache or a GET.",
            None,
            MetricType::Counter,
        )?;
        for (r, s, m) in &snapshots {
            for (source, n) in [("cache", m.rereads_from_cache), ("get", m.rereads_by_get)] {
                let labels = [("resource", *r), ("strategy", *s), ("source", source)];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        for (pick, (name, help)) in PLAIN.iter().enumerate() {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (r, s, m) in &snapshots {
                let n = [m.conflicts, m.retries, m.throttled, m.rebased][pick];
                let labels = [("resource", *r), ("strategy", *s)];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_write_fallbacks",
            "Writes that sent another request than their strategy's usual one, by reason: apply's guarded patch (guarded_patch), guarded's resourceVersion-preconditioned patch past the server's JSON-patch operation limit (operation_limit).",
            None,
            MetricType::Counter,
        )?;
        for (r, s, m) in &snapshots {
            for reason in Fallback::ALL {
                let labels = [
                    ("resource", *r),
                    ("strategy", *s),
                    ("reason", reason.as_str()),
                ];
                ConstCounter::new(m.fallbacks(reason)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_write_duration_seconds",
            "Latency of logical writes, retries included.",
            None,
            MetricType::Histogram,
        )?;
        for (r, s, m) in &snapshots {
            // Per-bucket counts; the encoder makes them cumulative.
            let mut buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
                .iter()
                .zip(&m.latency_buckets)
                .map(|(bound, n)| (*bound, *n))
                .collect();
            buckets.push((f64::INFINITY, m.latency_buckets[LATENCY_BUCKETS.len()]));
            let count = buckets.iter().map(|(_, n)| n).sum();
            let labels = [("resource", *r), ("strategy", *s)];
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(
                    m.latency_micros as f64 / 1e6,
                    count,
                    &buckets,
                    None,
                )?;
        }
        Ok(())
    }
}
