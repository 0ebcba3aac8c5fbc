//! One shared watch cache (a kube-runtime reflector store) per resource
//! type, scope and watch configuration: every controller of that type reads
//! it, [`Context::cached`](crate::Context::cached) reads it, and a write's
//! re-read after a conflict is served from it when it has caught up.
//!
//! The manager opens one watch per cache and namespace, not per
//! controller: controllers added for the same `Api<K>` scope (or namespace
//! set: one watch per namespace, one store), label and field selectors (the
//! sharding gate's label selector included) and trim subscribe to the same
//! stream.
//!
//! The first list comes as a streaming list (`sendInitialEvents`) where
//! the API server serves one, and in pages of 500 otherwise
//! (`streaming.rs`).
//!
//! Objects are stored trimmed ([`CacheTrim`], `trim.rs`), typed or as
//! compact JSON ([`CacheLayout`], `compact.rs`), and each
//! subscriber takes them from a queue that holds each object once and
//! only what the subscriber's predicate passes, judged against the copy
//! the store held before (`queue.rs`). The cache knows nothing of controllers: it hands out
//! queues and the task that drives the watch (`watch.rs`).

mod compact;
mod copies;
mod error;
mod index;
pub(crate) mod key;
mod lock;
mod packed;
mod projection;
mod queue;
mod reader;
mod registry;
mod selected;
mod selection;
mod shared;
mod size;
mod sizes;
mod store;
mod streaming;
mod trim;
mod watch;

pub use compact::CacheLayout;
pub(crate) use copies::CachedCopies;
pub use error::CacheError;
pub(crate) use index::{Index, Indexes, KeyFn};
use lock::lock;
pub(crate) use queue::{Announced, Fairness};
pub use reader::CacheReader;
pub(crate) use registry::{Caches, label_of};
pub(crate) use selection::Selection;
pub(crate) use shared::SharedCache;
pub(crate) use sizes::CacheSizes;
pub(crate) use store::{Objects, Synced, object_ref};
pub use store::{Store, StoreStopped};
pub use trim::{CacheTrim, LAST_APPLIED};

#[cfg(test)]
mod tests;
