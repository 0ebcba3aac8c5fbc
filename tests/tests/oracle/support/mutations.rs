//! The concord mutation standing for each of the oracle's mutations, on
//! the Rust type of the copy the case's writer holds.

use concord_strategies::{Condition, Intent, Mutation};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::core::DynamicObject;
use serde_json::{Value, json};

use super::model::{Case, Copy, Mut};
use super::types::{Color, LagItem, Mapped, SizeView, Sorted, Specimen, Timed, Weighted};

/// The concord mutation standing for `case.mutation` on the case's copy.
pub(crate) async fn to_mutation(case: &Case, raw: &Api<DynamicObject>, name: &str) -> Mutation {
    let typed_on = case.copy;
    match case.mutation.clone() {
        Mut::SetLabel(k, v) => Intent::set_label(k, v).into(),
        Mut::RemoveLabel(k) => Intent::RemoveLabel(k).into(),
        Mut::SetAnnotation(k, v) => Intent::set_annotation(k, v).into(),
        Mut::RemoveAnnotation(k) => Intent::RemoveAnnotation(k).into(),
        Mut::AddFinalizer(f) => Intent::add_finalizer(f).into(),
        Mut::RemoveFinalizer(f) => Intent::remove_finalizer(f).into(),
        Mut::SetCondition {
            type_,
            status,
            message,
        } => Intent::SetCondition(Condition {
            type_,
            status,
            reason: "Oracle".into(),
            message,
        })
        .into(),
        Mut::SetPhase(p) => Intent::MergeStatus(json!({ "phase": p })).into(),
        Mut::SetNested(k, v) if typed_on == Copy::Mapped => {
            Mutation::typed(move |m: &mut Mapped| {
                m.spec.nested.insert(k.clone(), v.clone());
            })
        }
        Mut::SetColor(c) => Mutation::typed(move |m: &mut Mapped| {
            m.spec.color = serde_json::from_value::<Color>(json!(c)).ok();
        }),
        Mut::SetNested(k, v) => Mutation::custom(move |o| {
            if !o["spec"]["nested"].is_object() {
                o["spec"]["nested"] = json!({});
            }
            o["spec"]["nested"][&k] = v.clone();
        }),
        Mut::Painted => {
            // The decision is taken once, from the copy as read.
            let color = match raw.get(name).await {
                Ok(o) => o.data["spec"]["color"]
                    .as_str()
                    .unwrap_or("none")
                    .to_owned(),
                Err(_) => "none".to_owned(),
            };
            Intent::set_label("painted", color)
                .into_mutation()
                .depending_on("/spec/color")
        }
        Mut::SetData(k, v) => match typed_on {
            Copy::Raw => dynamic(move |o| {
                if !o["data"].is_object() {
                    o["data"] = json!({});
                }
                o["data"][&k] = json!(v);
            }),
            _ => Mutation::typed(move |cm: &mut ConfigMap| {
                cm.data.get_or_insert_default().insert(k.clone(), v.clone());
            }),
        },
        Mut::TypedConditionMessage(m) => Mutation::typed(move |s: &mut Specimen| {
            if let Some(c) = s.status.as_mut().and_then(|s| s.conditions.first_mut()) {
                c.message = m.clone();
            }
        }),
        Mut::SetWeight(name, w) => Mutation::typed(move |s: &mut Weighted| {
            if let Some(i) = s.spec.entries.iter_mut().find(|i| i.name == name) {
                i.weight = w;
            }
        }),
        Mut::TimedConditionMessage(m) => Mutation::typed_status(move |t: &mut Timed| {
            let conditions = t.status.iter_mut().flat_map(|s| s.conditions.iter_mut());
            if let Some(c) = conditions.into_iter().find(|c| c.type_ == "Ready") {
                c.message = m.clone();
            }
        }),
        Mut::SetAt(k, v) => dynamic(move |o| {
            if !o["spec"].is_object() {
                o["spec"] = json!({});
            }
            o["spec"][&k] = v.clone();
        }),
        Mut::UpsertPort(port, protocol, name) => dynamic(move |o| {
            let mut ports = o["spec"]["ports"].as_array().cloned().unwrap_or_default();
            let at = |p: &Value| p["port"] == json!(port) && p["protocol"] == json!(protocol);
            match ports.iter_mut().find(|p| at(p)) {
                Some(p) => p["name"] = json!(name),
                None => ports.push(json!({"port": port, "protocol": protocol, "name": name})),
            }
            if !o["spec"].is_object() {
                o["spec"] = json!({});
            }
            o["spec"]["ports"] = Value::Array(ports);
        }),
        Mut::RemovePort(port, protocol) => dynamic(move |o| {
            if let Some(ports) = o["spec"]["ports"].as_array_mut() {
                ports.retain(|p| !(p["port"] == json!(port) && p["protocol"] == json!(protocol)));
            }
        }),
        // Not a mutation: `lifecycle.rs` creates and deletes.
        Mut::Create | Mut::CreateGenerated | Mut::Delete => Mutation::custom(|_| {}),
        m @ (Mut::AddEntry(_) | Mut::RemoveEntry(_) | Mut::SetEntry(..)) => {
            super::builtins::to_mutation(case.kind, m)
        }
        spec => spec_closure(typed_on, spec),
    }
}

/// A typed closure over a `DynamicObject`'s data.
fn dynamic(f: impl Fn(&mut Value) + Send + Sync + 'static) -> Mutation {
    Mutation::typed(move |o: &mut DynamicObject| f(&mut o.data))
}

/// The spec closures, on the copy's own type.
fn spec_closure(copy: Copy, mutation: Mut) -> Mutation {
    match copy {
        Copy::Lagging => Mutation::typed(move |s: &mut Specimen| lagging(&mut s.spec, &mutation)),
        Copy::Sorted => Mutation::typed(move |s: &mut Sorted| match &mutation {
            Mut::PushTag(t) => {
                s.spec.tags.insert(t.clone());
            }
            Mut::RemoveTag(t) => {
                s.spec.tags.remove(t);
            }
            _ => {}
        }),
        Copy::View => Mutation::typed(move |s: &mut SizeView| {
            if let Mut::SetSize(n) = mutation {
                s.spec.get_or_insert_default().size = Some(n);
            }
        }),
        // Raw: edit the JSON in place, as an author of a dynamic
        // controller would, never through the lagging type.
        _ => dynamic(move |o| raw_spec(o, &mutation)),
    }
}

fn lagging(spec: &mut super::types::LagSpec, mutation: &Mut) {
    match mutation {
        Mut::SetSize(n) => spec.size = Some(*n),
        Mut::SetItemValue(name, v) => {
            if let Some(i) = spec.items.iter_mut().find(|i| i.name == *name) {
                i.value = Some(v.clone());
            }
        }
        Mut::InsertItem(name, v) if !spec.items.iter().any(|i| i.name == *name) => {
            spec.items.insert(
                0,
                LagItem {
                    name: name.clone(),
                    value: Some(v.clone()),
                },
            );
        }
        Mut::RemoveItem(name) => spec.items.retain(|i| i.name != *name),
        Mut::ReverseItems => spec.items.reverse(),
        Mut::PushTag(t) if !spec.tags.contains(t) => spec.tags.push(t.clone()),
        Mut::RemoveTag(t) => spec.tags.retain(|x| x != t),
        _ => {}
    }
}

fn raw_spec(o: &mut Value, mutation: &Mut) {
    let list = |o: &mut Value, key: &str| -> Vec<Value> {
        o["spec"][key].as_array().cloned().unwrap_or_default()
    };
    match mutation {
        Mut::SetSize(n) => o["spec"]["size"] = json!(n),
        Mut::SetItemValue(name, v) => {
            if let Some(items) = o["spec"]["items"].as_array_mut()
                && let Some(i) = items.iter_mut().find(|i| i["name"] == json!(name))
            {
                i["value"] = json!(v);
            }
        }
        Mut::InsertItem(name, v) => {
            let mut items = list(o, "items");
            if !items.iter().any(|i| i["name"] == json!(name)) {
                items.insert(0, json!({"name": name, "value": v}));
                o["spec"]["items"] = Value::Array(items);
            }
        }
        Mut::RemoveItem(name) => {
            let mut items = list(o, "items");
            let len = items.len();
            items.retain(|i| i["name"] != json!(name));
            if items.len() != len {
                o["spec"]["items"] = Value::Array(items);
            }
        }
        Mut::ReverseItems => {
            let mut items = list(o, "items");
            if items.len() > 1 {
                items.reverse();
                o["spec"]["items"] = Value::Array(items);
            }
        }
        Mut::PushTag(t) => {
            let mut tags = list(o, "tags");
            if !tags.contains(&json!(t)) {
                tags.push(json!(t));
                o["spec"]["tags"] = Value::Array(tags);
            }
        }
        Mut::SetRuleVerbs(verbs) => {
            if let Some(rules) = o["spec"]["rules"].as_array_mut()
                && let Some(r) = rules.iter_mut().find(|r| r["note"] == "same")
            {
                r["verbs"] = json!(verbs);
            }
        }
        Mut::RemoveTag(t) => {
            let mut tags = list(o, "tags");
            let len = tags.len();
            tags.retain(|x| x != &json!(t));
            if tags.len() != len {
                o["spec"]["tags"] = Value::Array(tags);
            }
        }
        _ => {}
    }
}

/// `into_mutation` for an intent, to chain `depending_on`.
trait IntoMutation {
    fn into_mutation(self) -> Mutation;
}

impl IntoMutation for Intent {
    fn into_mutation(self) -> Mutation {
        Mutation::from(self)
    }
}
