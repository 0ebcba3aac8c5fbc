//! Admission and conversion counts and latencies per webhook.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::registry::Registry;

use super::handler::Outcome;

/// Upper bounds of the latency histogram, in seconds: fine below a
/// millisecond, where a webhook should answer.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Debug, Default)]
struct Counters {
    outcomes: [AtomicU64; 6],
    /// Cumulative: bucket `i` counts every request at most `BUCKETS[i]`.
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    micros: AtomicU64,
}

type ByWebhook = Arc<Mutex<BTreeMap<String, Arc<Counters>>>>;

/// What the webhook server has answered, per webhook:
/// `concord_webhook_requests_total{webhook,outcome}` (outcome `allowed`,
/// `patched`, `denied`, `timed_out`, `invalid`, `error`) and the histogram
/// `concord_webhook_latency_seconds{webhook}` of the time from a request's
/// body being read to its answer being ready.
///
/// A manager serving webhooks registers these with its own metrics
/// (`--metrics-bind-address`); the webhook server also answers
/// `GET /metrics` with them alone.
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    webhooks: ByWebhook,
}

/// The collector the manager registers: it reads the same counters.
#[derive(Debug)]
pub(crate) struct WebhookSeries(ByWebhook);

impl WebhookMetrics {
    fn counters(&self, webhook: &str) -> Arc<Counters> {
        let mut map = self.webhooks.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(webhook.to_owned()).or_default().clone()
    }

    pub(crate) fn record(&self, webhook: &str, outcome: Outcome, took: Duration) {
        let counters = self.counters(webhook);
        counters.outcomes[outcome.index()].fetch_add(1, Relaxed);
        let secs = took.as_secs_f64();
        for (bucket, bound) in counters.buckets.iter().zip(BUCKETS) {
            if secs <= bound {
                bucket.fetch_add(1, Relaxed);
            }
        }
        counters.count.fetch_add(1, Relaxed);
        counters
            .micros
            .fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Requests `webhook` answered with `outcome` (`allowed`, `patched`,
    /// `denied`, `timed_out`, `invalid`, `error`).
    pub fn requests(&self, webhook: &str, outcome: &str) -> u64 {
        let counters = self.counters(webhook);
        Outcome::ALL
            .iter()
            .find(|o| o.label() == outcome)
            .map_or(0, |o| counters.outcomes[o.index()].load(Relaxed))
    }

    /// The upper bound of the histogram bucket that holds quantile `q`
    /// (0 to 1) of `webhook`'s latencies; `None` before any request or
    /// beyond the last bucket.
    pub fn latency_quantile(&self, webhook: &str, q: f64) -> Option<Duration> {
        let counters = self.counters(webhook);
        let count = counters.count.load(Relaxed);
        if count == 0 {
            return None;
        }
        let wanted = (q.clamp(0.0, 1.0) * count as f64).ceil() as u64;
        counters
            .buckets
            .iter()
            .zip(BUCKETS)
            .find(|(bucket, _)| bucket.load(Relaxed) >= wanted)
            .map(|(_, bound)| Duration::from_secs_f64(bound))
    }

    /// The collector of these series, for a registry.
    pub(crate) fn collector(&self) -> WebhookSeries {
        WebhookSeries(self.webhooks.clone())
    }

    /// Everything, in the Prometheus text format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.collector()));
        crate::metrics::encode_text(&registry)
    }
}

impl Collector for WebhookSeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut family = encoder.encode_descriptor(
            "concord_webhook_requests",
            "Webhook requests answered, by outcome.",
            None,
            MetricType::Counter,
        )?;
        for (name, counters) in map.iter() {
            for outcome in Outcome::ALL {
                let n = counters.outcomes[outcome.index()].load(Relaxed);
                let labels = [("webhook", name.as_str()), ("outcome", outcome.label())];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_webhook_latency_seconds",
            "Time to answer a webhook request.",
            None,
            MetricType::Histogram,
        )?;
        for (name, counters) in map.iter() {
            // The counters are cumulative; the encoder wants each bucket's own.
            let mut below = 0;
            let mut buckets: Vec<(f64, u64)> = Vec::with_capacity(BUCKETS.len() + 1);
            for (bucket, bound) in counters.buckets.iter().zip(BUCKETS) {
                let cumulative = bucket.load(Relaxed);
                buckets.push((bound, cumulative.saturating_sub(below)));
                below = below.max(cumulative);
            }
            let count = counters.count.load(Relaxed);
            buckets.push((f64::INFINITY, count.saturating_sub(below)));
            let labels = [("webhook", name.as_str())];
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(
                    counters.micros.load(Relaxed) as f64 / 1e6,
                    count,
                    &buckets,
                    None,
                )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_stays_cumulative_in_the_text() {
        let metrics = WebhookMetrics::default();
        metrics.record("v", Outcome::ALL[0], Duration::from_micros(50));
        metrics.record("v", Outcome::ALL[0], Duration::from_millis(3));
        metrics.record("v", Outcome::ALL[0], Duration::from_secs(9));
        let text = metrics.render();
        for line in [
            "concord_webhook_latency_seconds_bucket{webhook=\"v\",le=\"0.0001\"} 1",
            "concord_webhook_latency_seconds_bucket{webhook=\"v\",le=\"0.0025\"} 1",
            "concord_webhook_latency_seconds_bucket{webhook=\"v\",le=\"0.005\"} 2",
            "concord_webhook_latency_seconds_bucket{webhook=\"v\",le=\"5\"} 2",
            "concord_webhook_latency_seconds_bucket{webhook=\"v\",le=\"+Inf\"} 3",
            "concord_webhook_latency_seconds_count{webhook=\"v\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
        assert_eq!(
            metrics.latency_quantile("v", 0.5),
            Some(Duration::from_secs_f64(0.005))
        );
    }
}
