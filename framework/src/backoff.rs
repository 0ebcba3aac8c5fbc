//! How long a controller waits before reconciling a failed object again.

use std::time::Duration;

/// A per-object exponential backoff: the `n`th consecutive failure of one
/// object waits `base × 2ⁿ⁻¹`, at most `cap`, lengthened by up to
/// `jitter` of itself at random; a successful reconcile starts the object
/// over at `base`. Other objects are not slowed down.
///
/// The default is controller-runtime's default rate limiter per item: 5 ms
/// doubling to 1,000 s, no jitter.
///
/// ```
/// use std::time::Duration;
/// use concord::manager::Backoff;
/// let backoff = Backoff::exponential(Duration::from_millis(100), Duration::from_secs(60))
///     .with_jitter(0.1);
/// assert!(backoff.delay(3) >= Duration::from_millis(400));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[must_use]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::exponential(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

impl Backoff {
    /// `base` doubling per consecutive failure up to `cap`, without jitter.
    pub fn exponential(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap,
            jitter: 0.0,
        }
    }

    /// Lengthens each delay by a random share of itself up to `factor`
    /// (0.1: up to 10 % longer), so that objects failing together do not
    /// come back together. A delay is never shortened.
    pub fn with_jitter(mut self, factor: f64) -> Self {
        self.jitter = factor;
        self
    }

    /// The first delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The longest delay before jitter.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The jitter factor.
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// The wait after the `attempts`th consecutive failure (1 for the
    /// first).
    pub fn delay(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1);
        let delay = self
            .base
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(self.cap);
        if self.jitter > 0.0 && self.jitter.is_finite() {
            delay.saturating_add(delay.mul_f64(rand::random::<f64>() * self.jitter))
        } else {
            delay
        }
    }

    /// Why this backoff cannot be used, if it cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.base.is_zero() {
            return Some(
                "its base is zero: a failing object would be retried in a busy loop".into(),
            );
        }
        if self.base > self.cap {
            return Some(format!(
                "its base {:?} is longer than its cap {:?}",
                self.base, self.cap
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Some(format!("its jitter {} is outside 0 to 1", self.jitter));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap() {
        let backoff = Backoff::default();
        assert_eq!(backoff.delay(1), Duration::from_millis(5));
        assert_eq!(backoff.delay(2), Duration::from_millis(10));
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(1000));
        assert_eq!(backoff.delay(0), Duration::from_millis(5));
    }

    #[test]
    fn jitter_only_lengthens() {
        let backoff =
            Backoff::exponential(Duration::from_secs(1), Duration::from_secs(8)).with_jitter(0.5);
        for attempts in 1..10 {
            let plain = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(8))
                .delay(attempts);
            let jittered = backoff.delay(attempts);
            assert!(
                jittered >= plain && jittered <= plain.mul_f64(1.5),
                "{jittered:?}"
            );
        }
    }

    #[test]
    fn impossible_backoffs_are_named() {
        assert!(Backoff::default().problem().is_none());
        assert!(
            Backoff::exponential(Duration::ZERO, Duration::from_secs(1))
                .problem()
                .is_some()
        );
        assert!(
            Backoff::exponential(Duration::from_secs(2), Duration::from_secs(1))
                .problem()
                .is_some()
        );
        assert!(Backoff::default().with_jitter(f64::NAN).problem().is_some());
        assert!(Backoff::default().with_jitter(-0.1).problem().is_some());
    }
}
