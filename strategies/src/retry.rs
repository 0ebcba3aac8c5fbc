//! Classifying API answers and waiting between attempts.

use std::time::Duration;

use concord_featuregates::RetryPolicy;
use rand::Rng;

/// What an error answer means for the strategy that got it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// 409: someone wrote first.
    Conflict,
    /// 404: the object is gone.
    NotFound,
    /// 422 (or 400 from a failed JSON-patch `test`): the body did not fit
    /// the object; a guard may have tripped.
    Invalid,
    /// 429 or 5xx: try again later, after at least this long if the server
    /// said so.
    Transient(Option<Duration>),
    /// Anything else the server answered (400, 401, 403, 405, 410, ...).
    Permanent,
    /// No answer: connection or decoding failure.
    Transport,
}

/// Classify a client error.
pub(crate) fn classify(err: &kube::Error) -> Class {
    let kube::Error::Api(status) = err else {
        return Class::Transport;
    };
    let retry_after = status
        .details
        .as_ref()
        .map(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(u64::from(s)));
    match status.code {
        409 => Class::Conflict,
        404 => Class::NotFound,
        422 => Class::Invalid,
        429 | 500 | 502 | 503 | 504 => Class::Transient(retry_after),
        _ => Class::Permanent,
    }
}

/// The wait before retry `retry` (0-based): the policy's delay with jitter,
/// raised to the server's Retry-After if that is longer, never beyond the
/// policy's cap.
pub(crate) fn delay(policy: &RetryPolicy, retry: u32, retry_after: Option<Duration>) -> Duration {
    let base = policy.base_delay(retry);
    let jitter = if policy.jitter > 0.0 {
        base.mul_f64(rand::rng().random_range(0.0..=policy.jitter))
    } else {
        Duration::ZERO
    };
    let wait = (base + jitter).max(retry_after.unwrap_or_default());
    wait.min(policy.cap.max(policy.initial))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("x", "y").with_code(code).boxed())
    }

    #[test]
    fn classify_separates_retryable_from_permanent_answers() {
        let table = [
            (409, Class::Conflict),
            (404, Class::NotFound),
            (422, Class::Invalid),
            (429, Class::Transient(None)),
            (503, Class::Transient(None)),
            (400, Class::Permanent),
            (403, Class::Permanent),
        ];
        for (code, class) in table {
            assert_eq!(classify(&api(code)), class, "code {code}");
        }
    }

    #[test]
    fn classify_reads_retry_after() {
        let status = Status::failure("slow down", "TooManyRequests")
            .with_code(429)
            .with_details(kube::core::response::StatusDetails {
                name: String::new(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: vec![],
                retry_after_seconds: 2,
            });
        let err = kube::Error::Api(status.boxed());
        assert_eq!(
            classify(&err),
            Class::Transient(Some(Duration::from_secs(2)))
        );
    }

    #[test]
    fn delay_honours_retry_after_but_stays_under_the_cap() {
        let policy = RetryPolicy::default();
        let d = delay(&policy, 0, None);
        assert!(d >= Duration::from_millis(10) && d <= Duration::from_millis(11));
        assert_eq!(
            delay(&policy, 0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(delay(&policy, 0, Some(Duration::from_secs(60))), policy.cap);
    }
}
