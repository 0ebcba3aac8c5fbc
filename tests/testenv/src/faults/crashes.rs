//! The crash state the proxy and the supervisor share.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

use tokio::sync::watch;

/// The proxy's side of crashes: which connections belong to a dead
/// incarnation of the operator.
#[derive(Debug)]
pub(crate) struct Crashes {
    epoch: AtomicU64,
    crashing: AtomicBool,
    pub(crate) supervised: AtomicBool,
    pub(crate) signal: watch::Sender<u64>,
}

impl Default for Crashes {
    fn default() -> Self {
        Crashes {
            epoch: AtomicU64::new(0),
            crashing: AtomicBool::new(false),
            supervised: AtomicBool::new(false),
            signal: watch::channel(0).0,
        }
    }
}

impl Crashes {
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(SeqCst)
    }

    pub(crate) fn crashing(&self) -> bool {
        self.crashing.load(SeqCst)
    }

    /// Whether a connection accepted in `epoch` belongs to a dead operator.
    pub(crate) fn dead(&self, epoch: u64) -> bool {
        self.crashing() || epoch != self.epoch()
    }

    /// Crashes the supervised operator; `false` when there is none.
    pub(crate) fn fire(&self) -> bool {
        if !self.supervised.load(SeqCst) {
            return false;
        }
        self.crashing.store(true, SeqCst);
        self.epoch.fetch_add(1, SeqCst);
        self.signal.send_modify(|n| *n += 1);
        true
    }

    /// The old incarnation is gone: connections opened while it was dying
    /// are refused too, new ones are served.
    pub(crate) fn restarted(&self) {
        self.epoch.fetch_add(1, SeqCst);
        self.crashing.store(false, SeqCst);
    }
}
