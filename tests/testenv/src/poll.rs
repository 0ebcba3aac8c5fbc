//! Waiting for a condition the cluster reaches in its own time.

use std::time::{Duration, Instant};

use crate::Error;

/// Polls `check` every 50 ms until it answers `true` or `limit` has passed.
pub(crate) async fn poll<F, Fut>(what: &str, limit: Duration, mut check: F) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, Error>>,
{
    let start = Instant::now();
    loop {
        if check().await? {
            return Ok(());
        }
        if start.elapsed() > limit {
            return Err(Error::Timeout {
                what: what.into(),
                seconds: limit.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
