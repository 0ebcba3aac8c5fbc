//! Admission and conversion counts and latencies per webhook.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::handler::Outcome;

/// Upper bounds of the latency histogram, in seconds: fine below a
/// millisecond, where a webhook should answer.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Debug, Default)]
struct Counters {
    outcomes: [AtomicU64; 6],
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    micros: AtomicU64,
}

/// What the webhook server has answered, per webhook, in the Prometheus
/// text format: `concord_webhook_requests_total{webhook,outcome}` (outcome
/// `allowed`, `patched`, `denied`, `timed_out`, `invalid`, `error`) and the
/// histogram `concord_webhook_latency_seconds{webhook}` of the time from a
/// request's body being read to its answer being ready.
///
/// A manager serving webhooks renders these on its own `/metrics`
/// (`--metrics-bind-address`) after its other series; the webhook server
/// also answers `GET /metrics` with them alone.
#[derive(Debug, Default)]
pub struct WebhookMetrics {
    webhooks: Mutex<BTreeMap<String, Arc<Counters>>>,
}

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

    /// Everything, in the Prometheus text format.
    pub fn render(&self) -> String {
        let map = self.webhooks.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP concord_webhook_requests_total Webhook requests answered, by outcome.\n# TYPE concord_webhook_requests_total counter"
        );
        for (name, counters) in map.iter() {
            for outcome in Outcome::ALL {
                let n = counters.outcomes[outcome.index()].load(Relaxed);
                let _ = writeln!(
                    out,
                    "concord_webhook_requests_total{{webhook=\"{name}\",outcome=\"{}\"}} {n}",
                    outcome.label()
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP concord_webhook_latency_seconds Time to answer a webhook request.\n# TYPE concord_webhook_latency_seconds histogram"
        );
        for (name, counters) in map.iter() {
            for (bucket, bound) in counters.buckets.iter().zip(BUCKETS) {
                let _ = writeln!(
                    out,
                    "concord_webhook_latency_seconds_bucket{{webhook=\"{name}\",le=\"{bound}\"}} {}",
                    bucket.load(Relaxed)
                );
            }
            let count = counters.count.load(Relaxed);
            let _ = writeln!(
                out,
                "concord_webhook_latency_seconds_bucket{{webhook=\"{name}\",le=\"+Inf\"}} {count}\n\
                 concord_webhook_latency_seconds_sum{{webhook=\"{name}\"}} {}\n\
                 concord_webhook_latency_seconds_count{{webhook=\"{name}\"}} {count}",
                counters.micros.load(Relaxed) as f64 / 1e6
            );
        }
        out
    }
}
