//! The sharding metrics of one replica.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Counters and gauges of one replica's membership, registered with the
/// manager's metrics.
#[derive(Debug, Default)]
pub(crate) struct ShardStats {
    pub(crate) members: AtomicU64,
    pub(crate) keys_owned: AtomicU64,
    pub(crate) moves: AtomicU64,
    pub(crate) ring_version: AtomicU64,
    pub(crate) drain_micros_total: AtomicU64,
    pub(crate) drain_micros_last: AtomicU64,
    pub(crate) drains: AtomicU64,
    pub(crate) relabels: AtomicU64,
    pub(crate) refused_members: AtomicU64,
    pub(crate) selector_changes: AtomicU64,
    /// How objects are placed, once chosen at start.
    mode: OnceLock<&'static str>,
}

impl ShardStats {
    /// Records the placement mode chosen at start.
    pub(crate) fn set_mode(&self, mode: &'static str) {
        let _ = self.mode.set(mode);
    }

    /// The placement mode chosen at start; empty before.
    pub(crate) fn mode(&self) -> &'static str {
        self.mode.get().copied().unwrap_or_default()
    }
}

impl Collector for ShardStats {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // Counters are named without `_total`: the encoder appends it.
        let series = [
            (
                "concord_shard_members",
                MetricType::Gauge,
                "Live members of the shard ring this replica sees, itself included.",
                &self.members,
            ),
            (
                "concord_shard_keys_owned",
                MetricType::Gauge,
                "Objects in this replica's caches that it owns in the view it acknowledged.",
                &self.keys_owned,
            ),
            (
                "concord_shard_moves",
                MetricType::Counter,
                "Objects that moved to or from this replica when it acknowledged a new view.",
                &self.moves,
            ),
            (
                "concord_shard_ring_version",
                MetricType::Gauge,
                "How many views this replica has acknowledged in its Lease.",
                &self.ring_version,
            ),
            (
                "concord_shard_relabels",
                MetricType::Counter,
                "Objects this replica labelled with their shard as the sharder (label mode).",
                &self.relabels,
            ),
            (
                "concord_shard_refused_members",
                MetricType::Gauge,
                "Live Leases of this ring's name whose configuration differs and whose scope overlaps ours; while any, this replica reconciles nothing.",
                &self.refused_members,
            ),
            (
                "concord_shard_selector_changes",
                MetricType::Counter,
                "Times this replica's shard selector changed (selector mode), each restarting its sharded watches with a list of its new shard.",
                &self.selector_changes,
            ),
            (
                "concord_shard_drains",
                MetricType::Counter,
                "View changes this replica acknowledged.",
                &self.drains,
            ),
        ];
        for (name, kind, help, value) in series {
            let value = value.load(Relaxed);
            let metric = encoder.encode_descriptor(name, help, None, kind)?;
            if matches!(kind, MetricType::Counter) {
                ConstCounter::new(value).encode(metric)?;
            } else {
                ConstGauge::new(value).encode(metric)?;
            }
        }
        if let Some(mode) = self.mode.get() {
            let mut family = encoder.encode_descriptor(
                "concord_shard_mode",
                "How this replica's objects are placed (hash, label or selector): 1 for the mode chosen at start.",
                None,
                MetricType::Gauge,
            )?;
            let labels = [("mode", *mode)];
            let metric = family.encode_family(&labels)?;
            ConstGauge::new(1u64).encode(metric)?;
        }
        let metric = encoder.encode_descriptor(
            "concord_shard_drain_seconds",
            "Time from seeing a new view to acknowledging it (reconciles of lost keys drained).",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(self.drain_micros_total.load(Relaxed) as f64 / 1e6).encode(metric)?;
        let metric = encoder.encode_descriptor(
            "concord_shard_last_drain_seconds",
            "The last drain's duration.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(self.drain_micros_last.load(Relaxed) as f64 / 1e6).encode(metric)
    }
}
