use super::registry_error::RegistryError;
use super::stage::{Stage, StageChange};

/// The declaration of a feature gate: name, stage, default, lock and
/// history, in the mould of Kubernetes' `FeatureSpec`.
///
/// Specs are `const`, so a gate is declared once beside the code it guards:
///
/// ```
/// use concord_featuregates::{FeatureSpec, Stage, StageChange};
///
/// // ANCHOR: kueue_gate
/// /// owner: @kueue-like-maintainers
/// /// beta: v0.1
/// pub const REMOVE_FINALIZERS_WITH_STRICT_PATCH: FeatureSpec =
///     FeatureSpec::beta("RemoveFinalizersWithStrictPatch")
///         .with_owner("kueue-like example")
///         .with_history(&[StageChange::new(Stage::Beta, "0.1")])
///         .with_description(
///             "remove our finalizer from pods with an optimistic lock (strict) instead of a plain merge patch (lax)",
///         );
/// // ANCHOR_END: kueue_gate
///
/// assert!(REMOVE_FINALIZERS_WITH_STRICT_PATCH.default);
/// assert_eq!(REMOVE_FINALIZERS_WITH_STRICT_PATCH.since(), Some("0.1"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FeatureSpec {
    /// The gate's name, in UpperCamelCase (`RemoveFinalizersWithStrictPatch`).
    pub name: &'static str,
    /// The value when nobody sets it.
    pub default: bool,
    /// Whether setting the gate to anything but `default` is an error.
    pub lock_to_default: bool,
    /// The current stage.
    pub stage: Stage,
    /// Who to ask about the gate.
    pub owner: &'static str,
    /// What turning the gate on changes.
    pub description: &'static str,
    /// The release in which the gate entered each stage, oldest first.
    pub history: &'static [StageChange],
}

impl FeatureSpec {
    const fn new(name: &'static str, stage: Stage, default: bool, locked: bool) -> Self {
        FeatureSpec {
            name,
            default,
            lock_to_default: locked,
            stage,
            owner: "",
            description: "",
            history: &[],
        }
    }

    /// An Alpha gate: off by default.
    pub const fn alpha(name: &'static str) -> Self {
        FeatureSpec::new(name, Stage::Alpha, false, false)
    }

    /// A Beta gate: on by default (see [`with_default`](Self::with_default)).
    pub const fn beta(name: &'static str) -> Self {
        FeatureSpec::new(name, Stage::Beta, true, false)
    }

    /// A GA gate: on and locked.
    pub const fn ga(name: &'static str) -> Self {
        FeatureSpec::new(name, Stage::GA, true, true)
    }

    /// A Deprecated gate: off by default.
    pub const fn deprecated(name: &'static str) -> Self {
        FeatureSpec::new(name, Stage::Deprecated, false, false)
    }

    /// The same spec with another default.
    #[must_use]
    pub const fn with_default(mut self, default: bool) -> Self {
        self.default = default;
        self
    }

    /// The same spec, locked to its default.
    #[must_use]
    pub const fn locked(mut self) -> Self {
        self.lock_to_default = true;
        self
    }

    /// The same spec with an owner.
    #[must_use]
    pub const fn with_owner(mut self, owner: &'static str) -> Self {
        self.owner = owner;
        self
    }

    /// The same spec with a description.
    #[must_use]
    pub const fn with_description(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    /// The same spec with a stage history, oldest first.
    #[must_use]
    pub const fn with_history(mut self, history: &'static [StageChange]) -> Self {
        self.history = history;
        self
    }

    /// The release in which the gate entered its current stage, if recorded.
    pub fn since(&self) -> Option<&'static str> {
        self.history
            .iter()
            .rev()
            .find(|change| change.stage == self.stage)
            .map(|change| change.version)
    }

    /// Checks the spec against the rules of its stage.
    ///
    /// # Errors
    ///
    /// [`RegistryError::InvalidGateName`] for a name that is not
    /// UpperCamelCase ASCII or is reserved, and
    /// [`RegistryError::InconsistentSpec`] when the default, lock or history
    /// contradict the stage.
    pub fn validate(&self) -> Result<(), RegistryError> {
        let name = self.name;
        let well_formed = name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_ascii_alphanumeric());
        if !well_formed || super::names::is_pseudo_gate(name) {
            return Err(RegistryError::InvalidGateName { name });
        }
        let inconsistent = |reason| Err(RegistryError::InconsistentSpec { name, reason });
        match self.stage {
            Stage::Alpha if self.default => {
                return inconsistent("alpha gates must be off by default");
            }
            Stage::Alpha if self.lock_to_default => {
                return inconsistent("alpha gates cannot be locked");
            }
            Stage::GA if !(self.default && self.lock_to_default) => {
                return inconsistent("GA gates must be on and locked to their default");
            }
            _ => {}
        }
        let ordered = self
            .history
            .windows(2)
            .all(|pair| pair[0].stage < pair[1].stage);
        if !ordered {
            return inconsistent("history stages must be listed once each, oldest first");
        }
        if self.history.iter().any(|change| change.version.is_empty()) {
            return inconsistent("history entries need a version");
        }
        match self.history.last() {
            Some(last) if last.stage != self.stage => {
                inconsistent("the last history entry must be the current stage")
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_constructors_follow_component_base_defaults() {
        assert!(!FeatureSpec::alpha("A").default);
        assert!(FeatureSpec::beta("B").default);
        let ga = FeatureSpec::ga("C");
        assert!(ga.default && ga.lock_to_default);
        assert!(!FeatureSpec::deprecated("D").default);
    }

    #[test]
    fn validate_rejects_inconsistent_specs() {
        const ALPHA_ONLY: &[StageChange] = &[StageChange::new(Stage::Alpha, "0.1")];
        const REVERSED: &[StageChange] = &[
            StageChange::new(Stage::Beta, "0.2"),
            StageChange::new(Stage::Alpha, "0.1"),
        ];
        const NO_VERSION: &[StageChange] = &[StageChange::new(Stage::Beta, "")];
        let cases: &[(FeatureSpec, &str)] = &[
            (
                FeatureSpec::alpha("A").with_default(true),
                "alpha gates must be off by default",
            ),
            (
                FeatureSpec::alpha("A").locked(),
                "alpha gates cannot be locked",
            ),
            (
                FeatureSpec::ga("A").with_default(false),
                "GA gates must be on",
            ),
            (
                FeatureSpec::beta("A").with_history(ALPHA_ONLY),
                "last history entry",
            ),
            (
                FeatureSpec::beta("A").with_history(REVERSED),
                "oldest first",
            ),
            (
                FeatureSpec::beta("A").with_history(NO_VERSION),
                "need a version",
            ),
        ];
        for (spec, expected) in cases {
            let err = spec.validate().unwrap_err().to_string();
            assert!(err.contains(expected), "{err} should contain {expected}");
            assert!(err.contains("`A`"), "{err} should name the gate");
        }
    }

    #[test]
    fn validate_rejects_bad_and_reserved_names() {
        for name in [
            "",
            "lowerCase",
            "With-Dash",
            "With Space",
            "AllAlpha",
            "AllBeta",
        ] {
            let err = FeatureSpec::alpha(name).validate().unwrap_err();
            assert_eq!(err, RegistryError::InvalidGateName { name });
        }
    }

    #[test]
    fn since_reports_the_version_of_the_current_stage() {
        const HISTORY: &[StageChange] = &[
            StageChange::new(Stage::Alpha, "0.1"),
            StageChange::new(Stage::Beta, "0.3"),
        ];
        let spec = FeatureSpec::beta("A").with_history(HISTORY);
        assert_eq!(spec.validate(), Ok(()));
        assert_eq!(spec.since(), Some("0.3"));
        assert_eq!(FeatureSpec::beta("B").since(), None);
    }
}
