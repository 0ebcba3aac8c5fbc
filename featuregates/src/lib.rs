//! Feature gates and write-strategy configuration for concord.
//!
//! This crate owns the vocabulary the rest of concord speaks when it talks
//! about *how* a write reaches the API server: the [`StrategyName`]s, the
//! [`Operation`]s a reconciler performs, and the [`ConflictPolicy`] that says
//! what to do on `409 Conflict`.

mod config;
mod config_error;
mod conflict_policy;
mod explain;
mod gates;
mod operation;
mod origin;
mod problem;
mod sources;
mod strategies;
mod strategy_name;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod warning;

#[doc(inline)]
pub use config::Config;
#[doc(inline)]
pub use config_error::ConfigError;
#[doc(inline)]
pub use conflict_policy::{ConflictPolicy, RetryPolicy};
#[doc(inline)]
pub use explain::Explanation;
#[doc(inline)]
pub use gates::{
    ALL_ALPHA, ALL_BETA, Feature, FeatureGates, FeatureRegistry, FeatureSpec, FrameworkGates,
    GateState, RegistryError, STRICT_WRITES_BY_DEFAULT, STRICT_WRITES_BY_DEFAULT_SPEC, Stage,
    StageChange, register_framework_gates,
};
#[doc(inline)]
pub use operation::Operation;
#[doc(inline)]
pub use origin::Origin;
#[doc(inline)]
pub use problem::Problem;
#[doc(inline)]
pub use sources::{ConfigLoader, ENV_FEATURE_GATES, ENV_GATE_PREFIX};
#[doc(inline)]
pub use strategies::{
    GateCondition, Reason, ResourceKey, ResourceStrategies, StrategyChoice, StrategyTable, TableRow,
};
#[doc(inline)]
pub use strategy_name::StrategyName;
#[doc(inline)]
pub use warning::Warning;
