//! What the strategy table means for this manager's writes, said at
//! start-up: a configured row that matches no resource the controllers
//! write (a misspelt key, `workload.kueue.x-k8s.io` for
//! `workloads.kueue.x-k8s.io`, would otherwise quietly leave the default
//! row in force), and every cell that is `lax`.

use concord_featuregates::{Operation, ResourceKey, StrategyName, StrategyTable};

/// One thing worth saying about the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Finding {
    /// A configured row that matches none of the written resources.
    UnmatchedRow { row: String, rule: String },
    /// The operations of `resource` whose writes are `lax`, and why the
    /// first of them is.
    Lax {
        resource: String,
        operations: Vec<Operation>,
        reason: String,
    },
}

/// The findings for a manager whose controllers write `written`.
pub(crate) fn findings(table: &StrategyTable, written: &[ResourceKey]) -> Vec<Finding> {
    let mut found = Vec::new();
    for row in table.rows() {
        if !written.iter().any(|resource| row.matches(resource)) {
            found.push(Finding::UnmatchedRow {
                row: row.resource().unwrap_or_default().to_owned(),
                rule: row.reason(Operation::ALL[0]).to_string(),
            });
        }
    }
    for resource in written {
        let row = table.row_for(resource);
        let operations: Vec<Operation> = Operation::ALL
            .into_iter()
            .filter(|&op| row.strategies().strategy(op) == StrategyName::Lax)
            .collect();
        if let Some(&first) = operations.first() {
            found.push(Finding::Lax {
                resource: resource.to_string(),
                reason: row.reason(first).to_string(),
                operations,
            });
        }
    }
    found
}

/// Log `findings` as warnings.
pub(crate) fn report(findings: &[Finding]) {
    for finding in findings {
        match finding {
            Finding::UnmatchedRow { row, rule } => tracing::warn!(
                row = %row,
                from = %rule,
                "the strategy table names a resource no controller of this manager writes: \
                 check the key (plural.group, as `workloads.kueue.x-k8s.io`); until it matches, \
                 those writes take the default row"
            ),
            Finding::Lax {
                resource,
                operations,
                reason,
            } => {
                let operations: Vec<String> = operations.iter().map(ToString::to_string).collect();
                tracing::warn!(
                    resource = %resource,
                    operations = %operations.join(", "),
                    why = %reason,
                    "these writes use `lax`: a concurrent change to a list or map they write can be lost"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use concord_featuregates::{ConfigLoader, FeatureRegistry, register_framework_gates};

    use super::*;

    fn table(yaml: &str) -> StrategyTable {
        let mut registry = FeatureRegistry::new();
        register_framework_gates(&mut registry).unwrap();
        ConfigLoader::new()
            .with_yaml("concord.yaml", yaml.to_owned())
            .load(registry)
            .unwrap()
            .strategies()
            .clone()
    }

    fn workloads() -> ResourceKey {
        ResourceKey::new("kueue.x-k8s.io", "v1beta1", "Workload", "workloads")
    }

    #[test]
    fn a_row_that_matches_no_written_resource_is_named() {
        let yaml =
            "strategies:\n  resources:\n    workload.kueue.x-k8s.io:\n      default: update\n";
        let found = findings(&table(yaml), &[workloads()]);
        assert!(
            matches!(&found[..], [Finding::UnmatchedRow { row, rule }]
                if row == "workload.kueue.x-k8s.io" && rule.contains("concord.yaml")),
            "{found:?}"
        );
        let yaml =
            "strategies:\n  resources:\n    workloads.kueue.x-k8s.io:\n      default: update\n";
        assert_eq!(findings(&table(yaml), &[workloads()]), []);
    }

    #[test]
    fn lax_cells_are_named_with_their_reason() {
        let yaml =
            "strategies:\n  resources:\n    pods:\n      operations:\n        metadata: lax\n";
        let pods = ResourceKey::new("", "v1", "Pod", "pods");
        let found = findings(&table(yaml), &[pods]);
        assert!(
            matches!(&found[..], [Finding::Lax { resource, operations, reason }]
                if resource == "pods" && operations == &[Operation::Metadata] && reason.contains("concord.yaml")),
            "{found:?}"
        );
    }
}
