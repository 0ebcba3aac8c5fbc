//! Objects to YAML values and text, and YAML text to documents.

use serde_yaml::Value;

use crate::Error;

pub(super) fn to_value(object: impl serde::Serialize, what: &'static str) -> Result<Value, Error> {
    serde_yaml::to_value(object).map_err(|source| Error::Serialize { what, source })
}

/// The YAML documents of `yaml`, blank ones skipped; each must have a kind.
pub(super) fn documents(yaml: &str, source: &str) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value: Value =
            serde::Deserialize::deserialize(document).map_err(|e| Error::BadManifest {
                source_name: source.to_owned(),
                message: e.to_string(),
            })?;
        if value.is_null() {
            continue;
        }
        if value.get("kind").and_then(Value::as_str).is_none() {
            return Err(Error::BadManifest {
                source_name: source.to_owned(),
                message: format!("document {} has no kind", out.len() + 1),
            });
        }
        out.push(value);
    }
    Ok(out)
}

/// One object as YAML, without a document marker.
pub(super) fn yaml(value: &Value, what: &'static str) -> Result<String, Error> {
    serde_yaml::to_string(value).map_err(|source| Error::Serialize { what, source })
}
