use super::choice::StrategyChoice;
use super::reason::Reason;
use super::resource_key::{ResourceKey, ResourceSelector};
use crate::{Operation, StrategyName};

/// The strategies of one resource, one per [`Operation`]: small and `Copy`,
/// so a controller looks its row up once and reads it on every write.
///
/// ```
/// use concord_featuregates::{ConfigLoader, FeatureRegistry, Operation, ResourceKey, StrategyName};
/// let config = ConfigLoader::new().load(FeatureRegistry::new()).unwrap();
/// let pods = config.strategies().for_resource(&ResourceKey::new("", "v1", "Pod", "pods"));
/// assert_eq!(pods.strategy(Operation::RemoveFinalizer), StrategyName::Strict);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResourceStrategies {
    cells: [StrategyChoice; Operation::ALL.len()],
}

impl ResourceStrategies {
    pub(crate) fn new(cells: [StrategyChoice; Operation::ALL.len()]) -> Self {
        ResourceStrategies { cells }
    }

    /// The strategy and conflict policy for `operation`.
    #[inline]
    pub fn get(&self, operation: Operation) -> StrategyChoice {
        self.cells[operation.index()]
    }

    /// The strategy for `operation`.
    #[inline]
    pub fn strategy(&self, operation: Operation) -> StrategyName {
        self.cells[operation.index()].strategy
    }
}

/// One row of the resolved table, with the reason for every cell.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRow {
    pub(crate) form: Option<String>,
    pub(crate) selector: Option<ResourceSelector>,
    pub(crate) strategies: ResourceStrategies,
    pub(crate) reasons: [Reason; Operation::ALL.len()],
}

impl TableRow {
    /// The resource as configured (`pods`), or `None` for the default row.
    pub fn resource(&self) -> Option<&str> {
        self.form.as_deref()
    }

    /// The row's strategies.
    pub fn strategies(&self) -> ResourceStrategies {
        self.strategies
    }

    /// Why `operation` got its strategy.
    pub fn reason(&self, operation: Operation) -> &Reason {
        &self.reasons[operation.index()]
    }

    /// Whether this configured row applies to `resource` (never for the
    /// default row, which applies to what no row names).
    ///
    /// ```
    /// use concord_featuregates::{ConfigLoader, FeatureRegistry, ResourceKey};
    /// let config = ConfigLoader::new()
    ///     .with_yaml("c.yaml", "strategies:\n  resources:\n    pods:\n      default: update\n")
    ///     .load(FeatureRegistry::new())
    ///     .unwrap();
    /// let row = &config.strategies().rows()[0];
    /// assert!(row.matches(&ResourceKey::new("", "v1", "Pod", "pods")));
    /// assert!(!row.matches(&ResourceKey::new("apps", "v1", "Deployment", "deployments")));
    /// ```
    pub fn matches(&self, resource: &ResourceKey) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|selector| selector.matches(resource))
    }
}

/// The strategy table, resolved once at start-up from the configuration and
/// the gates.
///
/// # Guarantees
///
/// Resolution happens once; [`for_resource`](Self::for_resource) compares a
/// few strings per configured resource and is meant to be called once per
/// controller, and [`ResourceStrategies::get`] is an array index.
#[derive(Clone, Debug, PartialEq)]
pub struct StrategyTable {
    pub(crate) default_row: TableRow,
    pub(crate) rows: Vec<TableRow>,
}

impl StrategyTable {
    /// The strategies for `resource`: the most specific configured row that
    /// matches (group/version/Kind, then group/Kind, then plural.group), or
    /// the default row.
    pub fn for_resource(&self, resource: &ResourceKey) -> ResourceStrategies {
        self.row_for(resource).strategies
    }

    /// The row used for `resource`, with its reasons.
    pub fn row_for(&self, resource: &ResourceKey) -> &TableRow {
        self.rows
            .iter()
            .find(|row| row.matches(resource))
            .unwrap_or(&self.default_row)
    }

    /// The row for resources no rule names.
    pub fn default_row(&self) -> &TableRow {
        &self.default_row
    }

    /// The rows of configured resources, most specific form first.
    pub fn rows(&self) -> &[TableRow] {
        &self.rows
    }
}
