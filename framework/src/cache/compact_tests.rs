//! Tests of the compact cache (`compact.rs`).

use super::*;
use crate::cache::key::key;
use k8s_openapi::api::core::v1::ConfigMap;
use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};

fn config_map(name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("default".into());
    cm.data = Some([("v".to_owned(), value.to_owned())].into());
    cm
}

#[test]
fn a_layout_has_one_word_on_command_lines_in_reports_and_in_text() {
    use clap::ValueEnum as _;
    for layout in CacheLayout::value_variants() {
        let word = layout.as_str();
        let on_command_line = layout.to_possible_value().expect("a named layout");
        assert_eq!(on_command_line.get_name(), word);
        assert_eq!(layout.to_string(), word);
        assert_eq!(
            serde_json::to_value(layout).expect("serialises"),
            serde_json::Value::from(word)
        );
        assert_eq!(
            serde_json::from_value::<CacheLayout>(word.into()).expect("reads back"),
            *layout
        );
    }
}

fn value(objects: &CompactObjects<ConfigMap>, name: &str) -> Option<String> {
    objects
        .get(Some("default"), name)?
        .data
        .as_ref()?
        .get("v")
        .cloned()
}

#[test]
fn the_first_list_is_swapped_in_and_a_relist_stores_at_once() {
    let objects = CompactObjects::<ConfigMap>::new();
    let mut writer = CompactWriter::new(objects.clone());
    writer.apply_watcher_event(&Init);
    writer.apply_watcher_event(&InitApply(config_map("a", "1")));
    writer.apply_watcher_event(&InitApply(config_map("b", "a&b<c>ü")));
    assert_eq!(objects.len(), 0, "the first list is not in yet");
    writer.apply_watcher_event(&InitDone);
    assert_eq!(value(&objects, "b").as_deref(), Some("a&b<c>ü"));
    writer.apply_watcher_event(&Apply(config_map("a", "2")));
    assert_eq!(value(&objects, "a").as_deref(), Some("2"));
    // A relist after a gap: `a` was deleted, `c` created.
    writer.apply_watcher_event(&Init);
    writer.apply_watcher_event(&InitApply(config_map("c", "1")));
    assert_eq!(value(&objects, "c").as_deref(), Some("1"), "stored at once");
    writer.apply_watcher_event(&InitApply(config_map("b", "3")));
    writer.apply_watcher_event(&InitDone);
    let mut keys = objects.keys();
    keys.sort();
    assert_eq!(
        keys,
        [
            (Some("default".to_owned()), "b".to_owned()),
            (Some("default".to_owned()), "c".to_owned())
        ]
    );
    writer.apply_watcher_event(&Delete(config_map("b", "3")));
    assert!(!objects.holds(Some("default"), "b"));
    assert_eq!(
        objects.decoding().0,
        3,
        "each of the three reads decoded a copy"
    );
}

#[test]
fn each_object_is_stored_as_its_own_json_and_a_large_one_leaves_no_buffer_behind() {
    let objects = CompactObjects::<ConfigMap>::new();
    let mut writer = CompactWriter::new(objects.clone());
    writer.apply_watcher_event(&Init);
    writer.apply_watcher_event(&InitDone);
    // One value larger than the buffer a writer keeps, then small ones
    // written into the same buffer after it.
    let large = "é".repeat(SCRATCH_KEPT);
    for (name, v) in [("large", large.as_str()), ("a", "1"), ("b", "")] {
        let cm = config_map(name, v);
        writer.apply_watcher_event(&Apply(cm.clone()));
        let stored = objects.read();
        let entry = stored.get(&key(Some("default"), name)).expect("stored");
        assert_eq!(*entry.json, *serde_json::to_vec(&cm).expect("encodes"));
        drop(stored);
        assert_eq!(value(&objects, name).as_deref(), Some(v));
        assert!(
            writer.scratch.capacity() <= SCRATCH_KEPT,
            "after {name}: {}",
            writer.scratch.capacity()
        );
    }
}

#[test]
fn identities_are_read_without_decoding_an_object() {
    let objects = CompactObjects::<ConfigMap>::new();
    let mut writer = CompactWriter::new(objects.clone());
    writer.apply_watcher_event(&Init);
    // A server's uid is kept packed; any other text is read from the JSON.
    let server = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    for (name, uid) in [("a", "uid-a"), ("b", "uid-ü"), ("c", server)] {
        let mut cm = config_map(name, "1");
        cm.metadata.uid = Some(uid.into());
        writer.apply_watcher_event(&InitApply(cm));
    }
    writer.apply_watcher_event(&InitDone);
    let mut identities = objects.identities();
    identities.sort();
    let namespaced = |name: &str, uid: &str| {
        (
            (Some("default".to_owned()), name.to_owned()),
            uid.to_owned(),
        )
    };
    assert_eq!(
        identities,
        [
            namespaced("a", "uid-a"),
            namespaced("b", "uid-ü"),
            namespaced("c", server)
        ]
    );
    assert_eq!(
        objects.uid(Some("default"), "c").as_deref(),
        Some(server),
        "read by name"
    );
    assert_eq!(objects.decoding().0, 0, "no object was decoded");
}

#[test]
fn versions_read_back_as_stored_packed_or_from_the_json() {
    let objects = CompactObjects::<ConfigMap>::new();
    let mut writer = CompactWriter::new(objects.clone());
    writer.apply_watcher_event(&Init);
    let server = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    // Packed: a server's uid and a decimal version. Read from the JSON:
    // any other text of either, byte for byte.
    let cases = [
        ("packed", Some(server), Some("184467")),
        ("zeros", Some(server), Some("007")),
        ("text", Some(server), Some("v9é")),
        ("own-uid", Some("uid-a"), Some("5")),
        ("no-uid", None, Some("6")),
        ("no-version", Some(server), None),
    ];
    for (name, uid, version) in cases {
        let mut cm = config_map(name, "1");
        cm.metadata.uid = uid.map(Into::into);
        cm.metadata.resource_version = version.map(Into::into);
        writer.apply_watcher_event(&InitApply(cm));
    }
    writer.apply_watcher_event(&InitDone);
    for (name, uid, version) in cases {
        assert_eq!(
            objects.version(Some("default"), name),
            version.map(|v| (v.to_owned(), uid.map(str::to_owned))),
            "{name}"
        );
    }
    assert_eq!(objects.version(Some("default"), "absent"), None);
    assert_eq!(objects.decoding().0, 0, "no object was decoded");
}
