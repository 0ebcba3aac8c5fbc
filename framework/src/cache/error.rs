//! Why a read of the shared caches failed ([`CacheError`]).

/// Why a read of the shared caches failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// No cache holds this resource: no controller of it, no
    /// [`watches`](crate::manager::ControllerBuilder::watches) of it and no
    /// [`Manager::cache`](crate::Manager::cache) for it. Nothing falls
    /// back to the API server: a read that would `GET` or `LIST` on every
    /// reconcile is a decision for the author, made with the client.
    #[error(
        "no shared cache holds {resource}: add a controller for it, watch it with `.watches(..)`, or call `Manager::cache` before the manager runs"
    )]
    NoCache {
        /// The resource, as `plural.group`.
        resource: String,
    },
    /// The cache has no index of this name.
    #[error(
        "cache {cache} has no index `{index}` (it has: {known:?}); add it with `Manager::index`"
    )]
    UnknownIndex {
        /// The cache, as its readiness check names it.
        cache: String,
        /// The index asked for.
        index: String,
        /// The indexes it has.
        known: Vec<String>,
    },
    /// A label selector did not parse.
    #[error("label selector `{selector}`: {why}")]
    Selector {
        /// The selector given.
        selector: String,
        /// What is wrong with it.
        why: String,
    },
}
