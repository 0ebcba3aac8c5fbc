//! The sharding metrics of one replica.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters and gauges of one replica's membership, rendered beside the
/// manager's other metrics.
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
}

impl ShardStats {
    /// Appends the metrics in the Prometheus text format.
    pub(crate) fn render(&self, out: &mut String) {
        let gauges = [
            (
                "concord_shard_members",
                "gauge",
                "Live members of the shard ring this replica sees, itself included.",
                self.members.load(Relaxed),
            ),
            (
                "concord_shard_keys_owned",
                "gauge",
                "Objects in this replica's caches that it owns in the view it acknowledged.",
                self.keys_owned.load(Relaxed),
            ),
            (
                "concord_shard_moves_total",
                "counter",
                "Objects that moved to or from this replica when it acknowledged a new view.",
                self.moves.load(Relaxed),
            ),
            (
                "concord_shard_ring_version",
                "gauge",
                "How many views this replica has acknowledged in its Lease.",
                self.ring_version.load(Relaxed),
            ),
            (
                "concord_shard_relabels_total",
                "counter",
                "Objects this replica labelled with their shard as the sharder (label mode).",
                self.relabels.load(Relaxed),
            ),
            (
                "concord_shard_refused_members",
                "gauge",
                "Live Leases of this ring's name whose configuration differs and whose scope overlaps ours; while any, this replica reconciles nothing.",
                self.refused_members.load(Relaxed),
            ),
            (
                "concord_shard_drains_total",
                "counter",
                "View changes this replica acknowledged.",
                self.drains.load(Relaxed),
            ),
        ];
        for (name, kind, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name} {value}");
        }
        let _ = writeln!(
            out,
            "# HELP concord_shard_drain_seconds_total Time from seeing a new view to acknowledging it (reconciles of lost keys drained)."
        );
        let _ = writeln!(out, "# TYPE concord_shard_drain_seconds_total counter");
        let _ = writeln!(
            out,
            "concord_shard_drain_seconds_total {}",
            self.drain_micros_total.load(Relaxed) as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "# HELP concord_shard_last_drain_seconds The last drain's duration."
        );
        let _ = writeln!(out, "# TYPE concord_shard_last_drain_seconds gauge");
        let _ = writeln!(
            out,
            "concord_shard_last_drain_seconds {}",
            self.drain_micros_last.load(Relaxed) as f64 / 1e6
        );
    }
}
