//! Running one case on the real API server: create the object, read the
//! writer's copy, write through the strategy while the race lands between
//! the strategy's read and its request, read what was stored, and judge
//! it against the model.

use std::sync::Arc;

use anyhow::Context as _;
use concord_strategies::{
    ConflictPolicy, Error, Mutation, ObjectKey, Target, Writer, strategy_for,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::expected::{ANY_TIME, expected, invalidates, tidy};
use super::model::{Case, Copy, Initial, Kind, Mut, Race};
use super::mutations::to_mutation;
use super::race::{RaceHook, apply_race};
use super::types::{Mapped, SizeView, Sorted, Specimen, Timed, Weighted};

/// The last-applied annotation the trimmed cache leaves out.
pub(crate) const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// How a case ended.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Stored exactly the race plus the mutation's effect.
    Exact,
    /// Failed as it should (recreated object, stale decision, a mutation
    /// the strategy refuses) and stored nothing.
    Refused(String),
    /// Anything else: the message says what differs.
    Violation(String),
}

/// The server and namespace cases run in.
pub(crate) struct Oracle {
    pub(crate) client: kube::Client,
    pub(crate) ns: concord_testenv::TestNamespace,
}

impl Oracle {
    /// On the shared control plane, with the specimen CRD installed.
    pub(crate) async fn new() -> anyhow::Result<Self> {
        let env = concord_testenv::TestEnv::shared()?;
        env.install_crd(super::types::crd()?).await?;
        env.install_crd(super::types::bare_crd()?).await?;
        let ns = env.namespace().await?;
        Ok(Oracle {
            client: env.client()?,
            ns,
        })
    }

    pub(crate) fn resource(kind: Kind) -> ApiResource {
        match kind {
            Kind::Specimen => ApiResource::erase::<Specimen>(&()),
            Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            Kind::Deployment => ApiResource::erase::<Deployment>(&()),
            Kind::Service => ApiResource::erase::<Service>(&()),
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::Bare => {
                let mut bare = ApiResource::erase::<Specimen>(&());
                bare.kind = "Bare".into();
                bare.plural = "bares".into();
                bare
            }
        }
    }

    pub(crate) fn raw(&self, kind: Kind) -> Api<DynamicObject> {
        if kind == Kind::Node {
            return Api::all_with(self.client.clone(), &Self::resource(kind));
        }
        Api::namespaced_with(self.client.clone(), self.ns.name(), &Self::resource(kind))
    }

    fn api<K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>>(
        &self,
    ) -> Api<K> {
        Api::namespaced(self.client.clone(), self.ns.name())
    }

    /// Run `case` on an object called `name`.
    pub(crate) async fn run(&self, name: &str, case: &Case) -> anyhow::Result<Verdict> {
        match case.mutation {
            Mut::Create | Mut::CreateGenerated => {
                return super::lifecycle::create_case(self, name, case).await;
            }
            Mut::Delete => return super::lifecycle::delete_case(self, name, case).await,
            _ => {}
        }
        let raw = self.raw(case.kind);
        create(&raw, name, case).await?;
        let before = get(&raw, name).await?.context("created object vanished")?;
        let hook = Arc::new(RaceHook::new(raw.clone(), name, case));
        let target = Target::new(self.client.clone(), Self::resource(case.kind))
            .with_field_manager("oracle");
        *hook.in_process.lock().await = Some(target.clone());
        let target = target.with_before_write(hook.clone());
        let mut result = self.write(case, name, target.clone()).await;
        // A requeued reconcile reads a fresh copy and writes again: on
        // an object recreated meanwhile too, as a new reconcile would.
        let mut requeued = false;
        for _ in 0..5 {
            if !(case.requeue && matches!(result, Err(Error::Conflict { .. }))) {
                break;
            }
            requeued = true;
            result = self.write(case, name, target.clone()).await;
        }
        let held_back = match hook.pending.lock().await.take() {
            Some(task) => {
                task.await??;
                true
            }
            None => false,
        };
        let stored = get(&raw, name).await?;
        let race_landed = hook.after_race.lock().await.clone();
        judge(
            case,
            &before,
            race_landed,
            held_back,
            requeued,
            stored,
            result,
        )
    }

    /// Read the copy the case's writer holds and write through it.
    async fn write(&self, case: &Case, name: &str, target: Target) -> Result<(), Error> {
        let policy = if case.requeue {
            ConflictPolicy::Requeue
        } else {
            ConflictPolicy::default()
        };
        let strategy = strategy_for(
            case.strategy.parse().unwrap_or_else(|_| unreachable!()),
            policy,
        );
        let mutation = to_mutation(case, &self.raw(case.kind), name).await;
        let fetch = |e: kube::Error| Error::Request {
            object: ObjectKey::new("oracle", None, name),
            source: Box::new(e),
        };
        match (case.kind, case.copy) {
            (kind, Copy::Raw) => {
                let copy = self.raw(kind).get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Deployment, Copy::Typed) => {
                let copy = self.api::<Deployment>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Service, Copy::Typed) => {
                let copy = self.api::<Service>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Node, Copy::Typed) => {
                let nodes: Api<Node> = Api::all(self.client.clone());
                let copy = nodes.get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Pod, Copy::Typed) => {
                let copy = self.api::<Pod>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (kind, Copy::Meta) if super::builtins::is_builtin(kind) => {
                let copy = self.raw(kind).get_metadata(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (kind, Copy::Trimmed) if kind != Kind::ConfigMap => {
                let mut copy = self.raw(kind).get(name).await.map_err(fetch)?;
                trim(&mut copy.metadata, &case.strategy);
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::ConfigMap, Copy::Trimmed) => {
                let mut copy = self.api::<ConfigMap>().get(name).await.map_err(fetch)?;
                trim(&mut copy.metadata, &case.strategy);
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::ConfigMap, Copy::Typed) => {
                let copy = self.api::<ConfigMap>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::ConfigMap, Copy::Meta) => {
                let copy = self
                    .api::<ConfigMap>()
                    .get_metadata(name)
                    .await
                    .map_err(fetch)?;
                write_as::<PartialObjectMeta<ConfigMap>>(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::Lagging) => {
                let copy = self.api::<Specimen>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::Sorted) => {
                let copy = self.api::<Sorted>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::View) => {
                let copy = self.api::<SizeView>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::Weighted) => {
                let copy = self.api::<Weighted>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::Mapped) => {
                let copy = self.api::<Mapped>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::Timed) => {
                let copy = self.api::<Timed>().get(name).await.map_err(fetch)?;
                write_as(target, strategy, copy, mutation).await
            }
            (Kind::Specimen, Copy::Meta) => {
                let copy = self
                    .api::<Specimen>()
                    .get_metadata(name)
                    .await
                    .map_err(fetch)?;
                write_as::<PartialObjectMeta<Specimen>>(target, strategy, copy, mutation).await
            }
            (kind, copy) => unreachable!("no {copy:?} copy of {kind:?}"),
        }
    }
}

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

async fn write_as<K>(
    target: Target,
    strategy: Arc<dyn concord_strategies::WriteStrategy>,
    copy: K,
    mutation: Mutation,
) -> Result<(), Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug + 'static,
{
    Writer::<K>::from_target(target, strategy)
        .write(&copy, &mutation)
        .await
        .map(|_| ())
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

/// The verdict on a case.
fn judge(
    case: &Case,
    before: &Value,
    after_race: Option<Value>,
    held_back: bool,
    requeued: bool,
    stored: Option<Value>,
    result: Result<(), Error>,
) -> anyhow::Result<Verdict> {
    let Some(stored) = stored.as_ref().map(normal) else {
        return Ok(Verdict::Violation("the object is gone".into()));
    };
    // The race landed before the write (the state the write met), or
    // after it (an in-process race held back by the write's turn).
    let met = match &after_race {
        Some(after) => normal(after),
        None => normal(before),
    };
    let mut wanted = expected(&case.mutation, &met);
    if held_back {
        apply_race(&case.race, &case.mutation, &mut wanted);
        tidy(&mut wanted);
    }
    let must_fail = !requeued
        && ((case.race == Race::Recreate && after_race.is_some())
            || (invalidates(&case.race, &case.mutation) && after_race.is_some()));
    // A type holding the tags as a set writes them back sorted and
    // deduplicated: the order is the type's, not a loss.
    let (wanted, stored, met) = match case.copy {
        Copy::Sorted => (
            as_set(wanted, "/spec/tags"),
            as_set(stored, "/spec/tags"),
            as_set(met, "/spec/tags"),
        ),
        _ => (wanted, stored, met),
    };
    let diff = || format!("\n  wanted {wanted}\n  stored {stored}");
    Ok(match result {
        Ok(()) if must_fail && matches(&met, &stored) => {
            Verdict::Refused("nothing to write on the new object".into())
        }
        Ok(()) if must_fail => Verdict::Violation(format!(
            "wrote although the object was recreated or the decision went stale:{}",
            diff()
        )),
        Ok(()) if matches(&wanted, &stored) => Verdict::Exact,
        Ok(()) => Verdict::Violation(format!("stored something else:{}", diff())),
        Err(e) if !matches(&met, &stored) => Verdict::Violation(format!(
            "failed ({e}) but stored a change:\n  met    {met}\n  stored {stored}"
        )),
        Err(e @ Error::UnsupportedMutation { .. }) => Verdict::Refused(e.to_string()),
        Err(e) if must_fail => Verdict::Refused(e.to_string()),
        Err(e) if matches(&wanted, &stored) => Verdict::Refused(format!("unchanged: {e}")),
        Err(e) => Verdict::Violation(format!("refused a write it could make: {e}{}", diff())),
    })
}

/// `object` with the list at `pointer` sorted and deduplicated.
fn as_set(mut object: Value, pointer: &str) -> Value {
    if let Some(Value::Array(list)) = object.pointer_mut(pointer) {
        list.sort_by_key(|v| v.to_string());
        list.dedup();
    }
    object
}
