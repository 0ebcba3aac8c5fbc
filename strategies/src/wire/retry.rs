//! How a transient error is retried: the one place that says so.
//!
//! A transient answer (`429 Too Many Requests`, `500`, `502`, `503`,
//! `504`) to a **write** is retried by the strategy's session, within the
//! target's transient [`RetryPolicy`]
//! ([`Target::with_transient_retry`](crate::Target::with_transient_retry)),
//! waiting the policy's backoff raised to the server's `Retry-After`
//! (header or `Status` details) and never beyond the policy's cap. Each
//! retry is counted once, in [`Outcome::retries`](crate::Outcome) (and
//! `throttled` for a `429`) and the write metrics. Every request a session
//! sends (its writes and its re-reads) carries the [`RetriedByStrategy`]
//! extension, and a client layer that retries by itself must leave such
//! requests alone: concord's `throttle_aware_client` does, so that a
//! throttled write is retried — and counted — in exactly one place.
//!
//! Everything else on the same client (the runtime's lists and watches,
//! `Context` reads, direct `Api` calls) carries no marker and is retried by
//! kube's client retry layer (`429`/`503`/`504`, honouring `Retry-After`),
//! counted in the framework's `concord_client_retried_responses_total`.
//!
//! A `409 Conflict` is not transient: how it is handled is in
//! `runner/write_loop.rs`.
//!
//! A write through a client whose own retry layer does not know the marker
//! (kube's default client, `Config::default_retry`) is retried by both
//! layers; give writers a client built by `throttle_aware_client` or with
//! `default_retry = false`.

use std::time::Duration;

use concord_featuregates::RetryPolicy;
use rand::Rng;
use serde_json::Value;

/// The marker, an [`http::Extensions`] entry, on every request a write
/// strategy sends: the strategy retries its transient failures and counts
/// them itself, so a client layer that retries must pass it through
/// untouched (see the module docs of `retry.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetriedByStrategy;

/// Whether `request` carries [`RetriedByStrategy`]: a retrying client
/// layer must neither retry nor count it.
pub fn retried_by_strategy<B>(request: &http::Request<B>) -> bool {
    request.extensions().get::<RetriedByStrategy>().is_some()
}

/// Send `request` once, marked [`RetriedByStrategy`]. On an error answer,
/// also the wait the server asked for in a `Retry-After` header (which
/// kube's error type does not carry).
pub(crate) async fn call(
    client: &kube::Client,
    mut request: http::Request<Vec<u8>>,
) -> Result<Value, (kube::Error, Option<Duration>)> {
    request.extensions_mut().insert(RetriedByStrategy);
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .map_err(|e| (e, None))?;
    let code = response.status();
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs);
    let bytes = response
        .into_body()
        .collect_bytes()
        .await
        .map_err(|e| (e, None))?;
    if code.is_client_error() || code.is_server_error() {
        let status = serde_json::from_slice::<kube::core::Status>(&bytes).unwrap_or_else(|_| {
            let text = String::from_utf8_lossy(&bytes);
            kube::core::Status::failure(text.trim(), "Failed to parse error data")
                .with_code(code.as_u16())
        });
        return Err((kube::Error::Api(status.boxed()), retry_after));
    }
    serde_json::from_slice(&bytes).map_err(|e| (kube::Error::SerdeError(e), None))
}

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
        // The object is missing only if the server says so; a bare 404
        // ("404 page not found") means the resource or version is not
        // served, which no retry and no "gone" can settle.
        404 if status.reason == "NotFound" => Class::NotFound,
        404 => Class::Permanent,
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
        let reason = if code == 404 { "NotFound" } else { "y" };
        kube::Error::Api(Status::failure("x", reason).with_code(code).boxed())
    }

    #[test]
    fn a_404_without_not_found_is_an_unserved_resource() {
        let err = kube::Error::Api(
            Status::failure("404 page not found", "Failed to parse error data")
                .with_code(404)
                .boxed(),
        );
        assert_eq!(classify(&err), Class::Permanent);
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
