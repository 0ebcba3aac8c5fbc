//! Whether a view of an object lines up with the stored object: a view's
//! list addresses entries by index, which is safe only where each entry of
//! the view is the stored entry at the same index as the type sees it.
//!
//! A Rust type and the stored JSON can say the same thing in different
//! bytes (`1` and `1.0`, a time with and without fractions), so a stored
//! entry is compared with a view's entry in the type's own terms: decoded
//! through the same type and encoded again ([`Entries`]), never by its
//! bytes alone.

use std::cell::OnceCell;

use serde_json::Value;

use crate::model::change::{Step, value_at};

/// A type's view of a whole object: the object decoded through the type
/// and encoded again; `None` where it does not decode.
pub(crate) type View<'a> = &'a dyn Fn(&Value) -> Option<Value>;

/// The value at `path` in `object`, if any, to change it.
fn value_at_mut<'a>(object: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(object, |value, step| match step {
        Step::Key(key) => value.get_mut(key),
        Step::Index(index) => value.get_mut(index),
    })
}

/// The stored entries of the list at one path of a raw object, each seen
/// as the type sees it: the object with that entry alone in place of the
/// list, decoded through the type, encoded again, and the entry read back.
/// The round trip is only ever compared with and used to locate; nothing
/// of it is written.
pub(crate) struct Entries<'a> {
    root: &'a Value,
    path: &'a [Step],
    view: View<'a>,
    stored: &'a [Value],
    seen: Vec<OnceCell<Option<Value>>>,
}

impl<'a> Entries<'a> {
    /// The list at `path` in `root`, seen through `view`; `None` where
    /// `root` holds no list there.
    pub(crate) fn new(root: &'a Value, path: &'a [Step], view: View<'a>) -> Option<Self> {
        let Some(Value::Array(stored)) = value_at(root, path) else {
            return None;
        };
        Some(Entries {
            root,
            path,
            view,
            stored,
            seen: stored.iter().map(|_| OnceCell::new()).collect(),
        })
    }

    /// The stored entries.
    pub(crate) fn stored(&self) -> &'a [Value] {
        self.stored
    }

    /// The type's view of `entry` as an entry of this list.
    pub(crate) fn view_of(&self, entry: &Value) -> Option<Value> {
        let mut probe = self.root.clone();
        *value_at_mut(&mut probe, self.path)? = Value::Array(vec![entry.clone()]);
        let seen = (self.view)(&probe)?;
        match value_at(&seen, self.path) {
            Some(Value::Array(one)) if one.len() == 1 => one.first().cloned(),
            _ => None,
        }
    }

    /// Whether the view's entry `seen` shows stored entry `index`: byte
    /// for byte where the encodings agree, else in the type's own terms.
    pub(crate) fn shows(&self, seen: &Value, index: usize) -> bool {
        let Some(stored) = self.stored.get(index) else {
            return false;
        };
        covers(seen, stored)
            || self.seen[index]
                .get_or_init(|| self.view_of(stored))
                .as_ref()
                == Some(seen)
    }

    /// Whether the view's list `seen` shows the stored list entry for
    /// entry, each at its index.
    pub(crate) fn aligned(&self, seen: &[Value]) -> bool {
        seen.len() == self.stored.len() && seen.iter().enumerate().all(|(i, v)| self.shows(v, i))
    }
}

/// The outermost list on `path` (or at it) whose stored entries in `raw`
/// the view's entries in `seen` do not show one for one, as `view` sees
/// them. Lists found aligned are remembered in `aligned`.
pub(crate) fn misaligned_list(
    raw: &Value,
    seen: &Value,
    path: &[Step],
    view: View<'_>,
    aligned: &mut Vec<Vec<Step>>,
) -> Option<Vec<Step>> {
    for end in 0..=path.len() {
        let prefix = &path[..end];
        if aligned.iter().any(|done| done == prefix) {
            continue;
        }
        let Some(Value::Array(shown)) = value_at(seen, prefix) else {
            continue;
        };
        let Some(entries) = Entries::new(raw, prefix, view) else {
            continue;
        };
        if !entries.aligned(shown) {
            return Some(prefix.to_vec());
        }
        aligned.push(prefix.to_vec());
    }
    None
}

/// Whether the view's `seen` is a projection of the stored `stored`: every
/// field it shows holds the stored value (or a type's default where the
/// server stores nothing). Bytes only: [`Entries::shows`] adds the type's
/// own terms.
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
