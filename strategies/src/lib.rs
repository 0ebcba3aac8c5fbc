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
//! The crate is in layers, each a folder, from the top down; a layer
//! imports only the ones below it (checked by the test
//! `the_strategies_layers_import_only_downward` of `tests/layout`):
//!
//! - `strategy/`: the sealed [`WriteStrategy`] trait and the six
//!   strategies, each a plan read from its
//!   [`StrategyDescription`](concord_featuregates::StrategyDescription);
//! - `runner/`: the one loop that carries every plan out (`plan.rs` says
//!   how its request is built, whether it reads first, what a conflict
//!   means; `write_loop.rs` starts each write and handles conflicts;
//!   `session.rs` sends), server-side apply's own loop, create and delete;
//! - `target/`: where a write goes ([`Target`]) and what it may use there:
//!   the watch cache it re-reads from, the turns and locks of its writers;
//! - `body/`: the bytes each strategy sends;
//! - `model/`: the model of a change: a [`Mutation`] of [`Intent`]s or a
//!   closure, what it changed, and how that lands on a newer copy;
//! - `wire/`: retrying transient failures, the server's version, metrics.
//!
//! Beside them, `writer.rs` (the typed [`Writer`]) sits on top, and
//! `error.rs`, `outcome.rs` and `object_key.rs` are the words every layer
//! shares.
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

mod body;
mod error;
#[cfg(test)]
mod mock;
mod model;
mod object_key;
mod outcome;
mod runner;
mod strategy;
mod target;
mod wire;
mod writer;

#[doc(inline)]
pub use strategy::apply::Apply;
// A fault-injection hook for concord's own tests: kept off the API docs.
#[doc(inline)]
pub use concord_featuregates::{ConflictPolicy, Operation, RetryPolicy, StrategyName};
#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use model::intent::{Condition, Intent};
#[doc(inline)]
pub use model::mutation::Mutation;
#[doc(inline)]
pub use model::observed::Observed;
#[doc(inline)]
pub use object_key::ObjectKey;
#[doc(inline)]
pub use outcome::{Fallback, Outcome, Verb, Written};
#[doc(inline)]
pub use strategy::by_name::{strategy_for, try_strategy_for};
#[doc(inline)]
pub use strategy::guarded::Guarded;
#[doc(inline)]
pub use strategy::lax::Lax;
#[doc(inline)]
pub use strategy::locked::Locked;
#[doc(inline)]
pub use strategy::strict::Strict;
#[doc(inline)]
pub use strategy::update::Update;
#[doc(inline)]
pub use strategy::write_strategy::WriteStrategy;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use target::before_write::BeforeWrite;
#[doc(inline)]
pub use target::fresh::{DEFAULT_FRESH_WAIT, FreshCopies, cached_copy, is_newer};
#[doc(inline)]
pub use target::lock_table::{LockGuard, LockTable};
#[doc(inline)]
pub use target::settings::{DEFAULT_FIELD_MANAGER, Target};
#[doc(inline)]
pub use target::turns::WriteTurns;
#[doc(inline)]
pub use wire::metrics::{LATENCY_BUCKETS, MetricsSnapshot, WriteMetrics};
#[doc(inline)]
pub use wire::retry::{RetriedByStrategy, retried_by_strategy};
#[doc(inline)]
pub use writer::Writer;
