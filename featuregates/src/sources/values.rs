//! Configuration values in error messages: how a value is described, and
//! any YAML number read as a float.

use figment::value::Value;

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
