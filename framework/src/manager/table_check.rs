//! What the strategy table means for this manager's writes, said at
//! start-up: a configured row that names no resource the API server serves
//! (a misspelt key, `workload.kueue.x-k8s.io` for
//! `workloads.kueue.x-k8s.io`, would otherwise quietly leave the default
//! row in force), and every cell that is `lax`.
//!
//! A row is judged against what the server serves, not only against what
//! the controllers watch: writes through `writer_for`, `create` or `apply`
//! reach resources no controller is added for, and are resolved when they
//! are first made.

use concord_featuregates::{Operation, ResourceKey, StrategyTable};

/// One thing worth saying about the table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Finding {
    /// A configured row that matches none of the resources the API
    /// server serves (`checked`), or, when those could not be listed, none
    /// the controllers write (`checked` false).
    UnmatchedRow {
        row: String,
        rule: String,
        checked: bool,
    },
    /// The operations of `resource` whose writes are `lax`, and why the
    /// first of them is.
    Lax {
        resource: String,
        operations: Vec<Operation>,
        reason: String,
    },
}

/// The findings for a manager whose controllers write `written`, on a
/// server that serves `served` (`None` when it could not be listed).
pub(crate) fn findings(
    table: &StrategyTable,
    written: &[ResourceKey],
    served: Option<&[ResourceKey]>,
) -> Vec<Finding> {
    let mut found = Vec::new();
    for row in table.rows() {
        let matched = written.iter().any(|resource| row.matches(resource))
            || served.is_some_and(|served| served.iter().any(|resource| row.matches(resource)));
        if !matched {
            found.push(Finding::UnmatchedRow {
                row: row.resource().unwrap_or_default().to_owned(),
                rule: row.reason(Operation::ALL[0]).to_string(),
                checked: served.is_some(),
            });
        }
    }
    for resource in written {
        let row = table.row_for(resource);
        let operations: Vec<Operation> = Operation::ALL
            .into_iter()
            .filter(|&op| {
                !row.strategies()
                    .strategy(op)
                    .description()
                    .request
                    .has_precondition()
            })
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

/// Every resource `client`'s API server serves, in every served version,
/// from its aggregated discovery (two requests); `None`, logged, when the
/// server cannot be asked.
pub(crate) async fn served(client: &kube::Client) -> Option<Vec<ResourceKey>> {
    match kube::Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => Some(
            discovery
                .groups()
                .flat_map(|group| {
                    group
                        .versions()
                        .flat_map(|version| group.versioned_resources(version))
                        .collect::<Vec<_>>()
                })
                .map(|(resource, _)| {
                    ResourceKey::new(
                        resource.group,
                        resource.version,
                        resource.kind,
                        resource.plural,
                    )
                })
                .collect(),
        ),
        Err(error) => {
            tracing::debug!(%error, "listing the served resources to check the strategy table failed");
            None
        }
    }
}

/// Log `findings` as warnings.
pub(crate) fn report(findings: &[Finding]) {
    for finding in findings {
        match finding {
            Finding::UnmatchedRow {
                row,
                rule,
                checked: true,
            } => tracing::warn!(
                row = %row,
                from = %rule,
                "the strategy table names a resource the API server does not serve: \
                 check the key (plural.group, as `workloads.kueue.x-k8s.io`); until it matches, \
                 writes to the resource you meant take the default row"
            ),
            Finding::UnmatchedRow {
                row,
                rule,
                checked: false,
            } => tracing::warn!(
                row = %row,
                from = %rule,
                "the strategy table names a resource no controller of this manager watches, \
                 and the API server's resources could not be listed to check it: \
                 check the key (plural.group, as `workloads.kueue.x-k8s.io`); until it matches, \
                 writes to the resource you meant take the default row"
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
        let served = [workloads(), config_maps()];
        for served in [None, Some(&served[..])] {
            let found = findings(&table(yaml), &[workloads()], served);
            assert!(
                matches!(&found[..], [Finding::UnmatchedRow { row, rule, checked }]
                    if row == "workload.kueue.x-k8s.io" && rule.contains("concord.yaml")
                        && *checked == served.is_some()),
                "{found:?}"
            );
        }
        let yaml =
            "strategies:\n  resources:\n    workloads.kueue.x-k8s.io:\n      default: update\n";
        assert_eq!(findings(&table(yaml), &[workloads()], None), []);
    }

    fn config_maps() -> ResourceKey {
        ResourceKey::new("", "v1", "ConfigMap", "configmaps")
    }

    #[test]
    fn a_row_for_a_served_resource_no_controller_watches_is_not_named() {
        // Written through `writer_for` or `create`, not watched.
        let yaml = "strategies:\n  resources:\n    configmaps:\n      default: update\n";
        let served = [workloads(), config_maps()];
        assert_eq!(findings(&table(yaml), &[workloads()], Some(&served)), []);
    }

    #[test]
    fn lax_cells_are_named_with_their_reason() {
        let yaml =
            "strategies:\n  resources:\n    pods:\n      operations:\n        metadata: lax\n";
        let pods = ResourceKey::new("", "v1", "Pod", "pods");
        let found = findings(&table(yaml), &[pods], None);
        assert!(
            matches!(&found[..], [Finding::Lax { resource, operations, reason }]
                if resource == "pods" && operations == &[Operation::Metadata] && reason.contains("concord.yaml")),
            "{found:?}"
        );
    }
}
