//! Reading an object that leaves out fields its Rust type requires, as a
//! defaulter must: each missing field is read as its zero value, and the
//! framework remembers which ones it filled so that none reaches the API
//! server unless the defaulter changed it.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::zero::skeleton;

/// At most this many rounds of "missing field" answers are filled; a type
/// needing more is read strictly.
const MAX_ROUNDS: usize = 64;

/// An object read as `K` with its missing fields filled.
pub(crate) struct Filled<K> {
    /// The object as `K`.
    pub(crate) typed: K,
    /// The JSON the API server sent plus the filled fields.
    pub(crate) value: Value,
    /// Where a zero was put (a JSON pointer), and which zero, outermost
    /// first.
    pub(crate) fills: Vec<(String, Value)>,
}

/// Reads `raw` as `K`, filling every field `K` requires and `raw` leaves
/// out with its zero value (`""`, `0`, `false`, `[]`, `{}`).
///
/// # Errors
///
/// The last decoding error when `raw` is no `K` for another reason than
/// a missing field (a value out of range, a wrong type), or when `K` has no
/// zero value for the missing field.
pub(crate) fn read_filling<K: DeserializeOwned + Serialize>(
    raw: &Value,
) -> Result<Filled<K>, serde_json::Error> {
    let mut value = raw.clone();
    let mut fills = Vec::new();
    let mut zero: Option<Option<Value>> = None;
    let mut rounds = 0;
    loop {
        let error = match serde_json::from_value::<K>(value.clone()) {
            Ok(typed) => {
                return Ok(Filled {
                    typed,
                    value,
                    fills,
                });
            }
            Err(error) => error,
        };
        rounds += 1;
        let Some(field) = missing_field(&error) else {
            return Err(error);
        };
        let Some(zero) = zero.get_or_insert_with(skeleton::<K>) else {
            return Err(error);
        };
        let before = fills.len();
        fill(&mut value, zero, &field, &mut String::new(), &mut fills);
        if fills.len() == before || rounds >= MAX_ROUNDS {
            return Err(error);
        }
    }
}

/// The field of serde's "missing field `name`" error.
fn missing_field(error: &serde_json::Error) -> Option<String> {
    let text = error.to_string();
    let rest = text.strip_prefix("missing field `")?;
    let (name, _) = rest.split_once('`')?;
    Some(name.to_owned())
}

/// Puts `field`'s zero wherever `zero` has it and `target` does not, in
/// objects that both have at the same place; records each one in `fills`.
/// Objects and lists are filled empty: their own missing fields come in
/// the next round, so that fields with a serde default keep it.
fn fill(
    target: &mut Value,
    zero: &Value,
    field: &str,
    at: &mut String,
    fills: &mut Vec<(String, Value)>,
) {
    match (target, zero) {
        (Value::Object(target), Value::Object(zero)) => {
            if let (false, Some(z)) = (target.contains_key(field), zero.get(field)) {
                let placeholder = match z {
                    Value::Object(_) => Value::Object(serde_json::Map::new()),
                    Value::Array(_) => Value::Array(Vec::new()),
                    scalar => scalar.clone(),
                };
                fills.push((pointer(at, field), placeholder.clone()));
                target.insert(field.to_owned(), placeholder);
            }
            for (key, value) in target.iter_mut() {
                if let Some(z) = zero.get(key) {
                    let len = at.len();
                    at.push_str(&pointer("", key));
                    fill(value, z, field, at, fills);
                    at.truncate(len);
                }
            }
        }
        (Value::Array(target), Value::Array(zero)) => {
            if let Some(z) = zero.first() {
                for (index, value) in target.iter_mut().enumerate() {
                    let len = at.len();
                    at.push_str(&format!("/{index}"));
                    fill(value, z, field, at, fills);
                    at.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// `at` followed by `/key`, escaped as RFC 6901 says.
fn pointer(at: &str, key: &str) -> String {
    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// Removes the fills still holding their zero from `value`, innermost
/// first: what the defaulter did not set is not sent.
pub(crate) fn remove_unchanged_fills(value: &mut Value, fills: &[(String, Value)]) {
    for (at, zero) in fills.iter().rev() {
        if value.pointer(at) != Some(zero) {
            continue;
        }
        let Some((parent, key)) = at.rsplit_once('/') else {
            continue;
        };
        let key = key.replace("~1", "/").replace("~0", "~");
        if let Some(Value::Object(parent)) = value.pointer_mut(parent) {
            parent.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Object {
        spec: Spec,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Spec {
        message: String,
        #[serde(default = "one")]
        shards: i32,
        items: Vec<Item>,
    }

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Item {
        name: String,
        #[serde(default)]
        weight: i32,
    }

    fn one() -> i32 {
        1
    }

    #[test]
    fn missing_fields_read_as_zero_and_serde_defaults_stay() {
        let raw = json!({"spec": {"items": [{"weight": 3}, {"name": "b"}]}});
        let filled = read_filling::<Object>(&raw).unwrap();
        assert_eq!(filled.typed.spec.message, "");
        assert_eq!(filled.typed.spec.shards, 1, "the serde default, not 0");
        assert_eq!(filled.typed.spec.items[0].name, "");
        assert_eq!(filled.typed.spec.items[1].name, "b");
        let mut places: Vec<_> = filled.fills.iter().map(|(p, _)| p.as_str()).collect();
        places.sort_unstable();
        assert_eq!(places, ["/spec/items/0/name", "/spec/message"]);
    }

    #[test]
    fn a_missing_object_is_filled_field_by_field() {
        let filled = read_filling::<Object>(&json!({})).unwrap();
        assert_eq!(filled.typed.spec.shards, 1);
        let mut value = filled.value;
        remove_unchanged_fills(&mut value, &filled.fills);
        assert_eq!(value, json!({}), "nothing the defaulter left is sent");
    }

    #[test]
    fn a_bad_value_is_still_an_error_naming_it() {
        let raw = json!({"spec": {"message": "m", "shards": "many", "items": []}});
        let error = read_filling::<Object>(&raw).err().unwrap();
        assert!(
            error.to_string().contains("invalid type: string \"many\""),
            "{error}"
        );
    }

    #[test]
    fn changed_fills_stay_and_unchanged_ones_go() {
        let raw = json!({"spec": {"items": [{}]}});
        let filled = read_filling::<Object>(&raw).unwrap();
        let mut value = filled.value.clone();
        value["spec"]["message"] = json!("hello");
        remove_unchanged_fills(&mut value, &filled.fills);
        assert_eq!(value, json!({"spec": {"message": "hello", "items": [{}]}}));
    }
}
