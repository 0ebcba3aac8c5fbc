//! The shared cache's unit tests.

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use kube::core::ApiResource;

use super::shared::SharedCache;
use super::watch::Relists;
use super::*;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;

/// Runs `test` on a runtime of its own, with a client of a server that
/// is not there: these tests feed the cache's watch by hand.
fn offline<F: std::future::Future<Output = ()>>(test: impl FnOnce(kube::Client) -> F) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    runtime.block_on(async { test(kube::Client::try_from(config).unwrap()).await });
}

fn selection(labels: &str) -> Selection {
    Selection::default().with_labels(Some(crate::selector::label_selector(labels).unwrap()))
}

#[test]
fn one_selection_is_one_watch_and_another_is_another() {
    offline(|client| async move {
        let all = Api::<ConfigMap>::all(client.clone());
        let caches = Caches::default();
        let trim = CacheTrim::default();
        let (first, watch) = caches.shared(
            &all,
            Vec::new(),
            selection("b=2,a=1"),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        assert!(watch.is_some());
        let (same, watch) = caches.shared(
            &all,
            Vec::new(),
            selection(" a=1 , b=2"),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        assert!(
            watch.is_none(),
            "the same selection, spelled otherwise, shares"
        );
        assert!(Arc::ptr_eq(&first, &same));
        let (_, watch) = caches.shared(
            &all,
            Vec::new(),
            selection("a=1"),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        assert!(watch.is_some(), "another selector, another watch");
        let a = Api::<ConfigMap>::namespaced(client.clone(), "a");
        let b = Api::<ConfigMap>::namespaced(client, "b");
        let (set, watch) = caches.shared(
            &a,
            vec![b.clone()],
            Selection::default(),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        assert!(watch.is_some());
        let (alone, watch) = caches.shared(
            &a,
            Vec::new(),
            Selection::default(),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        assert!(
            watch.is_some(),
            "a namespace set is not one of its namespaces"
        );
        assert!(!Arc::ptr_eq(&set, &alone));
        let (again, watch) = caches.shared(
            &a,
            vec![b],
            Selection::default(),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        assert!(watch.is_none() && Arc::ptr_eq(&set, &again));
    });
}

fn config_map(namespace: &str, name: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some(namespace.into());
    cm.metadata.resource_version = Some("1".into());
    cm
}

#[test]
fn a_namespace_relist_replaces_only_its_own_objects() {
    for layout in [CacheLayout::Decoded, CacheLayout::Compact] {
        a_namespace_relist_replaces_only_its_own_objects_in(layout);
    }
}

fn a_namespace_relist_replaces_only_its_own_objects_in(layout: CacheLayout) {
    offline(|client| async move {
        let a = Api::<ConfigMap>::namespaced(client.clone(), "a");
        let b = Api::<ConfigMap>::namespaced(client, "b");
        let cache = SharedCache::new(
            a.clone(),
            vec![a, b],
            Selection::default(),
            CacheTrim::default(),
            layout,
            (),
        );
        let mut announced = cache.subscribe(None, Fairness::with_slots(0));
        let mut writer = lock(&cache.writer).take().unwrap();
        let mut relists = Relists::new(2);
        let held = |cache: &SharedCache<ConfigMap>| {
            let mut names: Vec<String> = cache
                .store()
                .keys()
                .into_iter()
                .map(|(namespace, name)| format!("{}/{name}", namespace.unwrap()))
                .collect();
            names.sort();
            names
        };
        use watcher::Event::{Init, InitApply, InitDone};
        for (i, event) in [
            (0, Init),
            (0, InitApply(config_map("a", "x"))),
            (0, InitDone),
            (1, Init),
            (1, InitApply(config_map("b", "y"))),
        ] {
            cache.apply(&mut writer, &mut relists, i, event);
        }
        assert!(!cache.store().is_ready(), "b still lists ({layout:?})");
        cache.apply(&mut writer, &mut relists, 1, InitDone);
        assert!(cache.store().is_ready(), "all listed ({layout:?})");
        assert_eq!(held(&cache), ["a/x", "b/y"]);
        // `a` relists after a gap: `x` was deleted meanwhile, `z` created.
        for event in [Init, InitApply(config_map("a", "z")), InitDone] {
            cache.apply(&mut writer, &mut relists, 0, event);
        }
        assert_eq!(held(&cache), ["a/z", "b/y"], "b's objects stay");
        let mut names = Vec::new();
        while let Some(Some(object)) = announced.next().now_or_never() {
            names.push(object.name_any());
        }
        // Keys, looked up at their turn: `x` was deleted before it.
        assert_eq!(names, ["y", "z"], "{layout:?}");
    });
}

/// A view of ConfigMaps: metadata and data.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Data {
    metadata: kube::core::ObjectMeta,
    data: Option<std::collections::BTreeMap<String, String>>,
}

crate::view!(Data, of = ConfigMap);

#[test]
fn a_reread_is_served_by_another_types_cache_only_where_its_copy_is_exact() {
    use kube::core::{DynamicObject, PartialObjectMeta};
    use serde_json::json;
    offline(|client| async move {
        let caches = Arc::new(Caches::default());
        let trim = CacheTrim::default();
        let resource = ApiResource::erase::<ConfigMap>(&());
        // As the API server stores it, with a field `ConfigMap` lacks.
        let stored = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "cm", "namespace": "ns", "uid": "u-1", "resourceVersion": "5",
                "labels": {"team": "a&b <ü>"},
                "annotations": {LAST_APPLIED: "{}", "note": "x < y & ü"},
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
            },
            "data": {"k": "v"},
            "newerField": "kept",
        });
        // Each cache holds it as its watch stores it: decoded, then trimmed.
        let typed_api = Api::<ConfigMap>::all(client.clone());
        let (typed, _) = caches.shared(
            &typed_api,
            Vec::new(),
            Selection::default(),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        let mut cm: ConfigMap = serde_json::from_value(stored.clone()).unwrap();
        trim.apply(&mut cm);
        let mut fill = lock(&typed.writer).take().unwrap();
        fill.apply_watcher_event(&watcher::Event::Apply(cm.clone()));
        let reread = |copies: &CachedCopies| {
            use concord_strategies::FreshCopies;
            copies
                .newer(Some("ns"), "cm", "4", Duration::ZERO)
                .now_or_never()
                .flatten()
        };

        let metadata =
            CachedCopies::new::<PartialObjectMeta<ConfigMap>>(caches.clone(), resource.clone());
        let copy = reread(&metadata).expect("a metadata-only writer reads any cache");
        let trimmed = serde_json::to_value(&cm.metadata).unwrap();
        assert_eq!(
            copy.json(),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": trimmed}),
        );
        assert!(trimmed["annotations"].get(LAST_APPLIED).is_none());
        assert!(!copy.is_complete());

        let view = CachedCopies::new::<Data>(caches.clone(), resource.clone());
        assert_eq!(reread(&view), None, "a view never reads a typed cache");

        let dynamic_api = Api::<DynamicObject>::all_with(client.clone(), &resource);
        let (dynamic, _) = caches.shared(
            &dynamic_api,
            Vec::new(),
            Selection::default(),
            trim,
            CacheLayout::Decoded,
            &resource,
        );
        let mut object: DynamicObject = serde_json::from_value(stored.clone()).unwrap();
        trim.apply(&mut object);
        let mut fill = lock(&dynamic.writer).take().unwrap();
        fill.apply_watcher_event(&watcher::Event::Apply(object));
        let copy = reread(&view).expect("a view reads a DynamicObject cache");
        let mut own: Data = serde_json::from_value(stored.clone()).unwrap();
        trim.apply(&mut own);
        assert_eq!(
            copy.json(),
            &serde_json::to_value(own).unwrap(),
            "as its own cache holds it"
        );
        assert!(!copy.is_complete());
        let typed_writer = CachedCopies::new::<ConfigMap>(caches.clone(), resource.clone());
        assert_eq!(
            reread(&typed_writer).map(|c| c.json().clone()),
            Some(serde_json::to_value(&cm).unwrap()),
            "its own cache first"
        );

        // A metadata-only writer's own cache comes first too.
        let own_api = Api::<PartialObjectMeta<ConfigMap>>::all(client);
        let (own, _) = caches.shared(
            &own_api,
            Vec::new(),
            Selection::default(),
            trim,
            CacheLayout::Decoded,
            &(),
        );
        let mut newer: PartialObjectMeta<ConfigMap> = serde_json::from_value(stored).unwrap();
        newer.metadata.resource_version = Some("6".into());
        trim.apply(&mut newer);
        let mut fill = lock(&own.writer).take().unwrap();
        fill.apply_watcher_event(&watcher::Event::Apply(newer));
        let copy = reread(&metadata).unwrap();
        assert_eq!(copy.json()["metadata"]["resourceVersion"], "6");
    });
}

#[test]
fn a_compact_queue_decodes_a_listed_object_at_its_turn_keeps_a_change_and_hands_out_neither_once_deleted()
 {
    for deleted in [false, true] {
        offline(|client| async move {
            let a = Api::<ConfigMap>::namespaced(client, "a");
            let cache = SharedCache::new(
                a.clone(),
                vec![a],
                Selection::default(),
                CacheTrim::default(),
                CacheLayout::Compact,
                (),
            );
            let mut announced = cache.subscribe(None, Fairness::with_slots(1));
            let slots = announced.slots();
            let mut writer = lock(&cache.writer).take().unwrap();
            let mut relists = Relists::new(1);
            use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
            for event in [
                Init,
                InitApply(config_map("a", "l1")),
                InitApply(config_map("a", "l2")),
                InitDone,
            ] {
                cache.apply(&mut writer, &mut relists, 0, event);
            }
            let mut next = || announced.next().now_or_never().flatten();
            let (before, _) = cache.store().decoding();
            let l1 = next().unwrap();
            assert_eq!(l1.name_any(), "l1");
            assert!(next().is_none(), "one slot");
            let mut changed = config_map("a", "l2");
            changed.metadata.resource_version = Some("9".into());
            cache.apply(&mut writer, &mut relists, 0, Apply(changed.clone()));
            if deleted {
                cache.apply(&mut writer, &mut relists, 0, Delete(changed));
            }
            slots.done(Some("a"), "l1");
            let l2 = next();
            assert_eq!(
                l2.as_ref().map(|o| o.resource_version()),
                (!deleted).then(|| Some("9".to_owned())),
                "the cache's newest copy at its turn, none once deleted"
            );
            assert_eq!(
                cache.store().decoding().0 - before,
                1,
                "the listed object decoded at its turn, the change handed out \
                 as the watch's copy (deleted: {deleted})"
            );
        });
    }
}
