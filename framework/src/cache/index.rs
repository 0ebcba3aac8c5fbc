//! Indexes on a shared cache: for each object, the keys an author's
//! function gives it (the ConfigMap a Mirror names, the node a Pod runs
//! on), kept as the watch applies events, so that "which objects have key
//! `k`" is answered without decoding or scanning the cache.
//!
//! The function runs on the copy the watch delivered, once per event: a
//! compact cache decodes nothing for its indexes. An index follows the
//! store: a relist's objects are indexed when its list is complete, as the
//! store takes them, and an object the store dropped leaves the index.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use super::key::Key;
use super::lock;

/// The keys an index gives one object.
pub(crate) type KeyFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// One named index of a cache.
pub(crate) struct Index<K> {
    name: String,
    keys: KeyFn<K>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The objects under each key.
    objects: HashMap<String, BTreeSet<Key>>,
    /// The keys of each indexed object.
    keys: HashMap<Key, Vec<String>>,
    /// What a list in progress delivered, indexed when it is complete.
    staged: Vec<(Key, Vec<String>)>,
}

impl State {
    fn set(&mut self, object: Key, keys: Vec<String>) {
        self.remove(&object);
        for key in &keys {
            self.objects
                .entry(key.clone())
                .or_default()
                .insert(object.clone());
        }
        if !keys.is_empty() {
            self.keys.insert(object, keys);
        }
    }

    fn remove(&mut self, object: &Key) {
        for key in self.keys.remove(object).unwrap_or_default() {
            if let Some(objects) = self.objects.get_mut(&key) {
                objects.remove(object);
                if objects.is_empty() {
                    self.objects.remove(&key);
                }
            }
        }
    }
}

impl<K> Index<K> {
    pub(crate) fn new(name: String, keys: KeyFn<K>) -> Self {
        Index {
            name,
            keys,
            state: Mutex::new(State::default()),
        }
    }

    /// The objects under `key`, by namespace and name.
    pub(crate) fn lookup(&self, key: &str) -> Vec<Key> {
        lock(&self.state)
            .objects
            .get(key)
            .map(|objects| objects.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many objects carry at least one key.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).keys.len()
    }
}

/// Every index of one cache.
pub(crate) struct Indexes<K>(Mutex<Vec<Arc<Index<K>>>>);

impl<K> Default for Indexes<K> {
    fn default() -> Self {
        Indexes(Mutex::new(Vec::new()))
    }
}

impl<K> Indexes<K> {
    /// Adds `index` unless one of its name is there; `false` if it was.
    pub(crate) fn add(&self, index: Arc<Index<K>>) -> bool {
        let mut indexes = lock(&self.0);
        if indexes.iter().any(|i| i.name == index.name) {
            return false;
        }
        indexes.push(index);
        true
    }

    /// The index called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Index<K>>> {
        lock(&self.0).iter().find(|i| i.name == name).cloned()
    }

    /// The names of every index, for an error that lists them.
    pub(crate) fn names(&self) -> Vec<String> {
        lock(&self.0).iter().map(|i| i.name.clone()).collect()
    }

    fn each(&self, mut f: impl FnMut(&Index<K>, &mut State)) {
        for index in lock(&self.0).iter() {
            f(index, &mut lock(&index.state));
        }
    }

    /// `object` (at `key`) is in the store now.
    pub(crate) fn applied(&self, key: &Key, object: &K) {
        self.each(|index, state| state.set(key.clone(), (index.keys)(object)));
    }

    /// `object` (at `key`) came in a list still in progress.
    pub(crate) fn listed(&self, key: &Key, object: &K) {
        self.each(|index, state| state.staged.push((key.clone(), (index.keys)(object))));
    }

    /// A list starts over: what an unfinished one delivered is dropped.
    pub(crate) fn list_started(&self) {
        self.each(|_, state| state.staged.clear());
    }

    /// The list is complete and the store holds exactly what `holds`
    /// says: the listed objects are indexed, and the objects it dropped
    /// leave.
    pub(crate) fn list_done(&self, holds: impl Fn(&Key) -> bool) {
        self.each(|_, state| {
            for (object, keys) in std::mem::take(&mut state.staged) {
                state.set(object, keys);
            }
            let gone: Vec<Key> = state.keys.keys().filter(|k| !holds(k)).cloned().collect();
            for object in gone {
                state.remove(&object);
            }
        });
    }

    /// `key` left the store.
    pub(crate) fn removed(&self, key: &Key) {
        self.each(|_, state| state.remove(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        (Some("ns".to_owned()), name.to_owned())
    }

    fn by_source() -> Indexes<(String, Vec<&'static str>)> {
        let indexes = Indexes::default();
        let keys: KeyFn<(String, Vec<&'static str>)> =
            Arc::new(|o| o.1.iter().map(|s| (*s).to_owned()).collect());
        assert!(indexes.add(Arc::new(Index::new("source".into(), keys.clone()))));
        assert!(
            !indexes.add(Arc::new(Index::new("source".into(), keys))),
            "one index per name"
        );
        indexes
    }

    #[test]
    fn an_index_follows_applies_deletes_and_moves() {
        let indexes = by_source();
        let index = indexes.get("source").unwrap();
        indexes.applied(&key("m1"), &("m1".into(), vec!["a", "b"]));
        indexes.applied(&key("m2"), &("m2".into(), vec!["a"]));
        assert_eq!(index.lookup("a"), [key("m1"), key("m2")]);
        assert_eq!(index.lookup("b"), [key("m1")]);
        // m1 now names c only.
        indexes.applied(&key("m1"), &("m1".into(), vec!["c"]));
        assert_eq!(index.lookup("a"), [key("m2")]);
        assert!(index.lookup("b").is_empty());
        indexes.removed(&key("m2"));
        assert!(index.lookup("a").is_empty());
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn a_relist_indexes_when_complete_and_drops_what_the_store_dropped() {
        let indexes = by_source();
        let index = indexes.get("source").unwrap();
        indexes.applied(&key("old"), &("old".into(), vec!["a"]));
        indexes.list_started();
        indexes.listed(&key("new"), &("new".into(), vec!["a"]));
        assert_eq!(
            index.lookup("a"),
            [key("old")],
            "the store still holds the old state"
        );
        indexes.list_done(|k| *k == key("new"));
        assert_eq!(index.lookup("a"), [key("new")]);
        assert_eq!(index.len(), 1);
    }
}
