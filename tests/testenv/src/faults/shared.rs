//! What the proxy's connections share: the schedule's matcher, the
//! upstream client, the report of faults injected, crashes, and activity.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use crate::faults::crashes::Crashes;
use crate::faults::matcher::Matcher;
use crate::faults::{Fault, FaultReport};

pub(crate) struct Shared {
    pub(crate) matcher: Matcher,
    pub(crate) upstream: kube::Client,
    pub(crate) started: Instant,
    pub(crate) report: Mutex<FaultReport>,
    pub(crate) crashes: Crashes,
    pub(crate) last_activity_ms: AtomicU64,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) held_events: AtomicUsize,
}

impl Shared {
    pub(crate) fn record(&self, fault: &Fault, target: &str) {
        self.report
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .record(self.started, fault, target);
    }

    pub(crate) fn touch(&self) {
        let now = self.started.elapsed().as_millis() as u64;
        self.last_activity_ms.fetch_max(now, Relaxed);
    }

    pub(crate) fn report_passed(&self) {
        self.report
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .passed += 1;
    }
}
