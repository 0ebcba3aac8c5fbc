//! What a case should store: the model of each mutation's effect on the
//! raw object, written from the intents' documented meaning and
//! independent of concord's code.

use serde_json::{Map, Value, json};

use super::builtins;
use super::model::{Mut, Race};

/// Where a condition's `lastTransitionTime` may be any time.
pub(crate) const ANY_TIME: &str = "<any time>";

fn map<'a>(object: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut at = object;
    for key in path {
        if !at.is_object() {
            *at = json!({});
        }
        at = at
            .as_object_mut()
            .map(|m| m.entry(*key).or_insert_with(|| json!({})))
            .unwrap_or_else(|| unreachable!());
    }
    if !at.is_object() {
        *at = json!({});
    }
    at.as_object_mut().unwrap_or_else(|| unreachable!())
}

fn list<'a>(object: &'a mut Value, parent: &[&str], key: &str) -> &'a mut Vec<Value> {
    let slot = map(object, parent).entry(key).or_insert_with(|| json!([]));
    if !slot.is_array() {
        *slot = json!([]);
    }
    slot.as_array_mut().unwrap_or_else(|| unreachable!())
}

/// Remove `key` of the map at `path`, and the map if it empties.
fn remove(object: &mut Value, path: &[&str], key: &str) {
    let Some(parent) = path.iter().try_fold(&mut *object, |at, k| at.get_mut(*k)) else {
        return;
    };
    if let Some(m) = parent.as_object_mut() {
        m.remove(key);
    }
}

/// What `mutation` should make of the raw stored object `raw`: the
/// oracle's own model, written from the intents' documented meaning.
pub(crate) fn expected(mutation: &Mut, raw: &Value) -> Value {
    let mut next = raw.clone();
    match mutation {
        Mut::SetLabel(k, v) => {
            map(&mut next, &["metadata", "labels"]).insert(k.clone(), json!(v));
        }
        Mut::RemoveLabel(k) => remove(&mut next, &["metadata", "labels"], k),
        Mut::SetAnnotation(k, v) => {
            map(&mut next, &["metadata", "annotations"]).insert(k.clone(), json!(v));
        }
        Mut::RemoveAnnotation(k) => remove(&mut next, &["metadata", "annotations"], k),
        Mut::AddFinalizer(f) => {
            let l = list(&mut next, &["metadata"], "finalizers");
            if !l.contains(&json!(f)) {
                l.push(json!(f));
            }
        }
        Mut::RemoveFinalizer(f) => {
            list(&mut next, &["metadata"], "finalizers").retain(|x| x != &json!(f));
        }
        Mut::SetCondition {
            type_,
            status,
            message,
        } => {
            let l = list(&mut next, &["status"], "conditions");
            let reason = "Oracle";
            match l.iter_mut().find(|c| c["type"] == json!(type_)) {
                Some(c) => {
                    if c["status"] != json!(status) {
                        c["lastTransitionTime"] = json!(ANY_TIME);
                    }
                    c["status"] = json!(status);
                    c["reason"] = json!(reason);
                    c["message"] = json!(message);
                }
                None => l.push(json!({"type": type_, "status": status, "reason": reason,
                    "message": message, "lastTransitionTime": ANY_TIME})),
            }
        }
        Mut::SetPhase(p) => {
            map(&mut next, &["status"]).insert("phase".into(), json!(p));
        }
        Mut::SetSize(n) => {
            map(&mut next, &["spec"]).insert("size".into(), json!(n));
        }
        Mut::SetItemValue(name, v) => {
            let l = list(&mut next, &["spec"], "items");
            if let Some(i) = l.iter_mut().find(|i| i["name"] == json!(name)) {
                i["value"] = json!(v);
            }
        }
        Mut::InsertItem(name, v) => {
            let l = list(&mut next, &["spec"], "items");
            if !l.iter().any(|i| i["name"] == json!(name)) {
                l.insert(0, json!({"name": name, "value": v}));
            }
        }
        Mut::RemoveItem(name) => {
            list(&mut next, &["spec"], "items").retain(|i| i["name"] != json!(name));
        }
        Mut::ReverseItems => list(&mut next, &["spec"], "items").reverse(),
        Mut::PushTag(t) => {
            let l = list(&mut next, &["spec"], "tags");
            if !l.contains(&json!(t)) {
                l.push(json!(t));
            }
        }
        Mut::RemoveTag(t) => list(&mut next, &["spec"], "tags").retain(|x| x != &json!(t)),
        Mut::SetRuleVerbs(verbs) => {
            let l = list(&mut next, &["spec"], "rules");
            if let Some(r) = l.iter_mut().find(|r| r["note"] == "same") {
                r["verbs"] = json!(verbs);
            }
        }
        Mut::SetNested(k, v) => {
            map(&mut next, &["spec", "nested"]).insert(k.clone(), v.clone());
        }
        Mut::TypedConditionMessage(m) => {
            if let Some(c) = next
                .pointer_mut("/status/conditions/0")
                .and_then(Value::as_object_mut)
            {
                c.insert("message".into(), json!(m));
            }
        }
        Mut::Painted => {
            let color = raw["spec"]["color"].as_str().unwrap_or("none").to_owned();
            map(&mut next, &["metadata", "labels"]).insert("painted".into(), json!(color));
        }
        Mut::SetData(k, v) => {
            map(&mut next, &["data"]).insert(k.clone(), json!(v));
        }
        Mut::SetWeight(name, w) => {
            let l = list(&mut next, &["spec"], "items");
            // To the `f64` with a serde default, an absent weight is
            // `0.0` already: setting `0.0` changes nothing, in the type's
            // own terms.
            if let Some(i) = l.iter_mut().find(|i| i["name"] == json!(name))
                && !(i.get("weight").is_none() && *w == 0.0)
            {
                i["weight"] = json!(w);
            }
        }
        Mut::TimedConditionMessage(m) => {
            let l = next
                .pointer_mut("/status/conditions")
                .and_then(Value::as_array_mut);
            if let Some(c) = l.and_then(|l| l.iter_mut().find(|c| c["type"] == "Ready")) {
                c["message"] = json!(m);
            }
        }
        Mut::SetColor(c) => {
            map(&mut next, &["spec"]).insert("color".into(), json!(c));
        }
        Mut::SetAt(k, v) => {
            map(&mut next, &["spec"]).insert(k.clone(), v.clone());
        }
        Mut::UpsertPort(port, protocol, name) => {
            let l = list(&mut next, &["spec"], "ports");
            let at = |p: &Value| p["port"] == json!(port) && p["protocol"] == json!(protocol);
            match l.iter_mut().find(|p| at(p)) {
                Some(p) => p["name"] = json!(name),
                None => l.push(json!({"port": port, "protocol": protocol, "name": name})),
            }
        }
        // Judged in `lifecycle.rs`.
        Mut::Create | Mut::CreateGenerated | Mut::Delete => {}
        Mut::AddEntry(_) | Mut::RemoveEntry(_) | Mut::SetEntry(..) => {
            let kind = builtins::kind_of(raw);
            let pointer = builtins::list_pointer(kind);
            let (parent, key) = pointer.rsplit_once('/').unwrap_or_default();
            if let Some(parent) = next.pointer_mut(parent).and_then(Value::as_object_mut) {
                let slot = parent.entry(key).or_insert_with(|| json!([]));
                if let Some(list) = slot.as_array_mut() {
                    builtins::apply(kind, mutation, list);
                }
            }
        }
        Mut::RemovePort(port, protocol) => {
            list(&mut next, &["spec"], "ports")
                .retain(|p| !(p["port"] == json!(port) && p["protocol"] == json!(protocol)));
        }
    }
    tidy(&mut next);
    next
}

/// Empty metadata maps and lists, status and data count as absent (the
/// server drops some and keeps others).
pub(crate) fn tidy(object: &mut Value) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        // Finalizers are a set: a strategic-merge add puts the new one first.
        if let Some(Value::Array(finalizers)) = meta.get_mut("finalizers") {
            finalizers.sort_by_key(|f| f.to_string());
        }
        for key in ["labels", "annotations", "finalizers"] {
            let empty = match meta.get(key) {
                Some(Value::Object(m)) => m.is_empty(),
                Some(Value::Array(l)) => l.is_empty(),
                Some(Value::Null) => true,
                _ => false,
            };
            if empty {
                meta.remove(key);
            }
        }
    }
    for list in [
        "/spec/items",
        "/spec/tags",
        "/spec/rules",
        "/spec/ports",
        "/spec/template/spec/containers/0/env",
        "/spec/tolerations",
        "/spec/taints",
        "/status/conditions",
    ] {
        let empty = object.pointer(list).is_some_and(|v| v == &json!([]));
        if empty
            && let Some((parent, key)) = list.rsplit_once('/')
            && let Some(m) = object.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            m.remove(key);
        }
    }
    if let Some(top) = object.as_object_mut() {
        for key in ["data", "status"] {
            if top.get(key).is_some_and(|v| v == &json!({}) || v.is_null()) {
                top.remove(key);
            }
        }
    }
}

/// Whether `race` changes what `mutation` decided from.
pub(crate) fn invalidates(race: &Race, mutation: &Mut) -> bool {
    *race == Race::Color && *mutation == Mut::Painted
}
