use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::feature::Feature;
use super::feature_spec::FeatureSpec;
use crate::Origin;

/// The frozen, effective feature gates: cheap to clone (one `Arc`) and to
/// query.
///
/// # Guarantees
///
/// [`enabled`](Self::enabled) allocates nothing, takes no lock and does no
/// string work: a bounds check and a relaxed atomic load. The values never
/// change after [`FeatureRegistry::freeze`](crate::FeatureRegistry::freeze),
/// except under a test's `testing::override_gate` (cargo feature `testing`).
///
/// ```
/// use concord_featuregates::{FeatureRegistry, FeatureSpec};
/// let mut registry = FeatureRegistry::new();
/// let gate = registry.register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch")).unwrap();
/// let gates = registry.freeze();
/// assert!(gates.enabled(gate));
/// assert_eq!(gates.enabled_by_name("RemoveFinalizersWithStrictPatch"), Some(true));
/// ```
#[derive(Clone, Debug)]
pub struct FeatureGates {
    inner: Arc<Frozen>,
}

#[derive(Debug)]
struct Frozen {
    registry: u32,
    // Atomic only so that a test can override a gate through a shared
    // snapshot; production code never stores.
    values: Box<[AtomicBool]>,
    specs: Box<[FeatureSpec]>,
    origins: Box<[Origin]>,
}

/// A gate's spec, effective value and the source of that value.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct GateState<'a> {
    /// The declaration.
    pub spec: &'a FeatureSpec,
    /// Whether the gate is on.
    pub enabled: bool,
    /// Who set the value.
    pub origin: &'a Origin,
}

impl FeatureGates {
    pub(crate) fn new(
        registry: u32,
        specs: Vec<FeatureSpec>,
        values: &[bool],
        origins: Vec<Origin>,
    ) -> Self {
        let values = values.iter().map(|v| AtomicBool::new(*v)).collect();
        FeatureGates {
            inner: Arc::new(Frozen {
                registry,
                values,
                specs: specs.into_boxed_slice(),
                origins: origins.into_boxed_slice(),
            }),
        }
    }

    /// Whether the gate is on.
    ///
    /// # Panics
    ///
    /// If `feature` was registered in another registry: that is a
    /// programming mistake, and answering for the wrong gate would hide it.
    #[inline]
    pub fn enabled(&self, feature: Feature) -> bool {
        self.slot(feature).load(Ordering::Relaxed)
    }

    /// The value of the gate called `name`, for code off the hot path.
    pub fn enabled_by_name(&self, name: &str) -> Option<bool> {
        self.feature(name).map(|feature| self.enabled(feature))
    }

    /// The handle of the gate called `name`.
    pub fn feature(&self, name: &str) -> Option<Feature> {
        let index = self.inner.specs.iter().position(|spec| spec.name == name)?;
        Some(Feature {
            registry: self.inner.registry,
            index: u32::try_from(index).ok()?,
        })
    }

    /// The spec, value and origin of one gate.
    ///
    /// # Panics
    ///
    /// As [`enabled`](Self::enabled).
    pub fn state(&self, feature: Feature) -> GateState<'_> {
        let index = feature.index();
        GateState {
            spec: &self.inner.specs[index],
            enabled: self.enabled(feature),
            origin: &self.inner.origins[index],
        }
    }

    /// Every gate, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = GateState<'_>> + '_ {
        let inner = &self.inner;
        inner
            .specs
            .iter()
            .zip(inner.values.iter())
            .zip(inner.origins.iter())
            .map(|((spec, value), origin)| GateState {
                spec,
                enabled: value.load(Ordering::Relaxed),
                origin,
            })
    }

    /// Stores a value and returns the previous one; only the testing helper
    /// calls this.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn replace(&self, feature: Feature, value: bool) -> bool {
        self.slot(feature).swap(value, Ordering::Relaxed)
    }

    #[inline]
    fn slot(&self, feature: Feature) -> &AtomicBool {
        assert!(
            feature.registry == self.inner.registry,
            "feature gate handle #{} belongs to another registry",
            feature.index
        );
        &self.inner.values[feature.index()]
    }
}
