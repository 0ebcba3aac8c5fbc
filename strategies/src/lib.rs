//! Write strategies for concord: how a reconciler's intended change reaches
//! the API server.
//!
//! A reconciler states *what* it wants changed as a [`Mutation`] of
//! [`Intent`]s; a [`WriteStrategy`] decides *how* it is sent:
//!
//! | strategy | on the wire | protects against | cost |
//! | --- | --- | --- | --- |
//! | [`Lax`] | merge patch from the observed object | nothing | 1 request |
//! | [`Strict`] | same patch + `resourceVersion` + `uid`; 409 → GET, retry | every writer | GET + PATCH per conflict |
//! | [`Update`] | PUT with `resourceVersion`; 409 → GET, retry | every writer | full object on the wire |
//! | [`Locked`] | in-process mutex around GET → merge patch | tasks of this process only | GET per write, serialised |
//! | [`Apply`] | server-side apply, a field manager per intent | every writer | managedFields; typed intents only |
//! | [`Guarded`] | strategic-merge finalizer directives, or a JSON patch `test`ing exactly the paths it writes; always the uid | every writer, for every field it writes | 1 request unless another writer touched the same field |
//!
//! Every strategy describes its write as a plan (`plan.rs`: how its
//! request is built, whether it reads first, what a conflict means) and one
//! runner carries every plan out: `write_loop.rs` starts each write and
//! handles conflicts, `session.rs` sends and retries transient failures,
//! `request.rs` says how each request is built, `change.rs` what a typed
//! mutation changed.
//!
//! Pick one by name with [`try_strategy_for`] (or [`strategy_for`]), wrap it in a typed [`Writer`],
//! and read what each write cost in its [`Outcome`]; aggregate with
//! [`WriteMetrics`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use concord_strategies::{Intent, Mutation, StrategyName, ConflictPolicy, Writer, strategy_for};
//! use k8s_openapi::api::core::v1::Pod;
//!
//! let client = kube::Client::try_default().await?;
//! let pod: Pod = kube::Api::namespaced(client.clone(), "default").get("web-0").await?;
//! let writer = Writer::<Pod>::new(client, strategy_for(StrategyName::Strict, ConflictPolicy::default()));
//! writer.write(&pod, &Mutation::from(Intent::remove_finalizer("example.com/cleanup"))).await?;
//! # Ok(()) }
//! ```

mod align;
mod apply;
#[cfg(feature = "testing")]
mod before_write;
mod by_name;
mod carry;
mod change;
mod error;
mod field_manager;
mod fresh;
mod go_json;
mod guarded;
mod guarded_patch;
mod intent;
mod lax;
mod lock_table;
mod locked;
mod merge_patch;
mod metrics;
#[cfg(test)]
mod mock;
mod mutation;
mod object_key;
mod observed;
mod outcome;
mod plan;
mod request;
mod retry;
mod server_version;
mod session;
mod strategy;
mod strict;
mod subresource;
mod target;
mod turns;
mod update;
mod whole_objects;
mod write_loop;
mod writer;

#[doc(inline)]
pub use apply::Apply;
// A fault-injection hook for concord's own tests: kept off the API docs.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use before_write::BeforeWrite;
#[doc(inline)]
pub use by_name::{strategy_for, try_strategy_for};
#[doc(inline)]
pub use concord_featuregates::{ConflictPolicy, Operation, RetryPolicy, StrategyName};
#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use fresh::{DEFAULT_FRESH_WAIT, FreshCopies, cached_copy, is_newer};
#[doc(inline)]
pub use guarded::Guarded;
#[doc(inline)]
pub use intent::{Condition, Intent};
#[doc(inline)]
pub use lax::Lax;
#[doc(inline)]
pub use lock_table::{LockGuard, LockTable};
#[doc(inline)]
pub use locked::Locked;
#[doc(inline)]
pub use metrics::{LATENCY_BUCKETS, MetricsSnapshot, WriteMetrics};
#[doc(inline)]
pub use mutation::Mutation;
#[doc(inline)]
pub use object_key::ObjectKey;
#[doc(inline)]
pub use observed::Observed;
#[doc(inline)]
pub use outcome::{Fallback, Outcome, Verb, Written};
#[doc(inline)]
pub use retry::{RetriedByStrategy, retried_by_strategy};
#[doc(inline)]
pub use strategy::WriteStrategy;
#[doc(inline)]
pub use strict::Strict;
#[doc(inline)]
pub use target::{DEFAULT_FIELD_MANAGER, Target};
#[doc(inline)]
pub use turns::WriteTurns;
#[doc(inline)]
pub use update::Update;
#[doc(inline)]
pub use writer::Writer;
