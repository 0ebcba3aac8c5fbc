use std::ffi::OsString;
use std::path::PathBuf;

use figment::value::{Dict, Value};
use figment::{Figment, Profile, Provider};

use super::keys::{ENV_FEATURE_GATES, ENV_GATE_PREFIX, FEATURE_GATES_KEY, STRATEGIES_KEY};
use super::locator::Locator;
use super::provider::ParsedProvider;
use super::values::describe;
use crate::gates::setting::{GateSetting, SettingValue, parse_bool, parse_gate_list};
use crate::strategy_table::resolve;
use crate::strategy_table::rules::parse_rules;
use crate::{Config, ConfigError, FeatureRegistry, Origin, Problem};

/// Gathers the configuration sources and loads them, in rising precedence:
/// built-in defaults < YAML files (in the order given) <
/// `CONCORD_FEATURE_GATES` < `CONCORD_GATE_<NAME>` variables <
/// the `--feature-gates` flag.
///
/// ```no_run
/// use concord_featuregates::{ConfigLoader, FeatureRegistry, register_framework_gates};
///
/// let mut registry = FeatureRegistry::new();
/// register_framework_gates(&mut registry)?;
/// let config = ConfigLoader::new()
///     .with_file("concord.yaml")
///     .with_env()
///     .with_feature_gates("RemoveFinalizersWithStrictPatch=false")
///     .load(registry)?;
/// println!("{}", config.explain());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ConfigLoader {
    yaml: Vec<(PathBuf, Option<Vec<u8>>)>,
    env: Env,
    flags: Vec<String>,
}

#[derive(Clone, Debug, Default)]
enum Env {
    #[default]
    None,
    Process,
    Vars(Vec<(OsString, OsString)>),
}

impl ConfigLoader {
    /// A loader with no sources: built-in defaults only.
    pub fn new() -> Self {
        ConfigLoader::default()
    }

    /// Adds a YAML file, read when [`load`](Self::load) runs.
    #[must_use]
    pub fn with_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.yaml.push((path.into(), None));
        self
    }

    /// Adds YAML held in memory; `name` stands for its file in messages.
    #[must_use]
    pub fn with_yaml(mut self, name: impl Into<PathBuf>, bytes: impl Into<Vec<u8>>) -> Self {
        self.yaml.push((name.into(), Some(bytes.into())));
        self
    }

    /// Reads `CONCORD_FEATURE_GATES` and `CONCORD_GATE_*` from the process
    /// environment when [`load`](Self::load) runs.
    #[must_use]
    pub fn with_env(mut self) -> Self {
        self.env = Env::Process;
        self
    }

    /// Uses these variables instead of the process environment.
    #[must_use]
    pub fn with_env_vars<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        self.env = Env::Vars(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// Adds the value of one `--feature-gates` flag (`A=true,B=false`);
    /// later flags win over earlier ones.
    #[must_use]
    pub fn with_feature_gates(mut self, value: impl Into<String>) -> Self {
        self.flags.push(value.into());
        self
    }

    /// Reads, merges and checks every source, freezes the registry and
    /// resolves the strategy table.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] listing every [`Problem`] in every source.
    pub fn load(self, mut registry: FeatureRegistry) -> Result<Config, ConfigError> {
        let mut problems = Vec::new();
        let mut figment = Figment::new();
        let mut texts = Vec::new();
        for (path, bytes) in self.yaml {
            if let Some((dict, text)) = read_yaml(&path, bytes, &mut problems) {
                figment = figment.merge(ParsedProvider::file(path.clone(), dict));
                texts.push((path, text));
            }
        }
        for setting in env_settings(&self.env, &registry, &mut problems) {
            figment = figment.merge(ParsedProvider::gate(setting));
        }
        for flag in &self.flags {
            let origin_of = |item: &str| Origin::Flag {
                item: item.to_owned(),
            };
            for setting in parse_gate_list(flag, origin_of, &mut problems) {
                figment = figment.merge(ParsedProvider::gate(setting));
            }
        }
        let mut root = figment
            .data()
            .ok()
            .and_then(|mut data| data.remove(&Profile::Default))
            .unwrap_or_default();
        let locator = Locator::new(&figment, &texts);
        let strategies = root.remove(STRATEGIES_KEY);
        let settings = gate_settings(root.remove(FEATURE_GATES_KEY), &locator, &mut problems);
        for (key, value) in &root {
            let origin = locator.origin(value, &[key]);
            problems.push(Problem::UnknownKey {
                key: key.clone(),
                expected: "featureGates, strategies",
                origin,
            });
        }
        let warnings = registry
            .apply(settings, Vec::new())
            .unwrap_or_else(|gate_problems| {
                problems.extend(gate_problems);
                Vec::new()
            });
        let gates = registry.freeze();
        let rules = parse_rules(strategies.as_ref(), &locator, &gates, &mut problems);
        let table = resolve(&rules, &gates, &mut problems);
        if problems.is_empty() {
            Ok(Config::new(gates, table, warnings))
        } else {
            Err(ConfigError::new(problems))
        }
    }
}

fn read_yaml(
    path: &PathBuf,
    bytes: Option<Vec<u8>>,
    problems: &mut Vec<Problem>,
) -> Option<(Dict, String)> {
    let bytes = match bytes.map_or_else(|| std::fs::read(path), Ok) {
        Ok(bytes) => bytes,
        Err(error) => {
            problems.push(Problem::UnreadableFile {
                path: path.clone(),
                reason: error.to_string(),
            });
            return None;
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            let offset = error.utf8_error().valid_up_to();
            problems.push(Problem::NotUtf8 {
                path: path.clone(),
                offset,
            });
            return None;
        }
    };
    match serde_yaml::from_str::<Option<Dict>>(&text) {
        Ok(dict) => Some((dict.unwrap_or_default(), text)),
        Err(error) => {
            problems.push(Problem::MalformedYaml {
                path: path.clone(),
                message: error.to_string(),
            });
            None
        }
    }
}

/// `CONCORD_FEATURE_GATES` first, then the `CONCORD_GATE_*` variables in
/// name order, so that the specific variables win.
fn env_settings(
    env: &Env,
    registry: &FeatureRegistry,
    problems: &mut Vec<Problem>,
) -> Vec<GateSetting> {
    let mut vars: Vec<(String, String)> = match env {
        Env::None => return Vec::new(),
        Env::Process => relevant(std::env::vars_os()),
        Env::Vars(vars) => relevant(vars.iter().cloned()),
    };
    vars.sort();
    let mut settings = Vec::new();
    if let Some((var, value)) = vars.iter().find(|(var, _)| var == ENV_FEATURE_GATES) {
        settings = parse_gate_list(value, |_| Origin::Env { var: var.clone() }, problems);
    }
    for (var, value) in &vars {
        let Some(suffix) = var.strip_prefix(ENV_GATE_PREFIX) else {
            continue;
        };
        let name = registry
            .canonical_name(suffix)
            .map_or_else(|| suffix.to_owned(), str::to_owned);
        let value = match parse_bool(value.trim()) {
            Some(value) => SettingValue::Bool(value),
            None => SettingValue::Text(value.trim().to_owned()),
        };
        settings.push(GateSetting {
            name,
            value,
            origin: Origin::Env { var: var.clone() },
        });
    }
    settings
}

fn relevant(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<(String, String)> {
    vars.filter_map(|(var, value)| {
        let var = var.into_string().ok()?;
        let ours = var == ENV_FEATURE_GATES || var.starts_with(ENV_GATE_PREFIX);
        ours.then(|| (var, value.to_string_lossy().into_owned()))
    })
    .collect()
}

fn gate_settings(
    value: Option<Value>,
    locator: &Locator<'_>,
    problems: &mut Vec<Problem>,
) -> Vec<GateSetting> {
    // `featureGates:` with every entry commented out is empty, not an error.
    let Some(value) = value.filter(|value| !matches!(value, Value::Empty(..))) else {
        return Vec::new();
    };
    let Value::Dict(_, dict) = &value else {
        let origin = locator.origin(&value, &[FEATURE_GATES_KEY]);
        problems.push(Problem::WrongType {
            expected: "a mapping of gate names to true or false",
            found: describe(&value),
            origin,
        });
        return Vec::new();
    };
    dict.iter()
        .map(|(name, value)| GateSetting {
            name: name.clone(),
            value: match value {
                Value::Bool(_, value) => SettingValue::Bool(*value),
                other => SettingValue::Other(describe(other)),
            },
            origin: locator.origin(value, &[FEATURE_GATES_KEY, name]),
        })
        .collect()
}
