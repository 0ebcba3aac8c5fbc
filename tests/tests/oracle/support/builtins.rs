//! The built-in kinds beyond ConfigMap: a Deployment (the env of its
//! first container, a keyed list of a nested list), a Service (ports,
//! keyed by `port` + `protocol`), a Pod (tolerations, which the server
//! lets a writer only append to) and a Node (cluster-scoped; taints, keyed
//! by `key` + `effect`). Each has one list the oracle writes
//! entries of, with typed closures over its k8s-openapi type.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::model::{Kind, LABEL_VALUES, Mut, Rng};

/// Whether `kind` is one of this file's.
pub(crate) fn is_builtin(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Deployment | Kind::Service | Kind::Pod | Kind::Node
    )
}

/// The kind a raw object's `kind` names, among this file's.
pub(crate) fn kind_of(object: &Value) -> Kind {
    match object["kind"].as_str() {
        Some("Deployment") => Kind::Deployment,
        Some("Service") => Kind::Service,
        Some("Node") => Kind::Node,
        _ => Kind::Pod,
    }
}

/// The JSON pointer of the list the oracle writes entries of.
pub(crate) fn list_pointer(kind: Kind) -> &'static str {
    match kind {
        Kind::Deployment => "/spec/template/spec/containers/0/env",
        Kind::Service => "/spec/ports",
        Kind::Node => "/spec/taints",
        _ => "/spec/tolerations",
    }
}

/// The fields naming an entry of the list.
fn key_fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Deployment => &["name"],
        Kind::Service => &["port", "protocol"],
        Kind::Node => &["key", "effect"],
        _ => &["key"],
    }
}

/// The key of `entry`: its naming fields.
pub(crate) fn key_of(kind: Kind, entry: &Value) -> Value {
    Value::Object(
        key_fields(kind)
            .iter()
            .map(|k| ((*k).to_owned(), entry[*k].clone()))
            .collect(),
    )
}

/// Whether `entry` has `key`.
pub(crate) fn has_key(entry: &Value, key: &Value) -> bool {
    key.as_object()
        .is_some_and(|k| k.iter().all(|(f, v)| entry.get(f) == Some(v)))
}

/// The object of `kind` holding `entries` in its list, without metadata.
pub(crate) fn object(kind: Kind, entries: &[Value]) -> Value {
    match kind {
        Kind::Deployment => json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "oracle"}},
            "template": {"metadata": {"labels": {"app": "oracle"}}, "spec": {"containers": [
                {"name": "main", "image": "example.com/main:1", "env": entries,
                 "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"},
                           {"containerPort": 80, "protocol": "UDP", "name": "dns"}]},
            ]}},
        }}),
        Kind::Service => json!({"apiVersion": "v1", "kind": "Service",
            "spec": {"selector": {"app": "oracle"}, "ports": entries}}),
        Kind::Node => json!({"apiVersion": "v1", "kind": "Node", "spec": {"taints": entries}}),
        _ => json!({"apiVersion": "v1", "kind": "Pod", "spec": {
            "containers": [{"name": "main", "image": "example.com/main:1"}],
            "tolerations": entries,
        }}),
    }
}

/// The entries of `kind`'s list a new object starts with.
pub(crate) fn entries(rng: &mut Rng, kind: Kind) -> Vec<Value> {
    let mut out = Vec::new();
    match kind {
        Kind::Deployment => {
            for name in ["A", "B", "C"] {
                if rng.chance(60) {
                    out.push(json!({"name": name, "value": rng.hostile()}));
                }
            }
        }
        Kind::Service => {
            // A Service needs a port, and every port a name.
            out.push(json!({"name": "web", "port": 80, "protocol": "TCP", "targetPort": 80}));
            for (name, port, protocol) in [("dns", 80, "UDP"), ("tls", 443, "TCP")] {
                if rng.chance(50) {
                    out.push(json!({"name": name, "port": port, "protocol": protocol,
                        "targetPort": port}));
                }
            }
        }
        Kind::Node => {
            // One key under two effects: the list's identity is the pair.
            for (key, effect) in [
                ("example.com/a", "NoSchedule"),
                ("example.com/a", "PreferNoSchedule"),
                ("example.com/b", "NoSchedule"),
            ] {
                if rng.chance(50) {
                    let value = *rng.pick(&LABEL_VALUES);
                    out.push(json!({"key": key, "value": value, "effect": effect}));
                }
            }
        }
        _ => {
            for key in ["example.com/a", "example.com/b"] {
                if rng.chance(50) {
                    out.push(json!({"key": key, "operator": "Exists", "effect": "NoSchedule"}));
                }
            }
        }
    }
    out
}

/// A mutation of `kind`'s list.
pub(crate) fn mutation(rng: &mut Rng, kind: Kind) -> Mut {
    match kind {
        Kind::Deployment => {
            let name = (*rng.pick(&["A", "B", "D"])).to_owned();
            match rng.below(3) {
                0 => Mut::AddEntry(json!({"name": name, "value": rng.hostile()})),
                1 => Mut::RemoveEntry(json!({ "name": name })),
                _ => Mut::SetEntry(
                    json!({ "name": name }),
                    "value".into(),
                    json!(rng.hostile()),
                ),
            }
        }
        Kind::Service => {
            let (port, protocol) = *rng.pick(&[(80, "UDP"), (443, "TCP"), (8080, "SCTP")]);
            // Names no other port holds: a Service's port names are unique.
            let name = (*rng.pick(&["alt", "x-1"])).to_owned();
            let key = json!({"port": port, "protocol": protocol});
            match rng.below(4) {
                0 => Mut::AddEntry(json!({"name": format!("p{port}"), "port": port,
                    "protocol": protocol, "targetPort": port})),
                1 => Mut::RemoveEntry(key),
                2 => Mut::SetEntry(
                    json!({"port": 80, "protocol": "TCP"}),
                    "name".into(),
                    json!(name),
                ),
                _ => Mut::SetEntry(key, "name".into(), json!(name)),
            }
        }
        Kind::Node => {
            let (key, effect) = *rng.pick(&[
                ("example.com/a", "NoSchedule"),
                ("example.com/a", "PreferNoSchedule"),
                ("example.com/c", "NoSchedule"),
            ]);
            let value = *rng.pick(&LABEL_VALUES);
            match rng.below(3) {
                0 => Mut::AddEntry(json!({"key": key, "value": value, "effect": effect})),
                1 => Mut::RemoveEntry(json!({"key": key, "effect": effect})),
                _ => Mut::SetEntry(
                    json!({"key": key, "effect": effect}),
                    "value".into(),
                    json!(value),
                ),
            }
        }
        _ => {
            let key = (*rng.pick(&["example.com/a", "example.com/c"])).to_owned();
            let value = *rng.pick(&LABEL_VALUES);
            Mut::AddEntry(json!({"key": key, "operator": "Equal", "value": value,
                "effect": "NoSchedule"}))
        }
    }
}

/// Another writer's entry, put at index 0 of the list.
pub(crate) fn raced_entry(kind: Kind) -> Value {
    match kind {
        Kind::Deployment => json!({"name": "RACED", "value": "r&r"}),
        Kind::Service => json!({"name": "raced", "port": 53, "protocol": "UDP", "targetPort": 53}),
        Kind::Node => json!({"key": "example.com/a", "value": "raced", "effect": "NoExecute"}),
        _ => json!({"key": "race.example/t", "operator": "Exists", "effect": "NoExecute"}),
    }
}

/// `mutation`'s effect on `list` (the model, on JSON). The built-in
/// types' Go structs omit an empty string (`omitempty`): a field set to
/// `""` is stored absent.
pub(crate) fn apply(kind: Kind, mutation: &Mut, list: &mut Vec<Value>) {
    let omit_empty = |e: &mut Value| {
        if let Some(m) = e.as_object_mut() {
            m.retain(|_, v| v != "");
        }
    };
    match mutation {
        Mut::AddEntry(entry) => {
            let key = key_of(kind, entry);
            if !list.iter().any(|e| has_key(e, &key)) {
                let mut entry = entry.clone();
                omit_empty(&mut entry);
                list.push(entry);
            }
        }
        Mut::RemoveEntry(key) => list.retain(|e| !has_key(e, key)),
        Mut::SetEntry(key, field, value) => {
            if let Some(e) = list.iter_mut().find(|e| has_key(e, key)) {
                e[field.as_str()] = value.clone();
                omit_empty(e);
            }
        }
        _ => {}
    }
}

/// A typed closure over `K` making `mutation`'s change: the object is
/// held as `K`, the list edited as the model says, and `K` rebuilt.
fn typed<K>(kind: Kind, mutation: Mut) -> concord_strategies::Mutation
where
    K: Serialize + DeserializeOwned + 'static,
{
    concord_strategies::Mutation::typed(move |object: &mut K| {
        let Ok(mut json) = serde_json::to_value(&*object) else {
            return;
        };
        let pointer = list_pointer(kind);
        let mut list = json
            .pointer(pointer)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        apply(kind, &mutation, &mut list);
        let (parent, field) = pointer.rsplit_once('/').unwrap_or_default();
        if let Some(parent) = json.pointer_mut(parent).and_then(Value::as_object_mut) {
            parent.insert(field.to_owned(), Value::Array(list));
        }
        if let Ok(changed) = serde_json::from_value(json) {
            *object = changed;
        }
    })
}

/// The concord mutation for a list mutation of `kind`, typed on its
/// k8s-openapi type.
pub(crate) fn to_mutation(kind: Kind, mutation: Mut) -> concord_strategies::Mutation {
    match kind {
        Kind::Deployment => typed::<Deployment>(kind, mutation),
        Kind::Service => typed::<Service>(kind, mutation),
        Kind::Node => typed::<Node>(kind, mutation),
        _ => typed::<Pod>(kind, mutation),
    }
}
