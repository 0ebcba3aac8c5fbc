//! How long a client of the webhook port may take, and how many may be
//! connected at once.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::WebhookError;

/// The header and body read timeouts a [`WebhookLimits`] accepts.
pub const READ_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(10)..=Duration::from_secs(300);
/// The connection limits a [`WebhookLimits`] accepts.
pub const MAX_CONNECTIONS_RANGE: RangeInclusive<usize> = 1..=65_536;

/// What bounds a client of the webhook server: how long it may take to
/// send a request's headers and body, and how many connections may be open
/// at once. Give it to
/// [`ManagerBuilder::with_webhook_limits`](crate::manager::ManagerBuilder::with_webhook_limits)
/// or [`WebhookServer::try_with_limits`](super::WebhookServer::try_with_limits).
///
/// | limit | default | accepted | past it |
/// | --- | --- | --- | --- |
/// | header read timeout | 10 s | 10 ms to 300 s ([`READ_TIMEOUT_RANGE`]) | the connection is closed |
/// | body read timeout | 30 s | 10 ms to 300 s ([`READ_TIMEOUT_RANGE`]) | a 408, then the connection is closed |
/// | connections | 256 | 1 to 65,536 ([`MAX_CONNECTIONS_RANGE`]) | further clients wait in the listen backlog |
///
/// Nothing is clamped: a value outside its range is refused, with every
/// such value named at once, when the limits are used.
///
/// ```
/// use std::time::Duration;
/// use concord::webhook::WebhookLimits;
/// let limits = WebhookLimits::new()
///     .with_header_read_timeout(Duration::from_secs(2))
///     .with_body_read_timeout(Duration::from_secs(5))
///     .with_max_connections(64);
/// assert!(limits.validate().is_ok());
/// assert!(WebhookLimits::new().with_max_connections(0).validate().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct WebhookLimits {
    pub(crate) header_read: Duration,
    pub(crate) body_read: Duration,
    pub(crate) connections: usize,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        WebhookLimits {
            header_read: Duration::from_secs(10),
            body_read: Duration::from_secs(30),
            connections: 256,
        }
    }
}

impl WebhookLimits {
    /// The defaults of the table above.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a client may take to send a request's headers, from the
    /// moment the connection is ready for one.
    pub fn with_header_read_timeout(mut self, limit: Duration) -> Self {
        self.header_read = limit;
        self
    }

    /// How long a client may take to send a request's body once its
    /// headers are in.
    pub fn with_body_read_timeout(mut self, limit: Duration) -> Self {
        self.body_read = limit;
        self
    }

    /// How many connections may be open at once.
    pub fn with_max_connections(mut self, limit: usize) -> Self {
        self.connections = limit;
        self
    }

    /// The header read timeout.
    pub fn header_read_timeout(&self) -> Duration {
        self.header_read
    }

    /// The body read timeout.
    pub fn body_read_timeout(&self) -> Duration {
        self.body_read
    }

    /// The connection limit.
    pub fn max_connections(&self) -> usize {
        self.connections
    }

    /// Checks every limit against its accepted range.
    ///
    /// # Errors
    ///
    /// [`WebhookError::Limits`] naming every limit out of its range.
    pub fn validate(&self) -> Result<(), WebhookError> {
        let mut problems = Vec::new();
        for (what, value) in [
            ("header read timeout", self.header_read),
            ("body read timeout", self.body_read),
        ] {
            if !READ_TIMEOUT_RANGE.contains(&value) {
                problems.push(format!(
                    "the {what} must be from {:?} to {:?}, found {value:?}",
                    READ_TIMEOUT_RANGE.start(),
                    READ_TIMEOUT_RANGE.end()
                ));
            }
        }
        if !MAX_CONNECTIONS_RANGE.contains(&self.connections) {
            problems.push(format!(
                "the connection limit must be from {} to {}, found {}",
                MAX_CONNECTIONS_RANGE.start(),
                MAX_CONNECTIONS_RANGE.end(),
                self.connections
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(WebhookError::Limits(problems))
        }
    }

    /// The server's limits, once validated.
    pub(crate) fn to_limits(self) -> Result<crate::serve::Limits, WebhookError> {
        self.validate()?;
        Ok(crate::serve::Limits {
            header_read: self.header_read,
            body_read: self.body_read,
            connections: self.connections,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(limits: WebhookLimits) -> Vec<String> {
        match limits.validate() {
            Ok(()) => Vec::new(),
            Err(WebhookError::Limits(problems)) => problems,
            Err(other) => panic!("unexpected error {other}"),
        }
    }

    #[test]
    fn validate_accepts_the_defaults_and_the_bounds() {
        assert!(problems(WebhookLimits::new()).is_empty());
        let lowest = WebhookLimits::new()
            .with_header_read_timeout(*READ_TIMEOUT_RANGE.start())
            .with_body_read_timeout(*READ_TIMEOUT_RANGE.start())
            .with_max_connections(*MAX_CONNECTIONS_RANGE.start());
        assert!(problems(lowest).is_empty());
        let highest = WebhookLimits::new()
            .with_header_read_timeout(*READ_TIMEOUT_RANGE.end())
            .with_body_read_timeout(*READ_TIMEOUT_RANGE.end())
            .with_max_connections(*MAX_CONNECTIONS_RANGE.end());
        assert!(problems(highest).is_empty());
    }

    #[test]
    fn validate_names_every_limit_out_of_range() {
        let cases: &[(WebhookLimits, &[&str])] = &[
            (
                WebhookLimits::new().with_header_read_timeout(Duration::ZERO),
                &["the header read timeout must be from 10ms to 300s, found 0ns"],
            ),
            (
                WebhookLimits::new().with_body_read_timeout(Duration::from_secs(301)),
                &["the body read timeout must be from 10ms to 300s, found 301s"],
            ),
            (
                WebhookLimits::new().with_max_connections(usize::MAX),
                &[&format!(
                    "the connection limit must be from 1 to 65536, found {}",
                    usize::MAX
                )],
            ),
            (
                WebhookLimits::new()
                    .with_header_read_timeout(Duration::from_millis(9))
                    .with_body_read_timeout(Duration::from_secs(3600))
                    .with_max_connections(0),
                &[
                    "the header read timeout must be from 10ms to 300s, found 9ms",
                    "the body read timeout must be from 10ms to 300s, found 3600s",
                    "the connection limit must be from 1 to 65536, found 0",
                ],
            ),
        ];
        for (limits, expected) in cases {
            assert_eq!(problems(*limits), *expected, "{limits:?}");
        }
    }

    #[test]
    fn the_error_lists_every_problem() {
        let error = WebhookLimits::new()
            .with_header_read_timeout(Duration::ZERO)
            .with_max_connections(0)
            .validate()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid webhook server limits: the header read timeout must be from 10ms to 300s, \
             found 0ns; the connection limit must be from 1 to 65536, found 0"
        );
    }
}
