//! Whether a view of an object lines up with the stored object: a view's
//! list addresses entries by index, which is safe only where each entry of
//! the view is a projection of the stored entry at the same index.

use serde_json::Value;

use crate::change::Step;

/// The value at `path` in `object`, if any.
pub(crate) fn value_at<'a>(object: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, step| match step {
        Step::Key(key) => value.get(key),
        Step::Index(index) => value.get(index),
    })
}

/// The outermost list on `path` (or at it) whose stored entries the view's
/// do not cover one for one.
pub(crate) fn misaligned_list(raw: &Value, view: &Value, path: &[Step]) -> Option<Vec<Step>> {
    for end in 0..=path.len() {
        let prefix = &path[..end];
        let (Some(Value::Array(stored)), Some(Value::Array(seen))) =
            (value_at(raw, prefix), value_at(view, prefix))
        else {
            continue;
        };
        let aligned =
            stored.len() == seen.len() && seen.iter().zip(stored).all(|(v, s)| covers(v, s));
        return (!aligned).then(|| prefix.to_vec());
    }
    None
}

/// Whether the view's `seen` is a projection of the stored `stored`: every
/// field it shows holds the stored value (or a type's default where the
/// server stores nothing).
pub(crate) fn covers(seen: &Value, stored: &Value) -> bool {
    match (seen, stored) {
        (Value::Object(seen), Value::Object(stored)) => {
            seen.iter().all(|(k, v)| match stored.get(k) {
                Some(s) => covers(v, s),
                None => is_default(v),
            })
        }
        (Value::Array(seen), Value::Array(stored)) => {
            seen.len() == stored.len() && seen.iter().zip(stored).all(|(v, s)| covers(v, s))
        }
        _ => seen == stored,
    }
}

fn is_default(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Array(l) => l.is_empty(),
        Value::Object(m) => m.values().all(is_default),
    }
}

/// Whether two list entries name the same thing by a merge key.
pub(crate) fn same_identity(a: &Value, b: &Value) -> bool {
    ["name", "type", "key"]
        .iter()
        .any(|k| matches!((a.get(k), b.get(k)), (Some(x @ Value::String(_)), Some(y)) if x == y))
}
