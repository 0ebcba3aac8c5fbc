use super::feature::Feature;
use super::feature_spec::FeatureSpec;
use super::registry::FeatureRegistry;
use super::registry_error::RegistryError;
use super::stage::{Stage, StageChange};

/// The name of the framework gate that picks the built-in default strategy.
pub const STRICT_WRITES_BY_DEFAULT: &str = "StrictWritesByDefault";

/// Framework gate: when on, any (resource, operation) that no strategy rule
/// covers is written with `strict` (optimistic lock, retry on conflict);
/// when off, with `lax`, the unguarded merge patch most operators use today.
///
/// owner: concord maintainers; beta: 0.1.
pub const STRICT_WRITES_BY_DEFAULT_SPEC: FeatureSpec = FeatureSpec::beta(STRICT_WRITES_BY_DEFAULT)
    .with_owner("concord maintainers")
    .with_history(&[StageChange::new(Stage::Beta, "0.1")])
    .with_description(
        "write with `strict` wherever no strategy rule applies; off falls back to `lax` (merge patch without resourceVersion)",
    );

/// Handles to the gates concord itself declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameworkGates {
    /// [`STRICT_WRITES_BY_DEFAULT_SPEC`].
    pub strict_writes_by_default: Feature,
}

/// Registers concord's own gates; operator authors register theirs beside
/// them.
///
/// ```
/// use concord_featuregates::{FeatureRegistry, register_framework_gates};
/// let mut registry = FeatureRegistry::new();
/// let framework = register_framework_gates(&mut registry).unwrap();
/// assert!(registry.freeze().enabled(framework.strict_writes_by_default));
/// ```
///
/// # Errors
///
/// [`RegistryError::DuplicateGate`] when called twice on one registry.
pub fn register_framework_gates(
    registry: &mut FeatureRegistry,
) -> Result<FrameworkGates, RegistryError> {
    Ok(FrameworkGates {
        strict_writes_by_default: registry.register(STRICT_WRITES_BY_DEFAULT_SPEC)?,
    })
}
