use std::fmt;

use crate::Origin;

/// Why a cell of the [`StrategyTable`](crate::StrategyTable) holds its
/// strategy: which rule, where that rule was written, and the gate it
/// depended on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Reason {
    /// The configuration key of the deciding rule
    /// (`strategies.resources.pods.operations.remove-finalizer`), or
    /// `built-in default`.
    pub rule: String,
    /// Where the rule came from.
    pub origin: Origin,
    /// The gate the rule was conditioned on, if any.
    pub gate: Option<GateCondition>,
}

/// The gate a rule depended on and its value at start-up.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GateCondition {
    /// The gate.
    pub name: &'static str,
    /// Its effective value.
    pub enabled: bool,
    /// Who set that value.
    pub origin: Origin,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Origin::File { .. } => write!(f, "{}", self.origin)?,
            origin => write!(f, "{} ({origin})", self.rule)?,
        }
        if let Some(gate) = &self.gate {
            let state = if gate.enabled { "on" } else { "off" };
            write!(f, ", gate {} is {state} ({})", gate.name, gate.origin)?;
        }
        Ok(())
    }
}
