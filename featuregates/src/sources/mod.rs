//! Reading the configuration sources and merging them with figment.

mod loader;
mod locator;
mod provider;

pub use loader::ConfigLoader;
pub(crate) use locator::Locator;

use figment::value::Value;

/// The environment variable holding a `--feature-gates` style list.
pub const ENV_FEATURE_GATES: &str = "CONCORD_FEATURE_GATES";
/// The prefix of per-gate environment variables: `CONCORD_GATE_<NAME>`,
/// where `<NAME>` matches a gate name ignoring case and underscores
/// (`CONCORD_GATE_REMOVE_FINALIZERS_WITH_STRICT_PATCH`).
pub const ENV_GATE_PREFIX: &str = "CONCORD_GATE_";

pub(crate) const FEATURE_GATES_KEY: &str = "featureGates";
pub(crate) const STRATEGIES_KEY: &str = "strategies";

/// A dotted key path; segments that contain dots or slashes (resource
/// forms) are quoted so the path stays unambiguous.
pub(crate) fn join_key(path: &[&str]) -> String {
    let quoted: Vec<String> = path
        .iter()
        .map(|segment| match segment.contains(['.', '/']) {
            true => format!("\"{segment}\""),
            false => (*segment).to_owned(),
        })
        .collect();
    quoted.join(".")
}

/// A short description of a value for error messages; long strings are
/// cut so that a huge value does not flood the report.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::String(_, text) if text.chars().count() > 40 => {
            format!("`{}…`", text.chars().take(40).collect::<String>())
        }
        Value::String(_, text) => format!("`{text}`"),
        Value::Char(_, c) => format!("`{c}`"),
        Value::Bool(_, b) => format!("the boolean {b}"),
        Value::Num(..) => match (value.to_u128(), value.to_i128(), number(value)) {
            (Some(n), _, _) => format!("the number {n}"),
            (_, Some(n), _) => format!("the number {n}"),
            (_, _, Some(f)) => format!("the number {f}"),
            _ => "a number".to_owned(),
        },
        Value::Empty(..) => "null".to_owned(),
        Value::Dict(..) => "a mapping".to_owned(),
        Value::Array(..) => "a list".to_owned(),
    }
}

/// Any YAML number as a float; figment only converts floats itself.
pub(crate) fn number(value: &Value) -> Option<f64> {
    #[allow(clippy::cast_precision_loss)]
    value
        .to_f64()
        .or_else(|| value.to_i128().map(|n| n as f64))
        .or_else(|| value.to_u128().map(|n| n as f64))
}
