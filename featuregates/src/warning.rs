use std::fmt;

use crate::{Origin, Stage};

/// Something accepted but worth telling the operator about: setting a GA or
/// Deprecated gate. Every warning is also logged with `tracing::warn!`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Warning {
    /// The gate set.
    pub gate: &'static str,
    /// Its stage.
    pub stage: Stage,
    /// The value it was set to.
    pub value: bool,
    /// Who set it.
    pub origin: Origin,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stage = match self.stage {
            Stage::Deprecated => "deprecated",
            _ => self.stage.as_str(),
        };
        write!(
            f,
            "setting {stage} feature gate `{}`={} ({}); it will be removed in a future release",
            self.gate, self.value, self.origin
        )
    }
}
