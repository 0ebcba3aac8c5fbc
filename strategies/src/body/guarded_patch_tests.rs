//! The unit tests of the guarded patch (`guarded_patch.rs`).

use super::*;

fn pod(finalizers: Value, labels: Value) -> Value {
    json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7",
        "finalizers": finalizers, "labels": labels}, "spec": {"a": 1}})
}

fn json_ops(current: &Value, next: &Value) -> Value {
    match guarded(current, next, false, &[], Holds::Whole) {
        Some(GuardedBody::Json(ops)) => ops,
        other => panic!("{other:?}"),
    }
}

#[test]
fn finalizers_of_a_built_in_type_go_as_merge_directives() {
    let current = pod(json!(["theirs", "ours"]), json!({}));
    let next = pod(json!(["theirs", "mine"]), json!({}));
    assert_eq!(
        guarded(&current, &next, true, &[], Holds::Whole),
        Some(GuardedBody::Strategic(json!({"metadata": {
            "uid": "u1",
            "finalizers": ["mine"],
            "$deleteFromPrimitiveList/finalizers": ["ours"],
        }})))
    );
}

#[test]
fn removal_and_label_are_one_patch_testing_both() {
    let current = pod(
        json!(["argo", "other"]),
        json!({"app": "x", "done": "false"}),
    );
    let next = pod(json!(["other"]), json!({"app": "x", "done": "true"}));
    assert_eq!(
        guarded(&current, &next, true, &[], Holds::Whole),
        Some(GuardedBody::Json(json!([
            {"op": "test", "path": "/metadata/uid", "value": "u1"},
            {"op": "test", "path": "/metadata/finalizers/0", "value": "argo"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "test", "path": "/metadata/labels/done", "value": "false"},
            {"op": "replace", "path": "/metadata/labels/done", "value": "true"},
        ])))
    );
}

#[test]
fn an_added_key_is_tested_absent_and_an_append_tests_the_list() {
    let current = pod(json!(["a"]), json!({}));
    let next = pod(json!(["a", "b"]), json!({"k": "v"}));
    let ops = json_ops(&current, &next);
    assert_eq!(
        ops,
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "u1"},
            {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
            {"op": "test", "path": "/metadata/labels/k", "value": null},
            {"op": "add", "path": "/metadata/labels/k", "value": "v"},
        ])
    );
}

#[test]
fn a_condition_is_changed_in_place_with_its_type_tested() {
    let current = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "B", "status": "True"}]}});
    let mut next = current.clone();
    next["status"]["conditions"][1]["status"] = json!("False");
    assert_eq!(
        json_ops(&current, &next),
        json!([
            {"op": "test", "path": "/status/conditions/1/type", "value": "B"},
            {"op": "test", "path": "/status/conditions/1/status", "value": "True"},
            {"op": "replace", "path": "/status/conditions/1/status", "value": "False"},
        ])
    );
}

#[test]
fn an_entry_without_a_unique_key_is_tested_whole() {
    // Taints have no key the list is merged by, and their effects
    // repeat: the field's old value could be another entry's.
    let current = json!({"spec": {"taints": [
        {"key": "a", "effect": "NoSchedule"},
        {"key": "b", "effect": "NoSchedule"},
    ], "conditions": [{"type": "A", "x": 1}, {"type": "A", "x": 2}]}});
    let mut next = current.clone();
    next["spec"]["taints"][1]["effect"] = json!("NoExecute");
    next["spec"]["conditions"][1]["x"] = json!(3);
    assert_eq!(
        json_ops(&current, &next),
        json!([
            {"op": "test", "path": "/spec/conditions/1", "value": {"type": "A", "x": 2}},
            {"op": "test", "path": "/spec/conditions/1/x", "value": 2},
            {"op": "replace", "path": "/spec/conditions/1/x", "value": 3},
            {"op": "test", "path": "/spec/taints/1", "value": {"key": "b", "effect": "NoSchedule"}},
            {"op": "test", "path": "/spec/taints/1/effect", "value": "NoSchedule"},
            {"op": "replace", "path": "/spec/taints/1/effect", "value": "NoExecute"},
        ])
    );
}

#[test]
fn dependencies_are_tested_as_observed() {
    let current = json!({"spec": {"replicas": 3}, "status": {}});
    let next = json!({"spec": {"replicas": 3}, "status": {"ready": true}});
    let Some(GuardedBody::Json(ops)) = guarded(
        &current,
        &next,
        false,
        &["/spec/replicas".into(), "/spec/paused".into()],
        Holds::Whole,
    ) else {
        panic!("not a json patch")
    };
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/spec/replicas", "value": 3})
    );
    assert_eq!(
        ops[1],
        json!({"op": "test", "path": "/spec/paused", "value": null})
    );
}

#[test]
fn removing_the_last_entry_removes_the_entry_not_the_list() {
    let current = pod(json!(["ours"]), json!({"mine": "1"}));
    let mut next = current.clone();
    let metadata = next["metadata"].as_object_mut().unwrap();
    metadata.remove("finalizers");
    metadata.remove("labels");
    let ops = json_ops(&current, &next);
    assert_eq!(
        ops,
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "u1"},
            {"op": "test", "path": "/metadata/finalizers/0", "value": "ours"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "test", "path": "/metadata/labels/mine", "value": "1"},
            {"op": "remove", "path": "/metadata/labels/mine"},
        ])
    );
}

#[test]
fn several_removals_go_from_the_highest_index_down() {
    let current = pod(json!(["a", "b", "c"]), json!({}));
    let next = pod(json!(["b"]), json!({}));
    let ops = json_ops(&current, &next);
    let paths: Vec<&str> = ops
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| op["op"] == "remove")
        .map(|op| op["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/metadata/finalizers/2", "/metadata/finalizers/0"]);
}

#[test]
fn label_keys_are_escaped_in_json_pointers() {
    assert_eq!(
        crate::model::change::escape("example.com/a~b"),
        "example.com~1a~0b"
    );
}

#[test]
fn a_map_emptied_of_nothing_sends_nothing_and_a_whole_map_is_removed_whole() {
    let current =
        json!({"metadata": {"uid": "u1", "annotations": {}}, "spec": {"m": {"deep": {"x": 1}}}});
    let mut next = current.clone();
    next["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    assert_eq!(guarded(&current, &next, false, &[], Holds::Whole), None);
    next["spec"]["m"] = json!({});
    assert_eq!(
        json_ops(&current, &next),
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "u1"},
            {"op": "test", "path": "/spec/m/deep", "value": {"x": 1}},
            {"op": "remove", "path": "/spec/m/deep"},
        ])
    );
}
