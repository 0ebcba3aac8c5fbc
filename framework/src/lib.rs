//! concord: a Kubernetes operator framework whose reconcilers state intent
//! while a configurable write strategy decides how each write is sent.
//!
//! # Contents
//!
//! | item | what it is |
//! | --- | --- |
//! | [`Manager`] | loads configuration, connects, runs controllers, serves metrics and health, elects a leader, shuts down gracefully |
//! | [`Reconciler`] | the author's logic for one resource type |
//! | [`ControllerBuilder`] | a controller's label and field selectors, namespaces, [`Predicate`] and error policy ([`Backoff`]) |
//! | [`Context`] | what a reconcile gets: intent-level writes through the configured strategy, events, children |
//! | [`finalizer()`] | the add / clean up / remove finalizer lifecycle |
//! | [`CacheTrim`] | what the shared watch caches leave out of each object (by default `managedFields` and the last-applied annotation) |
//! | [`MemoryRelease`] | when the manager gives the allocator's free memory back to the system (glibc's `malloc_trim`, once reconciles stop) |
//! | [`CacheLayout`] | how the shared watch caches hold objects: as compact JSON decoded on each read (the default) or typed (`decoded`) |
//! | [`view!`] | declares a Rust type holding only the fields a controller reads a view of a resource, safe to write from under every strategy |
//! | [`ManagerArgs`] | controller-runtime style flags, to flatten into a clap parser |
//! | [`ShardingMode`], [`ShardKey`], [`ShardHandle`] | objects divided among replicas over membership Leases (`--shards`, `--shard-by`) |
//! | [`Permissions`] | the least RBAC rules an operator needs, derived from its strategy table |
//! | [`webhook`] | validating, defaulting and conversion webhooks the manager serves over HTTPS |
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
mod cache;
mod client;
mod context;
mod controller;
mod error;
mod finalizer;
mod health;
mod http;
mod leader;
mod manager;
mod memory;
mod metrics;
mod object;
mod own_writes;
mod predicate;
mod rbac;
mod reconciler;
mod secure;
mod selector;
mod serve;
mod sharding;
mod task;
mod view;
mod writes;

pub mod testing;
pub mod webhook;

#[doc(inline)]
pub use args::ManagerArgs;
#[doc(inline)]
pub use backoff::Backoff;
#[doc(inline)]
pub use cache::{
    CacheError, CacheLayout, CacheReader, CacheTrim, LAST_APPLIED, Store, StoreStopped,
};
#[doc(inline)]
pub use client::{ClientCounters, throttle_aware_client};
#[doc(inline)]
pub use context::{Context, owner_reference};
#[doc(inline)]
pub use controller::DEFAULT_CONCURRENCY;
#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use finalizer::{FinalizerError, Lifecycle, finalizer};
#[doc(inline)]
pub use leader::LeaderElectionConfig;
#[doc(inline)]
pub use manager::{Built, ControllerBuilder, Manager, ManagerBuilder, ShutdownHandle};
#[doc(inline)]
pub use memory::{MemoryRelease, release_free_memory};
#[doc(inline)]
pub use metrics::{Metrics, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
#[doc(inline)]
pub use object::{AnyObject, Object};
#[doc(inline)]
pub use predicate::Predicate;
#[doc(inline)]
pub use rbac::{Permissions, metrics_reader, strategy_verbs};
#[doc(inline)]
pub use reconciler::Reconciler;
#[doc(inline)]
pub use sharding::{ShardHandle, ShardKey, ShardingMode};
#[doc(inline)]
pub use writes::ResourceWriter;

pub use async_trait::async_trait;
pub use concord_featuregates as featuregates;
pub use concord_featuregates::{
    Feature, FeatureGates, FeatureRegistry, FeatureSpec, Operation, Stage, StrategyName,
};
pub use concord_strategies as strategies;
pub use concord_strategies::{Condition, Error as WriteError, Intent, Mutation, Outcome, Written};
pub use kube;
pub use kube::runtime::controller::Action;
pub use kube::runtime::events::EventType;
pub use prometheus_client;
