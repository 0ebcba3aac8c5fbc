//! Giving the memory a program freed back to the system.
//!
//! glibc's malloc, the system allocator of most Linux binaries, keeps
//! what a program frees for reuse. A write pass over a large cache
//! replaces every cached object, so each old copy's block is freed while
//! the new copy is allocated elsewhere; blocks nothing reuses stay
//! resident while the heap stays the same size. The compact cache
//! allocates each entry once, at its exact size (a growing buffer shrunk
//! to fit left a small free block beside every entry, which at 10,000
//! Pods held a write pass's VmRSS at 1.33× its synced value rather than
//! 1.18×). `malloc_trim(0)` hands back every whole free page of every
//! arena. [`MemoryRelease::WhenIdle`] has the [`Manager`](crate::Manager)
//! call it once reconciles stop; [`release_free_memory`] calls it now.
//!
//! Other allocators (jemalloc, mimalloc, chosen by the binary with
//! `#[global_allocator]`) return memory on their own schedule; for them
//! the release is a no-op, as it is off glibc.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::metrics::Metrics;

/// When the manager gives the memory its allocator holds free back to the
/// system.
///
/// ```no_run
/// # async fn demo() -> Result<(), concord::Error> {
/// use std::time::Duration;
/// use concord::{Manager, memory::MemoryRelease};
///
/// let manager = Manager::builder("my-operator")
///     .with_memory_release(MemoryRelease::WhenIdle {
///         after: Duration::from_secs(5),
///     })
///     .build()
///     .await?;
/// # let _ = manager; Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryRelease {
    /// Never: freed memory stays with the allocator.
    Off,
    /// Once no reconcile has finished for `after` and none is in flight,
    /// after some ran since the last release: the end of the initial list,
    /// of a write pass, of a burst. On glibc only (elsewhere nothing
    /// happens); the call runs on one of the runtime's threads, which it
    /// holds for as long as it takes.
    WhenIdle {
        /// How long reconciles must have stopped.
        after: Duration,
    },
}

impl MemoryRelease {
    /// How long reconciles must stop before a release by default.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(1);
}

impl Default for MemoryRelease {
    /// [`MemoryRelease::WhenIdle`] after [`MemoryRelease::DEFAULT_IDLE`].
    fn default() -> Self {
        MemoryRelease::WhenIdle {
            after: Self::DEFAULT_IDLE,
        }
    }
}

/// Gives every whole free page glibc's arenas hold back to the system
/// (`malloc_trim(0)`); whether there was glibc to ask. It takes each
/// arena's lock in turn while it walks that arena's free blocks:
/// milliseconds for a heap of a hundred MiB.
///
/// ```no_run
/// if concord::memory::release_free_memory() {
///     println!("glibc released what it could");
/// }
/// ```
pub fn release_free_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        trim_glibc();
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_glibc() {
    // SAFETY: malloc_trim takes a byte count to keep and touches only
    // glibc's own free lists, under their locks; it has no precondition.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Releases free memory each time reconciles stop for `after` (see
/// [`MemoryRelease::WhenIdle`]). Runs until aborted.
pub(crate) async fn release_when_idle(metrics: Arc<Metrics>, after: Duration) {
    let (mut seen, _) = metrics.reconcile_activity();
    let mut released_at = seen;
    loop {
        tokio::time::sleep(after).await;
        let (finished, in_flight) = metrics.reconcile_activity();
        if finished == seen && in_flight == 0 && finished != released_at {
            let started = Instant::now();
            // On this runtime thread, not a blocking one: nothing else is
            // running (that is the condition), and a blocking-pool thread
            // would get an arena of its own and allocate to start.
            if release_free_memory() {
                let took = started.elapsed();
                metrics.memory_released(took);
                tracing::debug!(?took, "released free memory to the system");
            }
            released_at = finished;
        }
        seen = finished;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_is_asked_of_glibc_only() {
        assert_eq!(
            release_free_memory(),
            cfg!(all(target_os = "linux", target_env = "gnu"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_released_once_each_time_reconciles_stop() {
        let metrics = Arc::new(crate::metrics::tests::metrics());
        let counters = metrics.controller("pods");
        let idle = Duration::from_secs(1);
        let task = tokio::spawn(release_when_idle(metrics.clone(), idle));
        let glibc = u64::from(cfg!(all(target_os = "linux", target_env = "gnu")));
        let step = |seconds: u64| tokio::time::sleep(Duration::from_millis(seconds * 1000 + 500));

        // Nothing ran yet: nothing to release.
        step(3).await;
        assert_eq!(metrics.memory_releases().0, 0);
        // A reconcile in flight holds the release off, however long.
        counters
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        counters
            .ok
            .fetch_add(5, std::sync::atomic::Ordering::Relaxed);
        step(3).await;
        assert_eq!(metrics.memory_releases().0, 0);
        // Once it ends and nothing follows: one release, not one a second.
        counters
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        step(5).await;
        assert_eq!(metrics.memory_releases().0, glibc);
        // The next burst of reconciles ends in the next release.
        counters
            .errors
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        step(3).await;
        assert_eq!(metrics.memory_releases().0, 2 * glibc);
        task.abort();
    }

    #[test]
    fn the_default_releases_a_second_after_reconciles_stop() {
        assert_eq!(
            MemoryRelease::default(),
            MemoryRelease::WhenIdle {
                after: Duration::from_secs(1)
            }
        );
    }
}
