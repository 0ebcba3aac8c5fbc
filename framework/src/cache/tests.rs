//! The shared cache's unit tests.

use super::*;
use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;

fn selection(labels: &str) -> Selection {
    Selection::default().with_labels(Some(crate::selector::label_selector(labels).unwrap()))
}

#[test]
fn one_selection_is_one_watch_and_another_is_another() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let all = Api::<ConfigMap>::all(client.clone());
        let caches = Caches::default();
        let trim = CacheTrim::default();
        let (first, watch) = caches.shared(&all, Vec::new(), selection("b=2,a=1"), trim, &());
        assert!(watch.is_some());
        let (same, watch) = caches.shared(&all, Vec::new(), selection(" a=1 , b=2"), trim, &());
        assert!(
            watch.is_none(),
            "the same selection, spelled otherwise, shares"
        );
        assert!(Arc::ptr_eq(&first, &same));
        let (_, watch) = caches.shared(&all, Vec::new(), selection("a=1"), trim, &());
        assert!(watch.is_some(), "another selector, another watch");
        let a = Api::<ConfigMap>::namespaced(client.clone(), "a");
        let b = Api::<ConfigMap>::namespaced(client, "b");
        let (set, watch) = caches.shared(&a, vec![b.clone()], Selection::default(), trim, &());
        assert!(watch.is_some());
        let (alone, watch) = caches.shared(&a, Vec::new(), Selection::default(), trim, &());
        assert!(
            watch.is_some(),
            "a namespace set is not one of its namespaces"
        );
        assert!(!Arc::ptr_eq(&set, &alone));
        let (again, watch) = caches.shared(&a, vec![b], Selection::default(), trim, &());
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let a = Api::<ConfigMap>::namespaced(client.clone(), "a");
        let b = Api::<ConfigMap>::namespaced(client, "b");
        let cache = SharedCache::new(
            a.clone(),
            vec![a, b],
            Selection::default(),
            CacheTrim::default(),
            (),
        );
        let mut announced = cache.subscribe(None, Fairness::with_slots(0));
        let mut writer = lock(&cache.writer).take().unwrap();
        let mut relists = Relists::new(2);
        let held = |cache: &SharedCache<ConfigMap>| {
            let mut names: Vec<String> = cache
                .reader()
                .state()
                .iter()
                .map(|o| format!("{}/{}", o.namespace().unwrap(), o.name_any()))
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
        assert!(
            cache.reader().wait_until_ready().now_or_never().is_none(),
            "b still lists"
        );
        cache.apply(&mut writer, &mut relists, 1, InitDone);
        assert!(
            cache.reader().wait_until_ready().now_or_never().is_some(),
            "all listed"
        );
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
        assert_eq!(names, ["x", "y", "z"]);
    });
}
