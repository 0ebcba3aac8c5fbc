//! Helpers for tests: override a gate for the length of one test.
//!
//! Enabled in this crate's own tests and, for other crates, by the
//! `testing` cargo feature (add it to your `[dev-dependencies]`).

use crate::{Feature, FeatureGates};

/// Sets a gate on a frozen [`FeatureGates`] until the guard is dropped,
/// then restores the previous value, like component-base's
/// `SetFeatureGateDuringTest`.
///
/// ```
/// use concord_featuregates::{FeatureRegistry, FeatureSpec, testing::override_gate};
/// let mut registry = FeatureRegistry::new();
/// let strict_patch = registry.register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch")).unwrap();
/// let gates = registry.freeze();
/// {
///     let _guard = override_gate(&gates, strict_patch, false);
///     assert!(!gates.enabled(strict_patch));
/// }
/// assert!(gates.enabled(strict_patch));
/// ```
///
/// # Caveats
///
/// Every clone of `gates` sees the override, so tests that share one
/// snapshot must not override the same gate concurrently. The reported
/// [`Origin`](crate::Origin) of the gate is not changed. A strategy table
/// resolved before the override keeps the strategies it resolved.
///
/// # Panics
///
/// If `feature` belongs to another registry.
#[must_use = "the override ends when the guard is dropped"]
pub fn override_gate(gates: &FeatureGates, feature: Feature, value: bool) -> GateOverride<'_> {
    let previous = gates.replace(feature, value);
    GateOverride {
        gates,
        feature,
        previous,
    }
}

/// Restores a gate's value when dropped; see [`override_gate`].
#[derive(Debug)]
pub struct GateOverride<'a> {
    gates: &'a FeatureGates,
    feature: Feature,
    previous: bool,
}

impl Drop for GateOverride<'_> {
    fn drop(&mut self) {
        self.gates.replace(self.feature, self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FeatureRegistry, FeatureSpec};

    #[test]
    fn override_gate_restores_previous_value_on_drop() {
        let mut registry = FeatureRegistry::new();
        let alpha = registry.register(FeatureSpec::alpha("Fancy")).unwrap();
        let gates = registry.freeze();
        let clone = gates.clone();
        {
            let _guard = override_gate(&gates, alpha, true);
            assert!(clone.enabled(alpha), "clones share the override");
        }
        assert!(!gates.enabled(alpha));
    }
}
