//! The gate registry: specs, registration, settings and the frozen snapshot.

mod feature;
mod feature_gates;
mod feature_spec;
mod framework;
mod names;
mod registry;
mod registry_error;
pub(crate) mod setting;
mod stage;

pub use feature::Feature;
pub use feature_gates::{FeatureGates, GateState};
pub use feature_spec::FeatureSpec;
pub use framework::{
    FrameworkGates, STRICT_WRITES_BY_DEFAULT, STRICT_WRITES_BY_DEFAULT_SPEC,
    register_framework_gates,
};
pub use names::{ALL_ALPHA, ALL_BETA};
pub use registry::FeatureRegistry;
pub use registry_error::RegistryError;
pub use stage::{Stage, StageChange};
