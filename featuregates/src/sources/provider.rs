use std::path::PathBuf;

use figment::value::{Dict, Map, Value};
use figment::{Metadata, Profile, Provider, Source};

use crate::Origin;
use crate::gates::setting::{GateSetting, SettingValue};

/// The figment metadata name of values read from an environment variable.
pub(crate) const ENV_METADATA: &str = "environment variable";
/// The figment metadata name of values read from the `--feature-gates` flag.
pub(crate) const FLAG_METADATA: &str = "--feature-gates flag";

/// A figment provider over data parsed beforehand, so that a bad source
/// becomes one reported problem instead of poisoning the whole figment.
pub(crate) struct ParsedProvider {
    metadata: Metadata,
    dict: Dict,
}

impl ParsedProvider {
    pub(crate) fn file(path: PathBuf, dict: Dict) -> Self {
        ParsedProvider {
            metadata: Metadata::from("YAML file", Source::File(path)),
            dict,
        }
    }

    /// One gate value from an environment variable or a flag item.
    pub(crate) fn gate(setting: GateSetting) -> Self {
        let metadata = match setting.origin {
            Origin::Env { var } => Metadata::from(ENV_METADATA, Source::Custom(var)),
            Origin::Flag { item } => Metadata::from(FLAG_METADATA, Source::Custom(item)),
            other => Metadata::named(other.to_string()),
        };
        let value = match setting.value {
            SettingValue::Bool(value) => Value::from(value),
            SettingValue::Text(text) | SettingValue::Other(text) => Value::from(text),
        };
        let mut gates = Dict::new();
        gates.insert(setting.name, value);
        let mut dict = Dict::new();
        dict.insert(
            super::keys::FEATURE_GATES_KEY.to_owned(),
            Value::from(gates),
        );
        ParsedProvider { metadata, dict }
    }
}

impl Provider for ParsedProvider {
    fn metadata(&self) -> Metadata {
        self.metadata.clone()
    }

    fn data(&self) -> figment::Result<Map<Profile, Dict>> {
        Ok(Profile::Default.collect(self.dict.clone()))
    }
}
