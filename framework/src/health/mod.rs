//! What `/healthz` and `/readyz` answer: named checks, reported as the
//! Kubernetes components do (`[+]name ok` / `[-]name reason`, one a line,
//! with `?verbose` or on failure).
//!
//! Readiness (`readiness.rs`) is a set of named flags the manager's parts
//! turn on: each shared cache when its first list is in, the webhook server
//! when it serves, a sharded replica when it has joined its ring. Liveness
//! (`watchdog.rs`) is a task that ticks; a tick older than its bound means
//! the runtime no longer schedules tasks in time.

mod answer;
mod readiness;
mod watchdog;

pub(crate) use answer::{Line, answer, wants_verbose};
pub(crate) use readiness::Readiness;
pub(crate) use watchdog::Watchdog;

use std::sync::Arc;

/// The checks behind the health port.
#[derive(Clone, Debug)]
pub(crate) struct Health {
    pub(crate) readiness: Readiness,
    pub(crate) watchdog: Arc<Watchdog>,
}
