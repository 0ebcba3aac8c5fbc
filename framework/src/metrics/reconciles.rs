//! The controllers' series: reconciles by result, in flight, and time spent.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Counters of one controller's reconciles.
#[derive(Debug, Default)]
pub(crate) struct ReconcileCounters {
    pub(crate) ok: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) in_flight: AtomicI64,
    pub(crate) seconds_micros: AtomicU64,
    /// Reconciles that waited for the cache to show the manager's own
    /// writes, and then ran.
    pub(crate) stale_waits: AtomicU64,
    /// Reconciles requeued because the cache did not catch up in time.
    pub(crate) stale_requeues: AtomicU64,
    /// Reconciles the manager's shutdown ended while they waited (they
    /// did not run).
    pub(crate) stale_stopped: AtomicU64,
    /// Microseconds those reconciles waited.
    pub(crate) stale_micros: AtomicU64,
}

/// Every controller's counters, read at each scrape.
#[derive(Debug, Default)]
pub(crate) struct ReconcileSeries {
    controllers: Mutex<BTreeMap<String, Arc<ReconcileCounters>>>,
}

impl ReconcileSeries {
    pub(crate) fn controller(&self, name: &str) -> Arc<ReconcileCounters> {
        let mut map = self
            .controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.entry(name.to_owned()).or_default().clone()
    }

    /// Reconciles finished (either result) and in flight, over every
    /// controller.
    pub(crate) fn activity(&self) -> (u64, i64) {
        let map = self
            .controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.values().fold((0, 0), |(finished, in_flight), c| {
            (
                finished + c.ok.load(Relaxed) + c.errors.load(Relaxed),
                in_flight + c.in_flight.load(Relaxed),
            )
        })
    }

    pub(crate) fn successes(&self, name: &str) -> u64 {
        let map = self
            .controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get(name).map_or(0, |c| c.ok.load(Relaxed))
    }
}

impl Collector for ReconcileSeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let map = self
            .controllers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut family = encoder.encode_descriptor(
            "concord_reconcile",
            "Reconciles by controller and result.",
            None,
            MetricType::Counter,
        )?;
        for (name, c) in map.iter() {
            for (result, n) in [("success", &c.ok), ("error", &c.errors)] {
                let labels = [("controller", name.as_str()), ("result", result)];
                ConstCounter::new(n.load(Relaxed)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_reconcile_in_flight",
            "Reconciles running now.",
            None,
            MetricType::Gauge,
        )?;
        for (name, c) in map.iter() {
            let labels = [("controller", name.as_str())];
            ConstGauge::new(c.in_flight.load(Relaxed)).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "concord_reconcile_seconds",
            "Time spent reconciling.",
            None,
            MetricType::Counter,
        )?;
        for (name, c) in map.iter() {
            let labels = [("controller", name.as_str())];
            let secs = c.seconds_micros.load(Relaxed) as f64 / 1e6;
            ConstCounter::new(secs).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "concord_reconcile_stale_cache",
            "Reconciles held back until the cache showed this manager's own last writes, by what followed: ran, requeued, or stopped (the manager shut down while they waited; they did not run).",
            None,
            MetricType::Counter,
        )?;
        for (name, c) in map.iter() {
            for (outcome, n) in [
                ("ran", &c.stale_waits),
                ("requeued", &c.stale_requeues),
                ("stopped", &c.stale_stopped),
            ] {
                let labels = [("controller", name.as_str()), ("outcome", outcome)];
                ConstCounter::new(n.load(Relaxed)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "concord_reconcile_stale_cache_wait_seconds",
            "Time reconciles waited for the cache to show this manager's own last writes.",
            None,
            MetricType::Counter,
        )?;
        for (name, c) in map.iter() {
            let labels = [("controller", name.as_str())];
            let secs = c.stale_micros.load(Relaxed) as f64 / 1e6;
            ConstCounter::new(secs).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
