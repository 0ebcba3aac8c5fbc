//! A case's object on the server: the one created from the case's initial
//! state, created, read back, trimmed as the cache trims it, stripped of
//! what the server manages, and compared with what the model wants.

use anyhow::Context as _;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};

use super::expected::{ANY_TIME, tidy};
use super::model::{Case, Initial, Kind};

/// The last-applied annotation the trimmed cache leaves out.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the trimmed cache leaves out of an object written by `strategy`:
/// the framework keeps last-applied for a resource with an `update` cell
/// and managedFields for one with an `apply` cell (`CacheTrim::for_row`).
pub(crate) fn trim(meta: &mut kube::core::ObjectMeta, strategy: &str) {
    if strategy != "apply" {
        meta.managed_fields = None;
    }
    if strategy != "update"
        && let Some(annotations) = &mut meta.annotations
    {
        annotations.remove(LAST_APPLIED);
    }
}

/// The raw object of `initial`, without its status.
pub(crate) fn object(kind: Kind, name: &str, initial: &Initial) -> Value {
    let pairs = |v: &[(String, String)]| -> Value {
        Value::Object(v.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
    };
    let mut annotations = pairs(&initial.annotations);
    if initial.last_applied {
        annotations[LAST_APPLIED] = json!(r#"{"apiVersion":"v1","note":"a&b<c>"}"#);
    }
    let mut metadata = json!({"name": name, "labels": pairs(&initial.labels),
        "annotations": annotations, "finalizers": initial.finalizers});
    let mut object = match kind {
        Kind::ConfigMap => json!({"apiVersion": "v1", "kind": "ConfigMap",
            "data": pairs(&initial.data)}),
        kind if super::builtins::is_builtin(kind) => {
            super::builtins::object(kind, &initial.entries)
        }
        _ => {
            let mut spec = json!({});
            if let Some(size) = initial.size {
                spec["size"] = json!(size);
            }
            if let Some(color) = &initial.color {
                spec["color"] = json!(color);
            }
            if !initial.items.is_empty() {
                spec["items"] = initial
                    .items
                    .iter()
                    .map(|(name, value, extra)| {
                        let mut item = json!({"name": name, "value": value});
                        if let Some(extra) = extra {
                            item["extra"] = json!(extra);
                        }
                        if let Some((_, w)) = initial.weights.iter().find(|(n, _)| n == name) {
                            item["weight"] = w.clone();
                        }
                        item
                    })
                    .collect();
            }
            if !initial.rules.is_empty() {
                spec["rules"] = json!(initial.rules);
            }
            if !initial.tags.is_empty() {
                spec["tags"] = json!(initial.tags);
            }
            if !initial.nested.is_empty() {
                spec["nested"] = Value::Object(initial.nested.iter().cloned().collect());
            }
            if !initial.ports.is_empty() {
                spec["ports"] = json!(initial.ports);
            }
            for (k, v) in &initial.fields {
                spec[k] = v.clone();
            }
            let mut object = json!({"apiVersion": format!("{}/v1", super::types::GROUP),
                "kind": format!("{kind:?}"), "spec": spec});
            // Without a status subresource, the status is created with
            // the object.
            if let (Kind::Bare, Some(status)) = (kind, status(initial)) {
                object["status"] = status;
            }
            object
        }
    };
    tidy(&mut metadata);
    object["metadata"] = metadata;
    tidy(&mut object);
    object
}

/// The status of `initial`, if any.
fn status(initial: &Initial) -> Option<Value> {
    let mut status = json!({});
    if let Some(phase) = &initial.phase {
        status["phase"] = json!(phase);
    }
    if !initial.conditions.is_empty() {
        status["conditions"] = initial
            .conditions
            .iter()
            .map(|(type_, status, message, severity)| {
                let time = if initial.fractions {
                    "2026-01-01T00:00:00.123456Z"
                } else {
                    "2026-01-01T00:00:00Z"
                };
                let mut c = json!({"type": type_, "status": status, "reason": "Initial",
                    "message": message, "lastTransitionTime": time});
                if let Some(severity) = severity {
                    c["severity"] = json!(severity);
                }
                c
            })
            .collect();
    }
    (status != json!({})).then_some(status)
}

pub(crate) async fn create(
    raw: &Api<DynamicObject>,
    name: &str,
    case: &Case,
) -> anyhow::Result<()> {
    let body: DynamicObject = serde_json::from_value(object(case.kind, name, &case.initial))?;
    raw.create(&PostParams::default(), &body)
        .await
        .with_context(|| format!("creating {name}"))?;
    if let (Kind::Specimen, Some(status)) = (case.kind, status(&case.initial)) {
        raw.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .with_context(|| format!("setting the status of {name}"))?;
    }
    Ok(())
}

pub(crate) async fn get(raw: &Api<DynamicObject>, name: &str) -> anyhow::Result<Option<Value>> {
    Ok(raw
        .get_opt(name)
        .await?
        .map(serde_json::to_value)
        .transpose()?)
}

/// `object` without what the server manages.
pub(crate) fn normal(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object["metadata"].as_object_mut() {
        for key in [
            "resourceVersion",
            "managedFields",
            "generation",
            "creationTimestamp",
            "uid",
            "selfLink",
        ] {
            meta.remove(key);
        }
    }
    tidy(&mut object);
    object
}

/// Whether `stored` is `wanted`, a condition time marked [`ANY_TIME`]
/// matching any time other than the one it replaced.
pub(crate) fn matches(wanted: &Value, stored: &Value) -> bool {
    match (wanted, stored) {
        (Value::String(w), Value::String(_)) if w == ANY_TIME => true,
        (Value::Object(w), Value::Object(s)) => {
            w.len() == s.len()
                && w.iter()
                    .all(|(k, v)| s.get(k).is_some_and(|x| matches(v, x)))
        }
        (Value::Array(w), Value::Array(s)) => {
            w.len() == s.len() && w.iter().zip(s).all(|(a, b)| matches(a, b))
        }
        // A number is its value: `2.0` set is `2` stored (Go writes a
        // whole float without fractions); integers compare exactly.
        (Value::Number(w), Value::Number(s)) if w.is_f64() || s.is_f64() => {
            w.as_f64() == s.as_f64()
        }
        _ => wanted == stored,
    }
}
