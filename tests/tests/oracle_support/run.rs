//! Running one case on the real API server: create the object, read the
//! writer's copy, write through the strategy while the race lands between
//! the strategy's read and its request, read what was stored, and judge
//! it against the model.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use async_trait::async_trait;
use concord_strategies::{
    BeforeWrite, Condition, ConflictPolicy, Error, Intent, Mutation, ObjectKey, Observed, Target,
    Writer, strategy_for,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::model::{ANY_TIME, Case, Copy, Initial, Kind, Mut, Race, expected, invalidates, tidy};
use super::types::{LagItem, SizeView, Sorted, Specimen};

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
        let ns = env.namespace().await?;
        Ok(Oracle {
            client: env.client()?,
            ns,
        })
    }

    fn resource(kind: Kind) -> ApiResource {
        match kind {
            Kind::Specimen => ApiResource::erase::<Specimen>(&()),
            Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
        }
    }

    fn raw(&self, kind: Kind) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), self.ns.name(), &Self::resource(kind))
    }

    fn api<K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>>(
        &self,
    ) -> Api<K> {
        Api::namespaced(self.client.clone(), self.ns.name())
    }

    /// Run `case` on an object called `name`.
    pub(crate) async fn run(&self, name: &str, case: &Case) -> anyhow::Result<Verdict> {
        let raw = self.raw(case.kind);
        create(&raw, name, case).await?;
        let before = get(&raw, name).await?.context("created object vanished")?;
        let hook = Arc::new(RaceHook {
            oracle_client: self.client.clone(),
            raw: raw.clone(),
            name: name.to_owned(),
            case: case.clone(),
            fired: AtomicBool::new(false),
            after_race: Mutex::new(None),
            in_process: Mutex::new(None),
            pending: Mutex::new(None),
        });
        let target = Target::new(self.client.clone(), Self::resource(case.kind))
            .with_field_manager("oracle");
        *hook.in_process.lock().await = Some(target.clone());
        let target = target.with_before_write(hook.clone());
        let result = self.write(case, name, target).await;
        let held_back = match hook.pending.lock().await.take() {
            Some(task) => {
                task.await??;
                true
            }
            None => false,
        };
        let stored = get(&raw, name).await?;
        let race_landed = hook.after_race.lock().await.clone();
        judge(case, &before, race_landed, held_back, stored, result)
    }

    /// Read the copy the case's writer holds and write through it.
    async fn write(&self, case: &Case, name: &str, target: Target) -> Result<(), Error> {
        let strategy = strategy_for(
            case.strategy.parse().unwrap_or_else(|_| unreachable!()),
            ConflictPolicy::default(),
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
            (Kind::Specimen, Copy::Trimmed) => {
                let mut copy = self.raw(Kind::Specimen).get(name).await.map_err(fetch)?;
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
fn trim(meta: &mut kube::core::ObjectMeta, strategy: &str) {
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

/// The concord mutation standing for `case.mutation` on the case's copy.
async fn to_mutation(case: &Case, raw: &Api<DynamicObject>, name: &str) -> Mutation {
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
        Kind::Specimen => {
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
            json!({"apiVersion": format!("{}/v1", super::types::GROUP), "kind": "Specimen",
                "spec": spec})
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
                let mut c = json!({"type": type_, "status": status, "reason": "Initial",
                    "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"});
                if let Some(severity) = severity {
                    c["severity"] = json!(severity);
                }
                c
            })
            .collect();
    }
    (status != json!({})).then_some(status)
}

async fn create(raw: &Api<DynamicObject>, name: &str, case: &Case) -> anyhow::Result<()> {
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

async fn get(raw: &Api<DynamicObject>, name: &str) -> anyhow::Result<Option<Value>> {
    Ok(raw
        .get_opt(name)
        .await?
        .map(serde_json::to_value)
        .transpose()?)
}

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
        Race::Size => object["spec"]["size"] = json!(99),
        Race::Color => object["spec"]["color"] = json!("blue"),
        Race::Phase => object["status"]["phase"] = json!("Raced <phase>"),
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
struct RaceHook {
    oracle_client: kube::Client,
    raw: Api<DynamicObject>,
    name: String,
    case: Case,
    fired: AtomicBool,
    /// The stored object right after the race landed.
    after_race: Mutex<Option<Value>>,
    /// The target (without this hook) an in-process race writes through.
    in_process: Mutex<Option<Target>>,
    /// An in-process race still waiting for its turn.
    pending: Mutex<Option<tokio::task::JoinHandle<anyhow::Result<()>>>>,
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
    async fn race(&self) -> anyhow::Result<()> {
        let _ = &self.oracle_client;
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
        if touches_status(&self.case.race) {
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
        let status = again.as_object_mut().and_then(|o| o.remove("status"));
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
fn matches(wanted: &Value, stored: &Value) -> bool {
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
        _ => wanted == stored,
    }
}

/// The verdict on a case.
fn judge(
    case: &Case,
    before: &Value,
    after_race: Option<Value>,
    held_back: bool,
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
    let must_fail = (case.race == Race::Recreate && after_race.is_some())
        || (invalidates(&case.race, &case.mutation) && after_race.is_some());
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
