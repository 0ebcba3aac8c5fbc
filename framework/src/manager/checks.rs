//! Start-up checks of combinations the flags and the strategy table make:
//! those that cannot be safe are errors before anything connects.

use concord_featuregates::{Config, Operation, StrategyDescription};

use crate::{Error, ManagerArgs};

/// Refuses what `--shards` cannot make safe, and warns about what it
/// makes only partly safe.
///
/// A handover moves an object from one replica to another while a write
/// the old owner sent just before its fence may still be in flight. A
/// write whose precondition the server checks (`strict`, `update`, `guarded`,
/// `apply`) is refused if it would overwrite the new owner's; `locked`
/// orders writes inside one process only, so across a handover it is no
/// better than `lax`, and an operator that chose it believed otherwise.
///
/// # Errors
///
/// [`Error::ShardingConfig`] naming `--shards`, `--leader-elect` or every
/// `locked` cell of the strategy table with the rule that chose it.
pub(super) fn check_sharding(args: &ManagerArgs, config: &Config) -> Result<(), Error> {
    if !args.shards.is_on() {
        return Ok(());
    }
    if args.leader_elect {
        return Err(Error::ShardingConfig(format!(
            "--shards={} and --leader-elect together: a sharded replica reconciles its share without waiting for leadership; drop --leader-elect",
            args.shards
        )));
    }
    let locked = cells(config, |d| d.locks);
    if !locked.is_empty() {
        return Err(Error::ShardingConfig(format!(
            "--shards={} and the `locked` strategy together: `locked` orders writes inside one process only, \
             and during a handover a write the previous owner sent before its lease ran out can still land \
             after the new owner's, so nothing would order them; choose `strict`, `update`, `guarded` or `apply` for {}",
            args.shards,
            locked.join("; ")
        )));
    }
    let lax = cells(config, |d| !d.request.has_precondition());
    if !lax.is_empty() {
        tracing::warn!(
            shards = %args.shards,
            cells = %lax.join("; "),
            "the `lax` strategy with --shards: a write the previous owner sent just before a handover \
             can land after the new owner's and overwrite it (and `lax` never protected against other \
             controllers); `strict`, `update`, `guarded` and `apply` are safe across a handover"
        );
    }
    Ok(())
}

/// Every cell of the strategy table whose strategy is `described`, as
/// `resource/operation (reason)`.
fn cells(config: &Config, described: fn(&StrategyDescription) -> bool) -> Vec<String> {
    let table = config.strategies();
    let mut found = Vec::new();
    for row in table
        .rows()
        .iter()
        .chain(std::iter::once(table.default_row()))
    {
        for operation in Operation::ALL {
            if described(&row.strategies().strategy(operation).description()) {
                found.push(format!(
                    "{}/{operation} (from {})",
                    row.resource().unwrap_or("(default)"),
                    row.reason(operation)
                ));
            }
        }
    }
    found
}

/// Warns when `locked` is chosen anywhere while several replicas may write
/// (no leader election): it orders writes inside one process only.
pub(super) fn warn_if_unsafe_for_replicas(config: &Config, leader_elect: bool) {
    if leader_elect {
        return;
    }
    let table = config.strategies();
    for row in table
        .rows()
        .iter()
        .chain(std::iter::once(table.default_row()))
    {
        let strategies = row.strategies();
        for operation in Operation::ALL {
            if strategies.strategy(operation).description().locks {
                tracing::warn!(
                    resource = row.resource().unwrap_or("(default)"),
                    %operation,
                    "the `locked` strategy only orders writes inside one process: run a single replica \
                     with --leader-elect, or choose `strict`, `update` or `apply`"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use concord_featuregates::{ConfigLoader, FeatureRegistry, register_framework_gates};

    use super::*;
    use crate::sharding::ShardingMode;

    fn config(yaml: &str) -> Config {
        let mut registry = FeatureRegistry::new();
        register_framework_gates(&mut registry).unwrap();
        ConfigLoader::new()
            .with_yaml("test.yaml", yaml.as_bytes().to_vec())
            .load(registry)
            .unwrap()
    }

    fn sharded() -> ManagerArgs {
        ManagerArgs::new().with_shards(ShardingMode::Hash, "ns")
    }

    #[test]
    fn locked_with_shards_is_refused_naming_both() {
        let config = config(
            "strategies:\n  resources:\n    pods:\n      operations:\n        remove-finalizer: locked\n",
        );
        let error = check_sharding(&sharded(), &config).unwrap_err().to_string();
        assert!(error.contains("--shards=hash"), "{error}");
        assert!(error.contains("`locked`"), "{error}");
        assert!(error.contains("pods/"), "names the cell: {error}");
    }

    #[test]
    fn strict_with_shards_and_locked_without_are_accepted() {
        assert!(check_sharding(&sharded(), &config("strategies:\n  default: strict\n")).is_ok());
        let unsharded = ManagerArgs::new();
        assert!(check_sharding(&unsharded, &config("strategies:\n  default: locked\n")).is_ok());
    }

    #[test]
    fn leader_election_with_shards_is_refused() {
        let args = sharded().with_leader_election("id", "ns");
        let error = check_sharding(&args, &config("")).unwrap_err().to_string();
        assert!(error.contains("--leader-elect"), "{error}");
    }
}
