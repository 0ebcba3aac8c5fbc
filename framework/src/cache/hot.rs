//! A controller's store of the objects the queue handed it, for a
//! compact cache (see `compact.rs`): kube-runtime's controller looks each
//! object up in a store of typed objects when it starts its reconcile.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;

use super::key::{Key, lookup};
use super::lock;
use crate::object::AnyObject;

/// A controller's store of the typed objects it is reconciling, for
/// kube-runtime's controller to look them up in.
pub(crate) struct Hot<K: AnyObject> {
    held: Mutex<Held<K>>,
    reader: reflector::Store<K>,
    dyntype: K::DynamicType,
    /// An object of `K` with nothing set, when the type has one: taking an
    /// object out names it on a copy of this instead of cloning the held
    /// one (kube-runtime's store removes by the name only).
    blank: Option<K>,
}

/// The store's writer, and the keys it holds: the cache's every watch
/// event asks whether its object is held, and most are not; the keys
/// answer with the borrowed namespace and name (kube-runtime's store would
/// need an `ObjectRef` built, and clones a missed namespaced one to try it
/// cluster-wide).
struct Held<K: AnyObject> {
    writer: reflector::store::Writer<K>,
    keys: HashSet<Key>,
}

impl<K: AnyObject> Held<K> {
    fn holds(&self, namespace: Option<&str>, name: &str) -> bool {
        self.keys.contains(lookup(&(namespace, name)))
    }
}

impl<K: AnyObject> Hot<K> {
    /// An empty store, ready at once: the queue hands the controller
    /// nothing before the cache's first list is in.
    pub(crate) fn new(dyntype: K::DynamicType) -> Arc<Self> {
        let mut writer = reflector::store::Writer::<K>::new(dyntype.clone());
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        // A type whose fields are all optional decodes from an empty
        // object; one with a required field keeps cloning.
        let blank = serde_json::from_slice::<K>(b"{\"metadata\":{}}").ok();
        Arc::new(Hot {
            reader: writer.as_reader(),
            held: Mutex::new(Held {
                writer,
                keys: HashSet::new(),
            }),
            dyntype,
            blank,
        })
    }

    pub(crate) fn reader(&self) -> reflector::Store<K> {
        self.reader.clone()
    }

    /// Puts `object` in and returns the store's copy (`None` only if
    /// the store lost it, which the writer's lock rules out).
    pub(crate) fn insert(&self, object: K) -> Option<Arc<K>> {
        let key = ObjectRef::from_obj_with(&object, self.dyntype.clone());
        let mut held = lock(&self.held);
        held.keys.insert((key.namespace.clone(), key.name.clone()));
        held.writer
            .apply_watcher_event(&watcher::Event::Apply(object));
        // Read under the lock: nothing removes it in between.
        let copy = self.reader.get(&key);
        drop(held);
        copy
    }

    /// Replaces the copy of `object`, if the store holds one.
    pub(crate) fn refresh(&self, object: &K) {
        let meta = object.meta();
        let Some(name) = meta.name.as_deref() else {
            return;
        };
        let mut held = lock(&self.held);
        if held.holds(meta.namespace.as_deref(), name) {
            held.writer
                .apply_watcher_event(&watcher::Event::Apply(object.clone()));
        }
    }

    /// Takes `namespace`/`name` out.
    pub(crate) fn remove(&self, namespace: Option<&str>, name: &str) {
        let mut held = lock(&self.held);
        if !held.holds(namespace, name) {
            return;
        }
        held.keys.remove(lookup(&(namespace, name)));
        let named = match &self.blank {
            Some(blank) => {
                let mut named = blank.clone();
                named.meta_mut().name = Some(name.to_owned());
                named.meta_mut().namespace = namespace.map(str::to_owned);
                named
            }
            None => {
                let key = super::object_ref::<K>(namespace, name, &self.dyntype);
                match self.reader.get(&key) {
                    Some(object) => object.as_ref().clone(),
                    None => return,
                }
            }
        };
        held.writer
            .apply_watcher_event(&watcher::Event::Delete(named));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn named<K: AnyObject + Default>(name: &str) -> K {
        let mut object = K::default();
        object.meta_mut().name = Some(name.into());
        object.meta_mut().namespace = Some("default".into());
        object
    }

    fn round_trip<K: AnyObject<DynamicType = ()> + Default>() {
        let hot = Hot::<K>::new(());
        let reader = hot.reader();
        let key = ObjectRef::<K>::new("a").within("default");
        assert!(hot.insert(named("a")).is_some());
        hot.insert(named("b"));
        assert!(reader.get(&key).is_some());
        hot.remove(Some("default"), "a");
        assert!(reader.get(&key).is_none(), "taken out");
        assert_eq!(reader.len(), 1, "only the one named");
        hot.remove(Some("default"), "a");
        hot.remove(None, "b");
        assert_eq!(reader.len(), 1, "a cluster-scoped name is another object");
        // A refresh replaces a held copy and never puts one in.
        let mut newer: K = named("b");
        newer.meta_mut().resource_version = Some("2".into());
        hot.refresh(&newer);
        let b = ObjectRef::<K>::new("b").within("default");
        let held = reader.get(&b).expect("b is held");
        assert_eq!(held.meta().resource_version.as_deref(), Some("2"));
        hot.refresh(&named("a"));
        let mut elsewhere: K = named("b");
        elsewhere.meta_mut().namespace = Some("other".into());
        hot.refresh(&elsewhere);
        assert!(reader.get(&key).is_none(), "a taken-out object stays out");
        assert_eq!(reader.len(), 1, "nor does another namespace's");
        hot.remove(Some("default"), "b");
        hot.refresh(&newer);
        assert_eq!(reader.len(), 0, "nor one taken out after a refresh");
    }

    /// A kind with a required field, as a CRD's `spec` often is.
    #[derive(Clone, Debug, Default, serde::Deserialize, serde::Serialize)]
    struct Required {
        metadata: ObjectMeta,
        spec: String,
    }

    impl k8s_openapi::Resource for Required {
        const API_VERSION: &'static str = "example.com/v1";
        const GROUP: &'static str = "example.com";
        const KIND: &'static str = "Required";
        const VERSION: &'static str = "v1";
        const URL_PATH_SEGMENT: &'static str = "requireds";
        type Scope = k8s_openapi::NamespaceResourceScope;
    }

    impl k8s_openapi::Metadata for Required {
        type Ty = ObjectMeta;
        fn metadata(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn metadata_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    #[test]
    fn an_object_is_taken_out_by_its_name_without_a_copy_when_the_type_allows() {
        assert!(Hot::<ConfigMap>::new(()).blank.is_some());
        round_trip::<ConfigMap>();
        // No blank object of a kind with a required field: a copy of the
        // held one names it.
        assert!(Hot::<Required>::new(()).blank.is_none());
        round_trip::<Required>();
    }
}
