use async_trait::async_trait;

use crate::ObjectKey;

/// A hook a strategy awaits after it has computed a write and before it
/// sends it.
///
/// Production code has no use for it. Tests use it to place a competing
/// write exactly between a strategy's read and its write, which turns a
/// race into a deterministic reproduction.
///
/// ```no_run
/// use async_trait::async_trait;
/// use concord_strategies::{BeforeWrite, ObjectKey};
///
/// #[derive(Debug)]
/// struct Announce;
///
/// #[async_trait]
/// impl BeforeWrite for Announce {
///     async fn before_write(&self, object: &ObjectKey, attempt: u32) {
///         println!("about to write {object}, attempt {attempt}");
///     }
/// }
/// ```
#[async_trait]
pub trait BeforeWrite: Send + Sync + std::fmt::Debug {
    /// Called before write attempt `attempt` (0-based, counted per call of
    /// [`WriteStrategy::write`](crate::WriteStrategy::write)) to `object`.
    async fn before_write(&self, object: &ObjectKey, attempt: u32);
}
