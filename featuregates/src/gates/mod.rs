//! The gate registry: specs, registration, settings and the frozen snapshot.

mod feature;
mod feature_gates;
mod feature_spec;
mod framework;
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
pub use registry::FeatureRegistry;
pub use registry_error::RegistryError;
pub use stage::{Stage, StageChange};

/// The pseudo-gate that sets every unlocked Alpha gate not named explicitly.
pub const ALL_ALPHA: &str = "AllAlpha";
/// The pseudo-gate that sets every unlocked Beta gate not named explicitly.
pub const ALL_BETA: &str = "AllBeta";

pub(crate) fn is_pseudo_gate(name: &str) -> bool {
    name == ALL_ALPHA || name == ALL_BETA
}

/// A gate name folded for comparison: ASCII lower case, underscores dropped.
pub(crate) fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}
