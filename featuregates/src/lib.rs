//! Feature gates and write-strategy configuration for concord.
//!
//! This crate owns the vocabulary the rest of concord speaks when it talks
//! about *how* a write reaches the API server — the [`StrategyName`]s, the
//! [`Operation`]s a reconciler performs, and the [`ConflictPolicy`] that says
//! what to do on `409 Conflict` — and the configuration that maps every
//! (resource, operation) to a strategy.
//!
//! - [Gates](#gates): [`FeatureSpec`], [`FeatureRegistry`], [`FeatureGates`]
//! - [Sources](#sources): [`ConfigLoader`], [`Origin`]
//! - [Strategy table](#strategy-table): [`StrategyTable`], [`ResourceStrategies`]
//! - [Explain](#explain): [`Explanation`]
//! - [Errors](#errors): [`ConfigError`], [`Problem`], [`Warning`], [`RegistryError`]
//!
//! The book chapter "Feature gates and configuration" is the reference of
//! the YAML schema.
//!
//! # Gates
//!
//! Gates are declared as `const` [`FeatureSpec`]s with a [`Stage`], registered
//! in a [`FeatureRegistry`] (which returns a typed [`Feature`] handle), and
//! frozen into [`FeatureGates`] when the configuration loads.
//!
//! | stage | default | lock | setting it |
//! | --- | --- | --- | --- |
//! | Alpha | off | never | — |
//! | Beta | on (or off) | optional | — |
//! | GA | on | always | warns |
//! | Deprecated | off (or on) | optional | warns |
//!
//! # Sources
//!
//! | precedence | source |
//! | --- | --- |
//! | lowest | built-in defaults |
//! | | YAML files, in the order given |
//! | | `CONCORD_FEATURE_GATES=A=true,B=false` |
//! | | `CONCORD_GATE_<NAME>=true` |
//! | highest | `--feature-gates=A=true,B=false` |
//!
//! # Strategy table
//!
//! Resolved once at load; a cell is decided by the resource's rule for the
//! operation, then the resource's default, then the global rule for the
//! operation, then the global default, then the built-in default (`strict`,
//! or `lax` when the framework gate `StrictWritesByDefault` is off).
//!
//! ```no_run
//! use concord_featuregates::{ConfigLoader, FeatureRegistry, FeatureSpec, Operation, ResourceKey};
//!
//! let mut registry = FeatureRegistry::new();
//! let strict_patch = registry.register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch"))?;
//! let config = ConfigLoader::new().with_file("concord.yaml").with_env().load(registry)?;
//! let pods = config.strategies().for_resource(&ResourceKey::new("", "v1", "Pod", "pods"));
//! let choice = pods.get(Operation::RemoveFinalizer);
//! let on = config.gates().enabled(strict_patch);
//! # let _ = (choice, on);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Explain
//!
//! [`Config::explain`] prints every gate with its source and every cell with
//! its reason, as text or as YAML that loads back to the same result.
//!
//! # Errors
//!
//! Loading reports every [`Problem`] at once in one [`ConfigError`]; each
//! names the file and key (and line), environment variable or flag item at
//! fault.

mod config;
mod config_error;
mod conflict_policy;
mod description;
mod explain;
mod gates;
mod operation;
mod origin;
mod problem;
mod sources;
mod strategy_name;
mod strategy_table;
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
pub use description::{ConflictHandling, Reads, RequestShape, StrategyDescription, WholeObjects};
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
pub use strategy_name::StrategyName;
#[doc(inline)]
pub use strategy_table::{
    GateCondition, Reason, ResourceKey, ResourceStrategies, StrategyChoice, StrategyTable, TableRow,
};
#[doc(inline)]
pub use warning::Warning;
