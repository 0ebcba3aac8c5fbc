use std::sync::atomic::{AtomicU32, Ordering};

use super::feature::Feature;
use super::feature_gates::FeatureGates;
use super::feature_spec::FeatureSpec;
use super::names::{ALL_ALPHA, ALL_BETA, normalize};
use super::registry_error::RegistryError;
use super::setting::{GateSetting, SettingValue, parse_gate_list};
use crate::{ConfigError, Origin, Problem, Stage, Warning};

static NEXT_REGISTRY: AtomicU32 = AtomicU32::new(1);

/// The mutable registry of feature gates, used while the program starts:
/// register gates, apply settings, then [`freeze`](Self::freeze) it into the
/// immutable [`FeatureGates`] the rest of the program reads.
///
/// ```
/// use concord_featuregates::{FeatureRegistry, FeatureSpec};
///
/// let mut registry = FeatureRegistry::new();
/// let fancy = registry.register(FeatureSpec::alpha("FancyThing")).unwrap();
/// registry.set("FancyThing=true").unwrap();
/// let gates = registry.freeze();
/// assert!(gates.enabled(fancy));
/// ```
#[derive(Debug)]
pub struct FeatureRegistry {
    id: u32,
    specs: Vec<FeatureSpec>,
    values: Vec<bool>,
    origins: Vec<Origin>,
}

impl Default for FeatureRegistry {
    fn default() -> Self {
        FeatureRegistry::new()
    }
}

impl FeatureRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        FeatureRegistry {
            id: NEXT_REGISTRY.fetch_add(1, Ordering::Relaxed),
            specs: Vec::new(),
            values: Vec::new(),
            origins: Vec::new(),
        }
    }

    /// Declares a gate and returns its handle.
    ///
    /// # Errors
    ///
    /// [`RegistryError::DuplicateGate`] if a gate of the same name (ignoring
    /// case) exists, and the errors of [`FeatureSpec::validate`].
    pub fn register(&mut self, spec: FeatureSpec) -> Result<Feature, RegistryError> {
        spec.validate()?;
        let key = normalize(spec.name);
        if self.specs.iter().any(|known| normalize(known.name) == key) {
            return Err(RegistryError::DuplicateGate { name: spec.name });
        }
        let index =
            u32::try_from(self.specs.len()).map_err(|_| RegistryError::InconsistentSpec {
                name: spec.name,
                reason: "too many gates",
            })?;
        self.specs.push(spec);
        self.values.push(spec.default);
        self.origins.push(Origin::Default);
        Ok(Feature {
            registry: self.id,
            index,
        })
    }

    /// The handle of a registered gate.
    pub fn feature(&self, name: &str) -> Option<Feature> {
        let index = self.specs.iter().position(|spec| spec.name == name)?;
        Some(Feature {
            registry: self.id,
            index: u32::try_from(index).ok()?,
        })
    }

    /// Every registered spec, in registration order.
    pub fn specs(&self) -> &[FeatureSpec] {
        &self.specs
    }

    /// Applies a `--feature-gates` style string, `A=true,B=false`, with the
    /// `AllAlpha` and `AllBeta` switches. Nothing changes unless every item
    /// is valid.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] listing every bad item: missing values, unknown
    /// gates, non-booleans and locked gates set against their default.
    pub fn set(&mut self, value: &str) -> Result<Vec<Warning>, ConfigError> {
        let mut problems = Vec::new();
        let settings = parse_gate_list(
            value,
            |item| Origin::Flag {
                item: item.to_owned(),
            },
            &mut problems,
        );
        self.apply(settings, problems).map_err(ConfigError::new)
    }

    /// Applies gate values given by the program itself. Nothing changes
    /// unless every entry is valid.
    ///
    /// # Errors
    ///
    /// As [`set`](Self::set).
    pub fn set_from_map<I, K>(&mut self, map: I) -> Result<Vec<Warning>, ConfigError>
    where
        I: IntoIterator<Item = (K, bool)>,
        K: AsRef<str>,
    {
        let settings = map
            .into_iter()
            .map(|(name, value)| GateSetting {
                name: name.as_ref().to_owned(),
                value: SettingValue::Bool(value),
                origin: Origin::Code,
            })
            .collect();
        self.apply(settings, Vec::new()).map_err(ConfigError::new)
    }

    /// Closes the registry: no more registration or settings.
    pub fn freeze(self) -> FeatureGates {
        FeatureGates::new(self.id, self.specs, &self.values, self.origins)
    }

    /// The canonical name of the gate whose name matches `key` ignoring case
    /// and underscores (how environment variables name gates).
    pub(crate) fn canonical_name(&self, key: &str) -> Option<&'static str> {
        let key = normalize(key);
        [ALL_ALPHA, ALL_BETA]
            .into_iter()
            .chain(self.specs.iter().map(|spec| spec.name))
            .find(|name| normalize(name) == key)
    }

    /// component-base's `SetFromMap`: explicit gates win over `AllAlpha` and
    /// `AllBeta` whatever the order, locked gates are never touched by the
    /// switches, and the registry changes only when there are no problems.
    pub(crate) fn apply(
        &mut self,
        settings: Vec<GateSetting>,
        mut problems: Vec<Problem>,
    ) -> Result<Vec<Warning>, Vec<Problem>> {
        let mut values = self.values.clone();
        let mut origins = self.origins.clone();
        let mut explicit = vec![false; self.specs.len()];
        let mut switches: [Option<(bool, Origin)>; 2] = [None, None];
        let mut warnings = Vec::new();
        for GateSetting {
            name,
            value,
            origin,
        } in settings
        {
            let value = match value {
                SettingValue::Bool(value) => value,
                SettingValue::Other(found) => {
                    problems.push(Problem::NotBoolean {
                        name,
                        found,
                        origin,
                    });
                    continue;
                }
                SettingValue::Text(text) => {
                    let found = crate::sources::describe(&figment::value::Value::from(text));
                    problems.push(Problem::NotBoolean {
                        name,
                        found,
                        origin,
                    });
                    continue;
                }
            };
            if let Some(slot) = [ALL_ALPHA, ALL_BETA].iter().position(|s| *s == name) {
                switches[slot] = Some((value, origin));
                continue;
            }
            let Some(index) = self.specs.iter().position(|spec| spec.name == name) else {
                problems.push(Problem::UnknownGate { name, origin });
                continue;
            };
            let spec = &self.specs[index];
            if spec.lock_to_default && value != spec.default {
                problems.push(Problem::LockedGate {
                    name: spec.name,
                    value,
                    origin,
                });
                continue;
            }
            if matches!(spec.stage, Stage::GA | Stage::Deprecated) {
                warnings.push(Warning {
                    gate: spec.name,
                    stage: spec.stage,
                    value,
                    origin: origin.clone(),
                });
            }
            values[index] = value;
            origins[index] = origin;
            explicit[index] = true;
        }
        for (stage, switch) in [Stage::Alpha, Stage::Beta].into_iter().zip(switches) {
            let Some((value, origin)) = switch else {
                continue;
            };
            for (index, spec) in self.specs.iter().enumerate() {
                if spec.stage == stage && !spec.lock_to_default && !explicit[index] {
                    values[index] = value;
                    origins[index] = origin.clone();
                }
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        for warning in &warnings {
            tracing::warn!(gate = warning.gate, "{warning}");
        }
        self.values = values;
        self.origins = origins;
        Ok(warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> (FeatureRegistry, [Feature; 4]) {
        let mut registry = FeatureRegistry::new();
        let features = [
            registry.register(FeatureSpec::alpha("Alpha1")).unwrap(),
            registry
                .register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch"))
                .unwrap(),
            registry.register(FeatureSpec::ga("GaGate")).unwrap(),
            registry
                .register(FeatureSpec::deprecated("OldGate"))
                .unwrap(),
        ];
        (registry, features)
    }

    #[test]
    fn register_rejects_duplicates_ignoring_case() {
        let (mut registry, _) = registry();
        let err = registry.register(FeatureSpec::alpha("ALPHA1")).unwrap_err();
        assert_eq!(err, RegistryError::DuplicateGate { name: "ALPHA1" });
        assert_eq!(
            err.to_string(),
            "feature gate `ALPHA1` is already registered"
        );
    }

    #[test]
    fn set_applies_values_and_all_switches() {
        let (mut registry, [alpha, beta, ga, _]) = registry();
        registry.set("AllAlpha=true,AllBeta=false").unwrap();
        let gates = registry.freeze();
        assert!(gates.enabled(alpha));
        assert!(!gates.enabled(beta));
        assert!(gates.enabled(ga), "locked gates ignore AllBeta");
    }

    #[test]
    fn explicit_gate_wins_over_all_switch_in_any_order() {
        for flag in [
            "AllBeta=false,RemoveFinalizersWithStrictPatch=true",
            "RemoveFinalizersWithStrictPatch=true,AllBeta=false",
        ] {
            let (mut registry, [_, beta, _, _]) = registry();
            registry.set(flag).unwrap();
            assert!(registry.freeze().enabled(beta), "{flag}");
        }
    }

    #[test]
    fn set_reports_every_problem_and_changes_nothing() {
        let (mut registry, [alpha, ..]) = registry();
        let err = registry
            .set("Alpha1=true,Nope=true,GaGate=false,OldGate=maybe,Bare")
            .unwrap_err();
        let messages: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "missing bool value for `Bare` (flag `--feature-gates=Bare`)",
                "unknown feature gate `Nope` (flag `--feature-gates=Nope=true`)",
                "feature gate `GaGate` is locked to true and cannot be set to false (flag `--feature-gates=GaGate=false`)",
                "feature gate `OldGate` must be true or false, found `maybe` (flag `--feature-gates=OldGate=maybe`)",
            ]
        );
        assert!(!registry.freeze().enabled(alpha));
    }

    #[test]
    fn setting_ga_or_deprecated_gate_warns() {
        let (mut registry, _) = registry();
        let warnings = registry.set("GaGate=true,OldGate=true").unwrap();
        let messages: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "setting GA feature gate `GaGate`=true (flag `--feature-gates=GaGate=true`); it will be removed in a future release",
                "setting deprecated feature gate `OldGate`=true (flag `--feature-gates=OldGate=true`); it will be removed in a future release",
            ]
        );
    }

    #[test]
    fn set_from_map_records_code_origin() {
        let (mut registry, [alpha, ..]) = registry();
        registry.set_from_map([("Alpha1", true)]).unwrap();
        let gates = registry.freeze();
        assert_eq!(gates.state(alpha).origin, &Origin::Code);
    }

    #[test]
    fn canonical_name_matches_environment_spelling() {
        let (registry, _) = registry();
        assert_eq!(
            registry.canonical_name("REMOVE_FINALIZERS_WITH_STRICT_PATCH"),
            Some("RemoveFinalizersWithStrictPatch")
        );
        assert_eq!(registry.canonical_name("ALL_ALPHA"), Some("AllAlpha"));
        assert_eq!(registry.canonical_name("NOPE"), None);
    }

    #[test]
    #[should_panic(expected = "belongs to another registry")]
    fn enabled_panics_on_foreign_handle() {
        let mut other = FeatureRegistry::new();
        let foreign = other.register(FeatureSpec::alpha("A")).unwrap();
        let mut registry = FeatureRegistry::new();
        registry.register(FeatureSpec::alpha("A")).unwrap();
        let _ = registry.freeze().enabled(foreign);
    }

    #[test]
    fn iter_lists_gates_in_registration_order() {
        let mut registry = FeatureRegistry::new();
        registry.register(FeatureSpec::beta("B")).unwrap();
        registry.register(FeatureSpec::alpha("A")).unwrap();
        let gates = registry.freeze();
        let names: Vec<_> = gates
            .iter()
            .map(|state| (state.spec.name, state.enabled))
            .collect();
        assert_eq!(names, [("B", true), ("A", false)]);
    }
}
