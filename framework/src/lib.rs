//! concord: a Kubernetes operator framework whose reconcilers state intent
//! while a configurable write strategy decides how each write is sent.
//!
//! # Contents
//!
//! What an author uses on day one is at the root:
//!
//! | item | what it is |
//! | --- | --- |
//! | [`Manager`] | loads configuration, connects, runs controllers, serves metrics and health, elects a leader, shuts down gracefully |
//! | [`ManagerArgs`] | controller-runtime style flags, to flatten into a clap parser |
//! | [`Reconciler`] | the author's logic for one resource type |
//! | [`Context`] | what a reconcile gets: intent-level writes through the configured strategy, cached reads, events, children |
//! | [`Intent`], [`Mutation`], [`Condition`] | what a reconciler asks to change |
//! | [`finalizer()`] | the add / clean up / remove finalizer lifecycle |
//! | [`Predicate`] | which changes of an object wake its controller |
//! | [`Object`] | what a resource type needs to be reconciled |
//! | [`Action`], [`EventType`], [`Error`], [`WriteError`] | what a reconcile returns, and what can fail |
//! | [`view!`] | declares a Rust type holding only the fields a controller reads a view of a resource, safe to write from under every strategy |
//!
//! The rest lives in named modules:
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`manager`] | the manager's and a controller's builders, error policy ([`Backoff`](manager::Backoff)), leader election |
//! | [`cache`] | the shared watch caches: what they leave out ([`CacheTrim`](cache::CacheTrim)), how they hold objects ([`CacheLayout`](cache::CacheLayout)), reading them |
//! | [`context`], [`writes`] | owner references; a resource type's writers |
//! | [`finalizer`](mod@finalizer) | the finalizer lifecycle's events and errors |
//! | [`metrics`], [`client`] | the metrics registry and its content types; the counting, throttle-aware client |
//! | [`memory`] | when the manager gives free memory back to the system |
//! | [`sharding`] | objects divided among replicas over membership Leases (`--shards`, `--shard-by`) |
//! | [`rbac`] | the least RBAC rules an operator needs, derived from its strategy table |
//! | [`object`] | the trait bounds of cached types |
//! | [`webhook`] | validating, defaulting and conversion webhooks the manager serves over HTTPS |
//! | [`testing`] | running a manager in a test |
//! | [`featuregates`], [`strategies`] | the crates underneath, re-exported |
//!
//! # Guarantees
//!
//! Reconciler code never names a strategy: every write made through
//! [`Context`] goes through the strategy the YAML table resolved for its
//! resource and operation, so changing only the configuration changes how
//! every write is sent.

mod args;
mod backoff;
pub mod cache;
pub mod client;
pub mod context;
mod controller;
mod error;
pub mod finalizer;
mod health;
mod http;
mod leader;
pub mod manager;
pub mod memory;
pub mod metrics;
pub mod object;
mod own_writes;
mod predicate;
pub mod rbac;
mod reconciler;
mod runner;
mod secure;
mod selector;
mod serve;
pub mod sharding;
mod task;
mod view;
pub mod writes;

pub mod testing;
pub mod webhook;

#[doc(inline)]
pub use args::ManagerArgs;
#[doc(inline)]
pub use context::Context;
#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use finalizer::finalizer;
#[doc(inline)]
pub use manager::Manager;
#[doc(inline)]
pub use object::Object;
#[doc(inline)]
pub use predicate::Predicate;
#[doc(inline)]
pub use reconciler::{Action, Reconciler};

pub use async_trait::async_trait;
pub use concord_featuregates as featuregates;
pub use concord_strategies as strategies;
pub use concord_strategies::{Condition, Error as WriteError, Intent, Mutation};
pub use kube;
pub use kube::runtime::events::EventType;
