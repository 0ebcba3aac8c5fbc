use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::answer::Line;

/// A task's heartbeat: [`run`](Self::run) ticks every `every`; the check
/// fails once the last tick is older than `stale_after`, which happens when
/// the runtime's workers are all blocked or starved and tasks wait to be
/// polled.
#[derive(Debug)]
pub(crate) struct Watchdog {
    last: Mutex<Instant>,
    every: Duration,
    stale_after: Duration,
}

impl Watchdog {
    /// A watchdog that counts as ticked now.
    pub(crate) fn new(every: Duration, stale_after: Duration) -> Self {
        Watchdog {
            last: Mutex::new(Instant::now()),
            every,
            stale_after,
        }
    }

    /// Records a tick at `now`.
    fn tick(&self, now: Instant) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = now;
    }

    /// Ticks until the future is dropped.
    pub(crate) async fn run(&self) {
        loop {
            self.tick(Instant::now());
            tokio::time::sleep(self.every).await;
        }
    }

    /// The check's outcome at `now`.
    pub(crate) fn line(&self, now: Instant) -> Line {
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let age = now.saturating_duration_since(last);
        Line {
            name: "watchdog".into(),
            failure: (age > self.stale_after).then(|| {
                format!(
                    "last tick {:.1}s ago (limit {:.1}s): the runtime is stalled",
                    age.as_secs_f64(),
                    self.stale_after.as_secs_f64()
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_once_the_last_tick_is_older_than_its_bound() {
        let dog = Watchdog::new(Duration::from_secs(1), Duration::from_secs(10));
        let start = Instant::now();
        dog.tick(start);
        assert_eq!(dog.line(start + Duration::from_secs(10)).failure, None);
        let stale = dog.line(start + Duration::from_secs(12));
        assert_eq!(
            stale.failure.as_deref(),
            Some("last tick 12.0s ago (limit 10.0s): the runtime is stalled")
        );
        dog.tick(start + Duration::from_secs(12));
        assert_eq!(dog.line(start + Duration::from_secs(13)).failure, None);
    }

    #[tokio::test]
    async fn a_running_watchdog_keeps_ticking() {
        let dog = Watchdog::new(Duration::from_millis(10), Duration::from_secs(1));
        let start = Instant::now();
        tokio::select! {
            () = dog.run() => {}
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let last = *dog.last.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(last > start, "the watchdog ticked after it started");
    }
}
