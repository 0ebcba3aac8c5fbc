/// A typed handle to a registered gate: an index into the frozen
/// [`FeatureGates`](crate::FeatureGates), so that
/// [`enabled`](crate::FeatureGates::enabled) is a bounds check and one load.
///
/// Handles come from [`FeatureRegistry::register`](crate::FeatureRegistry::register)
/// and belong to the registry that made them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Feature {
    pub(crate) registry: u32,
    pub(crate) index: u32,
}

impl Feature {
    /// The position of this gate in registration order.
    pub const fn index(self) -> usize {
        self.index as usize
    }
}
