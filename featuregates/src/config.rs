use crate::explain::Explanation;
use crate::{FeatureGates, StrategyTable, Warning};

/// The loaded configuration: frozen gates, the resolved strategy table and
/// the warnings raised while loading.
///
/// ```
/// use concord_featuregates::{ConfigLoader, FeatureRegistry};
/// let config = ConfigLoader::new().load(FeatureRegistry::new()).unwrap();
/// assert!(config.warnings().is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    gates: FeatureGates,
    strategies: StrategyTable,
    warnings: Vec<Warning>,
}

impl Config {
    pub(crate) fn new(
        gates: FeatureGates,
        strategies: StrategyTable,
        warnings: Vec<Warning>,
    ) -> Self {
        Config {
            gates,
            strategies,
            warnings,
        }
    }

    /// The frozen feature gates.
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// The resolved strategy table.
    pub fn strategies(&self) -> &StrategyTable {
        &self.strategies
    }

    /// Warnings raised while loading (GA and Deprecated gates set); each was
    /// also logged with `tracing::warn!`.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The effective gates and strategy table with their reasons: display it
    /// for text, or call [`Explanation::to_yaml`] for a configuration file
    /// that loads back to the same result.
    pub fn explain(&self) -> Explanation<'_> {
        Explanation::new(&self.gates, &self.strategies)
    }
}
