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
use kube::api::Api;
use kube::core::PartialObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::expected::{expected, invalidates, tidy};
use super::model::{Case, Copy, Kind, Mut, Race};
use super::mutations::to_mutation;
use super::objects::{create, get, matches, normal, trim};
use super::oracle::Oracle;
use super::race::{RaceHook, apply_race};
use super::types::{Mapped, SizeView, Sorted, Specimen, Timed, Weighted};
use super::verdict::Verdict;

impl Oracle {
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
