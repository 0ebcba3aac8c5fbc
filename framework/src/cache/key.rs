//! The key of a cached object, its namespace and name, and asking a map
//! of keys about an object without building its key: the compact cache
//! and the queue are asked on every watch event and every reconcile, and
//! an owned key is two strings.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Namespace and name.
pub(crate) type Key = (Option<String>, String);

/// A key's namespace and name, borrowed.
pub(crate) trait Parts {
    fn parts(&self) -> (Option<&str>, &str);
}

impl Parts for Key {
    fn parts(&self) -> (Option<&str>, &str) {
        (self.0.as_deref(), &self.1)
    }
}

impl Parts for (Option<&str>, &str) {
    fn parts(&self) -> (Option<&str>, &str) {
        *self
    }
}

impl<'a> Borrow<dyn Parts + 'a> for Key {
    fn borrow(&self) -> &(dyn Parts + 'a) {
        self
    }
}

// `Borrow` requires the borrowed form to hash as the owned one does: a
// tuple hashes its fields in order, an `Option` its variant then its
// value, and a `String` as its `str`, so the borrowed parts hash as `Key`.
impl Hash for dyn Parts + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn Parts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Parts + '_ {}

/// `parts` as what a map of [`Key`]s is asked with:
/// `map.get(lookup(&(namespace, name)))`.
pub(crate) fn lookup<'a>(parts: &'a (Option<&'a str>, &'a str)) -> &'a (dyn Parts + 'a) {
    parts
}

/// The owned key of `namespace`/`name`.
pub(crate) fn key(namespace: Option<&str>, name: &str) -> Key {
    (namespace.map(str::to_owned), name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};
    use std::hash::BuildHasher;

    const KEYS: [(Option<&str>, &str); 6] = [
        (None, "a"),
        (Some(""), "a"),
        (Some("a"), ""),
        (Some("default"), "cm"),
        (Some("ns-ü"), "名前"),
        (None, ""),
    ];

    #[test]
    fn a_borrowed_key_hashes_and_compares_as_its_owned_key() {
        let map: HashMap<Key, usize> = KEYS
            .iter()
            .enumerate()
            .map(|(i, (ns, name))| (key(*ns, name), i))
            .collect();
        let hasher = map.hasher();
        for (i, parts) in KEYS.iter().enumerate() {
            let owned = key(parts.0, parts.1);
            assert_eq!(
                hasher.hash_one(&owned),
                hasher.hash_one(lookup(parts)),
                "{parts:?}"
            );
            assert_eq!(map.get(lookup(parts)), Some(&i), "{parts:?}");
        }
        // A namespace is not a name, nor absent the same as empty.
        let set: HashSet<Key> = [key(Some("a"), "b")].into_iter().collect();
        assert!(set.contains(lookup(&(Some("a"), "b"))));
        assert!(!set.contains(lookup(&(Some("b"), "a"))));
        assert!(!set.contains(lookup(&(None, "b"))));
        assert!(!set.contains(lookup(&(Some(""), "b"))));
    }
}
