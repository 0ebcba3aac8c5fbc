use std::time::Duration;

/// What an optimistic-lock strategy (`strict`, `update`) does when the API
/// server answers `409 Conflict`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConflictPolicy {
    /// Re-read the object, re-apply the mutation and try again, within the
    /// bounds of the [`RetryPolicy`].
    Retry(RetryPolicy),
    /// Hand the conflict back to the caller at once, so the controller
    /// requeues the object with backoff and reconciles it afresh.
    Requeue,
}

impl Default for ConflictPolicy {
    fn default() -> Self {
        ConflictPolicy::Retry(RetryPolicy::default())
    }
}

/// Bounded exponential backoff with jitter between conflict retries.
///
/// The defaults are client-go's `retry.DefaultRetry`: 5 steps starting at
/// 10 ms, factor 1.0, jitter 0.1.
///
/// ```
/// use concord_featuregates::RetryPolicy;
/// let policy = RetryPolicy::default();
/// assert_eq!(policy.steps, 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// How many attempts in all, the first one included.
    pub steps: u32,
    /// The wait before the first retry.
    pub initial: Duration,
    /// The multiplier applied to the wait after every retry.
    pub factor: f64,
    /// The random fraction added to every wait: a wait `d` becomes a value
    /// in `d ..= d * (1 + jitter)`.
    pub jitter: f64,
    /// The longest single wait.
    pub cap: Duration,
}

impl RetryPolicy {
    /// The default for transient failures (`429`, `5xx`) of a write, which
    /// only the write strategy retries: 16 attempts (15 retries, as kube's
    /// client retry layer allows), waits doubling from 5 ms with jitter 0.1
    /// up to 10 s, each raised to the server's `Retry-After` within that cap.
    ///
    /// ```
    /// use concord_featuregates::RetryPolicy;
    /// assert_eq!(RetryPolicy::transient().steps, 16);
    /// ```
    pub fn transient() -> Self {
        RetryPolicy {
            steps: 16,
            initial: Duration::from_millis(5),
            factor: 2.0,
            jitter: 0.1,
            cap: Duration::from_secs(10),
        }
    }

    /// A policy with the given number of steps and client-go's other defaults.
    #[must_use]
    pub fn with_steps(mut self, steps: u32) -> Self {
        self.steps = steps;
        self
    }

    /// The wait before retry number `retry` (0-based), before jitter.
    pub fn base_delay(&self, retry: u32) -> Duration {
        let factor = self.factor.max(1.0).powi(retry.min(64) as i32);
        let secs = (self.initial.as_secs_f64() * factor).min(self.cap.as_secs_f64());
        Duration::from_secs_f64(secs.max(0.0))
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            steps: 5,
            initial: Duration::from_millis(10),
            factor: 1.0,
            jitter: 0.1,
            cap: Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_client_go_default_retry() {
        let p = RetryPolicy::default();
        assert_eq!(
            (p.steps, p.initial, p.factor, p.jitter),
            (5, Duration::from_millis(10), 1.0, 0.1)
        );
        assert_eq!(p.base_delay(3), Duration::from_millis(10));
    }

    #[test]
    fn base_delay_grows_and_is_capped() {
        let p = RetryPolicy {
            factor: 2.0,
            cap: Duration::from_millis(50),
            ..RetryPolicy::default()
        };
        assert_eq!(p.base_delay(1), Duration::from_millis(20));
        assert_eq!(p.base_delay(10), Duration::from_millis(50));
    }
}
