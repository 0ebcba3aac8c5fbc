//! The concurrent change of a case, landed between the strategy's read and
//! its first request by a `BeforeWrite` hook: by a raw client, by an
//! in-process `strict` writer (against `locked`), or as a delete and
//! recreate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, ConflictPolicy, Mutation, ObjectKey, Observed, Target, strategy_for,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::model::{Case, Kind, Mut, Race};
use super::objects::get;

/// `race`'s change, applied to a raw object.
pub(crate) fn apply_race(race: &Race, mutation: &Mut, object: &mut Value) {
    let meta = &mut object["metadata"];
    match race {
        Race::None | Race::Recreate => {}
        Race::Label => meta["labels"]["raced"] = json!("yes"),
        Race::SameKey => match mutation {
            Mut::SetLabel(k, _) | Mut::RemoveLabel(k) => meta["labels"][k] = json!("raced"),
            Mut::SetAnnotation(k, _) | Mut::RemoveAnnotation(k) => {
                meta["annotations"][k] = json!("raced & <won>");
            }
            _ => {}
        },
        Race::Annotation(v) => meta["annotations"]["race.example/a"] = json!(v),
        Race::Finalizer => insert_at_0(meta, "finalizers", json!("race.example/f")),
        Race::Condition => insert_at_0(
            &mut object["status"],
            "conditions",
            json!({"type": "Raced", "status": "True", "reason": "Race", "message": "x&y",
                "lastTransitionTime": "2026-02-02T00:00:00Z"}),
        ),
        Race::Item => insert_at_0(
            &mut object["spec"],
            "items",
            json!({"name": "raced", "value": "r&r", "extra": "kept"}),
        ),
        Race::Tag => insert_at_0(&mut object["spec"], "tags", json!("raced")),
        Race::Rule => insert_at_0(
            &mut object["spec"],
            "rules",
            json!({"verbs": ["get"], "note": "raced"}),
        ),
        Race::Size => object["spec"]["size"] = json!(99),
        Race::Color => object["spec"]["color"] = json!("blue"),
        Race::Phase => object["status"]["phase"] = json!("Raced <phase>"),
        Race::Entry => {
            let kind = super::builtins::kind_of(object);
            let pointer = super::builtins::list_pointer(kind);
            let (parent, key) = pointer.rsplit_once('/').unwrap_or_default();
            if let Some(parent) = object.pointer_mut(parent) {
                insert_at_0(parent, key, super::builtins::raced_entry(kind));
            }
        }
        Race::Port => insert_at_0(
            &mut object["spec"],
            "ports",
            json!({"port": 53, "protocol": "UDP", "name": "dns", "extra": "kept"}),
        ),
    }
}

fn insert_at_0(parent: &mut Value, key: &str, entry: Value) {
    if !parent.is_object() {
        *parent = json!({});
    }
    match parent[key].as_array_mut() {
        Some(list) => list.insert(0, entry),
        None => parent[key] = json!([entry]),
    }
}

fn touches_status(race: &Race) -> bool {
    matches!(race, Race::Condition | Race::Phase)
}

/// Lands the race between the strategy's read and its first request.
pub(crate) struct RaceHook {
    pub(crate) raw: Api<DynamicObject>,
    pub(crate) name: String,
    pub(crate) case: Case,
    pub(crate) fired: AtomicBool,
    /// The stored object right after the race landed.
    pub(crate) after_race: Mutex<Option<Value>>,
    /// The target (without this hook) an in-process race writes through.
    pub(crate) in_process: Mutex<Option<Target>>,
    /// An in-process race still waiting for its turn.
    pub(crate) pending: Mutex<Option<tokio::task::JoinHandle<anyhow::Result<()>>>>,
}

impl std::fmt::Debug for RaceHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaceHook")
            .field("race", &self.case.race)
            .finish()
    }
}

#[async_trait]
impl BeforeWrite for RaceHook {
    async fn before_write(&self, _object: &ObjectKey, attempt: u32) {
        if attempt != 0 || self.case.race == Race::None || self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Err(e) = self.race().await {
            panic!("the race of {} failed: {e:#}", self.name);
        }
    }
}

impl RaceHook {
    /// The hook landing `case`'s race on `name`.
    pub(crate) fn new(raw: Api<DynamicObject>, name: &str, case: &Case) -> Self {
        RaceHook {
            raw,
            name: name.to_owned(),
            case: case.clone(),
            fired: AtomicBool::new(false),
            after_race: Mutex::new(None),
            in_process: Mutex::new(None),
            pending: Mutex::new(None),
        }
    }

    async fn race(&self) -> anyhow::Result<()> {
        if self.case.race == Race::Recreate {
            return self.recreate().await;
        }
        if self.case.strategy == "locked" {
            return self.race_in_process().await;
        }
        let mut object = get(&self.raw, &self.name)
            .await?
            .context("gone before the race")?;
        apply_race(&self.case.race, &self.case.mutation, &mut object);
        let body: DynamicObject = serde_json::from_value(object)?;
        let pp = PostParams::default();
        if touches_status(&self.case.race) && self.case.kind != Kind::Bare {
            self.raw.replace_status(&self.name, &pp, &body).await?;
        } else {
            self.raw.replace(&self.name, &pp, &body).await?;
        }
        *self.after_race.lock().await = get(&self.raw, &self.name).await?;
        Ok(())
    }

    /// The race written by another writer of this process (`strict`,
    /// sharing the locked writer's target): it waits for its turn if the
    /// locked write holds it.
    async fn race_in_process(&self) -> anyhow::Result<()> {
        let target = self.in_process.lock().await.clone().context("no target")?;
        let (race, mutation) = (self.case.race.clone(), self.case.mutation.clone());
        let change = move |o: &mut Value| apply_race(&race, &mutation, o);
        let mutation = if touches_status(&self.case.race) {
            Mutation::custom_status(change)
        } else {
            Mutation::custom(change)
        };
        let raw = self.raw.clone();
        let name = self.name.clone();
        let mut task = tokio::spawn(async move {
            let copy = raw.get(&name).await?;
            let strict = strategy_for(
                concord_strategies::StrategyName::Strict,
                ConflictPolicy::default(),
            );
            let json = serde_json::to_value(&copy)?;
            strict
                .write_json(&target, Observed::complete(json), &mutation)
                .await?;
            Ok(())
        });
        match tokio::time::timeout(Duration::from_millis(300), &mut task).await {
            Ok(done) => {
                done??;
                *self.after_race.lock().await = get(&self.raw, &self.name).await?;
            }
            // Held back by the locked write's turn: it lands after.
            Err(_) => *self.pending.lock().await = Some(task),
        }
        Ok(())
    }

    async fn recreate(&self) -> anyhow::Result<()> {
        let object = get(&self.raw, &self.name)
            .await?
            .context("gone before the race")?;
        self.raw
            .patch(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await?;
        self.raw
            .delete(&self.name, &DeleteParams::default())
            .await?;
        for _ in 0..100 {
            if self.raw.get_opt(&self.name).await?.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut again = object;
        for key in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            if let Some(m) = again["metadata"].as_object_mut() {
                m.remove(key);
            }
        }
        // With a status subresource, the status is not created with the
        // object.
        // A Service's cluster IP is the old object's, not the new one's.
        if let Some(spec) = again["spec"].as_object_mut() {
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
        let status = match self.case.kind {
            Kind::Bare => None,
            _ => again.as_object_mut().and_then(|o| o.remove("status")),
        };
        let body: DynamicObject = serde_json::from_value(again)?;
        self.raw.create(&PostParams::default(), &body).await?;
        if let Some(status) = status {
            self.raw
                .patch_status(
                    &self.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "status": status })),
                )
                .await?;
        }
        *self.after_race.lock().await = get(&self.raw, &self.name).await?;
        Ok(())
    }
}
