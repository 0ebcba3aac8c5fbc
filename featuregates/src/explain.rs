use std::fmt::{self, Write as _};

use crate::{FeatureGates, GateState, Operation, StrategyTable, TableRow};

/// A report of the effective configuration: every gate with its value,
/// stage and source, and every cell of the strategy table with its reason.
///
/// `Display` gives the text report; [`to_yaml`](Self::to_yaml) gives a
/// configuration file that loads back to the same gates and table.
///
/// ```
/// use concord_featuregates::{ConfigLoader, FeatureRegistry, register_framework_gates};
/// let mut registry = FeatureRegistry::new();
/// register_framework_gates(&mut registry).unwrap();
/// let config = ConfigLoader::new().load(registry).unwrap();
/// let text = config.explain().to_string();
/// assert!(text.contains("StrictWritesByDefault = true"));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Explanation<'a> {
    gates: &'a FeatureGates,
    table: &'a StrategyTable,
}

impl<'a> Explanation<'a> {
    pub(crate) fn new(gates: &'a FeatureGates, table: &'a StrategyTable) -> Self {
        Explanation { gates, table }
    }

    /// The effective configuration as YAML, each value commented with its
    /// reason. Gates at their default are commented out, so that loading the
    /// file back raises no GA or Deprecated warnings; gate-conditioned rules
    /// appear resolved.
    pub fn to_yaml(&self) -> String {
        let mut out = String::from(
            "# Effective concord configuration, written by `explain`.\n# Loading it back gives the same gates and strategy table.\n",
        );
        out.push_str("featureGates:");
        if self
            .gates
            .iter()
            .all(|state| state.enabled == state.spec.default)
        {
            out.push_str(" {}");
        }
        out.push('\n');
        for state in self.gates.iter() {
            let line = format!("{}: {}", state.spec.name, state.enabled);
            let comment = one_line(&format!("{}; {}", gate_summary(&state), state.origin));
            if state.enabled == state.spec.default {
                let _ = writeln!(out, "  # {line}  # {comment}");
            } else {
                let _ = writeln!(out, "  {line}  # {comment}");
            }
        }
        out.push_str("strategies:\n");
        write_yaml_operations(&mut out, "  ", self.table.default_row());
        if !self.table.rows().is_empty() {
            out.push_str("  resources:\n");
            for row in self.table.rows() {
                let _ = writeln!(out, "    {}:", row.resource().unwrap_or_default());
                write_yaml_operations(&mut out, "      ", row);
            }
        }
        out
    }
}

fn write_yaml_operations(out: &mut String, indent: &str, row: &TableRow) {
    let _ = writeln!(out, "{indent}operations:");
    for operation in Operation::ALL {
        let choice = row.strategies().get(operation);
        // A create or delete takes no conflict policy (its cell carries
        // the default, which the loader refuses to see written).
        let choice = match operation {
            Operation::Create | Operation::Delete => choice.strategy.to_string(),
            _ => choice.to_yaml(),
        };
        let reason = one_line(&row.reason(operation).to_string());
        let _ = writeln!(out, "{indent}  {operation}: {choice}  # {reason}");
    }
}

fn gate_summary(state: &GateState<'_>) -> String {
    let lock = if state.spec.lock_to_default {
        ", locked"
    } else {
        ""
    };
    let since = state
        .spec
        .since()
        .map(|v| format!(" since {v}"))
        .unwrap_or_default();
    format!(
        "{}{since}, default {}{lock}",
        state.spec.stage, state.spec.default
    )
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

impl fmt::Display for Explanation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "feature gates:")?;
        let width = self
            .gates
            .iter()
            .map(|state| state.spec.name.len())
            .max()
            .unwrap_or(0);
        for state in self.gates.iter() {
            writeln!(
                f,
                "  {:width$} = {:5}  [{}]  from {}",
                state.spec.name,
                state.enabled,
                gate_summary(&state),
                state.origin
            )?;
        }
        writeln!(f, "strategy table:")?;
        let rows = std::iter::once(self.table.default_row()).chain(self.table.rows());
        for row in rows {
            writeln!(f, "  {}", row.resource().unwrap_or("(any other resource)"))?;
            for operation in Operation::ALL {
                let choice = row.strategies().get(operation);
                writeln!(
                    f,
                    "    {:16} {choice}\n      because {}",
                    operation.as_str(),
                    row.reason(operation)
                )?;
            }
        }
        Ok(())
    }
}
