//! The shared cache on the real control plane: what it leaves out of the
//! objects it stores (and that writes from those copies still lose
//! nothing), its coalescing queue under a slow reconciler, metadata-only
//! controllers, and which caches serve the re-read of a metadata-only or
//! view write after a conflict, and how its first list arrives (streamed,
//! or in pages where the server does not stream).
//!
//! ```text
//! cargo test -p concord-tests --test framework manager::cache::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tempfile::TempPath;

use anyhow::Result;
use concord::strategies::Verb;
use concord::{
    Action, Context, Intent, Manager, ManagerArgs, Mutation, Reconciler, WriteError,
    cache::CacheTrim, cache::LAST_APPLIED,
};
use concord_testenv::faults::{FaultClass, FaultProxy, Faults, Verb as FaultVerb};
use concord_testenv::{TestEnv, TestNamespace};
use concord_tests::eventually;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
use serde_json::json;

const SEEN: &str = "cache.concord.dev/seen";

/// A strategy table in a temporary file, removed when the handle drops.
fn yaml(name: &str, text: &str) -> TempPath {
    concord_tests::yaml_file(&format!("concord-framework-cache-{name}-"), text).unwrap()
}

/// A manager whose every write goes through `strategy`.
async fn manager(client: kube::Client, strategy: &str, trim: CacheTrim) -> Manager {
    let config = yaml(strategy, &format!("strategies:\n  default: {strategy}\n"));
    // ANCHOR: trim
    Manager::builder("framework-cache-test")
        .with_client(client)
        .with_args(ManagerArgs::new().with_config(&*config))
        .with_signal_handling(false)
        .with_cache_trim(trim)
        // ANCHOR_END: trim
        .build()
        .await
        .unwrap()
}

/// What the reconciler was handed: whether it carried managed fields and
/// the last-applied annotation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Handed {
    managed_fields: bool,
    last_applied: bool,
}

/// Labels each ConfigMap with a typed closure and remembers what it was
/// handed.
struct Labeller(Arc<Mutex<Option<Handed>>>);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Labeller {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        if cm.labels().contains_key(SEEN) {
            return Ok(Action::await_change());
        }
        *self.0.lock().unwrap() = Some(Handed {
            managed_fields: cm.metadata.managed_fields.is_some(),
            last_applied: cm.annotations().contains_key(LAST_APPLIED),
        });
        let label = Mutation::typed(|cm: &mut ConfigMap| {
            cm.metadata
                .labels
                .get_or_insert_default()
                .insert(SEEN.into(), "yes".into());
        });
        ctx.write(&cm, label).await?;
        Ok(Action::await_change())
    }
}

/// The managers named in `object`'s managed fields.
fn managers(object: &ConfigMap) -> Vec<String> {
    let mut names: Vec<String> = object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test]
async fn the_cache_leaves_out_managed_fields_and_last_applied_and_writes_keep_both() -> Result<()> {
    let env = TestEnv::shared()?;
    // (strategy, trim, handed managed fields?, handed the annotation?)
    let cases = [
        ("strict", CacheTrim::default(), false, false),
        ("guarded", CacheTrim::default(), false, false),
        // `update` sends whole objects: the annotation stays in its cache.
        ("update", CacheTrim::default(), false, true),
        ("strict", CacheTrim::NONE, true, true),
    ];
    for (strategy, trim, managed_fields, last_applied) in cases {
        let ns = env.namespace().await?;
        let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
        let (created, applied) = applied_config_map(&maps).await?;
        let mut manager = manager(ns.client(), strategy, trim).await;
        let handed = Arc::new(Mutex::new(None));
        manager
            .controller("configmaps", maps.clone(), Labeller(handed.clone()))
            .add()?;
        let stop = manager.shutdown_handle();
        let running = tokio::spawn(manager.run());
        let labelled = eventually(Duration::from_secs(30), || async {
            maps.get("settings")
                .await
                .is_ok_and(|cm| cm.labels().contains_key(SEEN))
        })
        .await;
        stop.shutdown();
        running.await??;
        assert!(labelled, "{strategy}: the ConfigMap was never labelled");
        let stored = maps.get("settings").await?;
        assert_eq!(
            stored.annotations().get(LAST_APPLIED).map(String::as_str),
            Some(applied),
            "{strategy}: the last-applied annotation survived the write"
        );
        assert_eq!(
            stored.annotations().get("team").map(String::as_str),
            Some("a")
        );
        let before = managers(&created);
        let after = managers(&stored);
        assert!(
            before.iter().all(|m| after.contains(m)),
            "{strategy}: managed fields kept: {before:?} → {after:?}"
        );
        assert_eq!(
            *handed.lock().unwrap(),
            Some(Handed {
                managed_fields,
                last_applied
            }),
            "{strategy} ({trim:?}): what the reconciler was handed"
        );
    }
    Ok(())
}

/// Sleeps in every reconcile, recording the resourceVersions it saw.
struct Slow(Arc<Mutex<HashMap<String, Vec<u64>>>>);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Slow {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        let version = cm
            .resource_version()
            .unwrap_or_default()
            .parse()
            .unwrap_or(0);
        self.0
            .lock()
            .unwrap()
            .entry(cm.name_any())
            .or_default()
            .push(version);
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(Action::await_change())
    }
}

#[tokio::test]
async fn a_slow_controller_still_reconciles_every_object_at_its_final_version() -> Result<()> {
    const OBJECTS: usize = 20;
    const UPDATES: usize = 25;
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(ns.client(), "strict", CacheTrim::default()).await;
    let seen = Arc::new(Mutex::new(HashMap::new()));
    manager
        .controller("configmaps", maps.clone(), Slow(seen.clone()))
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let names: Vec<String> = (0..OBJECTS).map(|i| format!("burst-{i}")).collect();
    for name in &names {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    }
    // Every object changes UPDATES times while its reconciles take 300 ms.
    let updates = (0..UPDATES).flat_map(|n| {
        names
            .iter()
            .map(move |name| (name.clone(), json!({"data": {"n": n.to_string()}})))
    });
    concord_tests::merge_patch_all(&maps, updates, 8).await?;

    let mut finals = BTreeMap::new();
    for name in &names {
        let stored = maps.get(name).await?;
        finals.insert(
            name.clone(),
            stored.resource_version().unwrap().parse::<u64>()?,
        );
    }
    let caught_up = eventually(Duration::from_secs(60), || async {
        let seen = seen.lock().unwrap();
        finals
            .iter()
            .all(|(name, last)| seen.get(name).and_then(|v| v.last()) == Some(last))
    })
    .await;
    stop.shutdown();
    running.await??;
    let seen = seen.lock().unwrap();
    assert!(
        caught_up,
        "some object was never reconciled at its final version: {finals:?} vs {seen:?}"
    );
    for (name, versions) in seen.iter() {
        assert!(
            versions.windows(2).all(|w| w[0] <= w[1]),
            "{name} was reconciled at an older version after a newer one: {versions:?}"
        );
    }
    let reconciles: usize = seen.values().map(Vec::len).sum();
    let events = OBJECTS * (UPDATES + 1);
    assert!(
        reconciles < events,
        "{reconciles} reconciles for {events} changes: nothing was coalesced"
    );
    Ok(())
}

// ANCHOR: metadata_reconciler
/// Adds a finalizer and a label to Pods it sees only the metadata of.
struct MetadataOnly;

#[concord::async_trait]
impl Reconciler<PartialObjectMeta<Pod>> for MetadataOnly {
    type Error = WriteError;

    async fn reconcile(
        &self,
        pod: Arc<PartialObjectMeta<Pod>>,
        ctx: &Context<PartialObjectMeta<Pod>>,
    ) -> Result<Action, WriteError> {
        let written = ctx.add_finalizer(&pod, "cache.concord.dev/hold").await?;
        let pod = written.object.unwrap_or_else(|| pod.as_ref().clone());
        ctx.set_label(&pod, SEEN, "yes").await?;
        Ok(Action::await_change())
    }
}
// ANCHOR_END: metadata_reconciler

/// Runs a manager whose every write goes through `strategy`, with the
/// controller `add` adds, on one Pod (labelled `app: web`, holding another
/// controller's finalizer) until the Pod carries the label `until`; checks
/// that its spec and status are untouched and returns it as stored.
async fn on_one_pod(
    env: &TestEnv,
    strategy: &str,
    until: &str,
    add: impl FnOnce(&mut Manager, &TestNamespace) -> Result<(), concord::Error>,
) -> Result<Pod> {
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {
                    "name": "web-0",
                    "labels": {"app": "web"},
                    "finalizers": ["other.example.com/keep"],
                },
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/web:1"}]},
            }))?,
        )
        .await?;
    let mut manager = manager(ns.client(), strategy, CacheTrim::default()).await;
    add(&mut manager, &ns)?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let done = eventually(Duration::from_secs(30), || async {
        pods.get("web-0")
            .await
            .is_ok_and(|p| p.labels().contains_key(until))
    })
    .await;
    stop.shutdown();
    running.await??;
    let stored = pods.get("web-0").await?;
    assert!(
        done,
        "{strategy}: the Pod was never labelled {until}: {stored:?}"
    );
    assert_eq!(
        stored.spec, created.spec,
        "{strategy}: the spec is untouched"
    );
    assert_eq!(
        stored.status, created.status,
        "{strategy}: the status is untouched"
    );
    assert_eq!(
        stored.labels().get("app").map(String::as_str),
        Some("web"),
        "{strategy}"
    );
    pods.patch(
        "web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    Ok(stored)
}

#[tokio::test]
async fn a_metadata_only_controller_writes_metadata_and_nothing_else() -> Result<()> {
    let env = TestEnv::shared()?;
    for strategy in ["strict", "guarded", "update", "lax"] {
        let stored = on_one_pod(env, strategy, SEEN, |manager, ns| {
            // ANCHOR: metadata
            let metadata: Api<PartialObjectMeta<Pod>> = Api::namespaced(ns.client(), ns.name());
            manager
                .controller("pod-metadata", metadata, MetadataOnly)
                .add()
            // ANCHOR_END: metadata
        })
        .await?;
        let mut finalizers = stored.finalizers().to_vec();
        finalizers.sort();
        assert_eq!(
            finalizers,
            ["cache.concord.dev/hold", "other.example.com/keep"],
            "{strategy}: both finalizers (in either order)"
        );
    }
    Ok(())
}

// ANCHOR: view
/// A Pod as this controller reads it: metadata and phase, nothing else.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct PodPhase {
    metadata: kube::core::ObjectMeta,
    status: Option<Phase>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Phase {
    phase: Option<String>,
}

concord::view!(PodPhase, of = Pod);

/// Labels each Pod with its phase, through a typed closure on the view.
struct PhaseLabeller;

#[concord::async_trait]
impl Reconciler<PodPhase> for PhaseLabeller {
    type Error = WriteError;

    async fn reconcile(
        &self,
        pod: Arc<PodPhase>,
        ctx: &Context<PodPhase>,
    ) -> Result<Action, WriteError> {
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Unknown".into());
        let label = Mutation::typed(move |pod: &mut PodPhase| {
            pod.metadata
                .labels
                .get_or_insert_default()
                .insert("phase".into(), phase.clone());
        });
        ctx.write(&pod, label).await?;
        Ok(Action::await_change())
    }
}
// ANCHOR_END: view

#[tokio::test]
async fn a_view_controller_writes_what_it_changed_and_nothing_else() -> Result<()> {
    let env = TestEnv::shared()?;
    for strategy in ["strict", "guarded", "update", "lax"] {
        let stored = on_one_pod(env, strategy, "phase", |manager, ns| {
            let views: Api<PodPhase> = Api::namespaced(ns.client(), ns.name());
            manager.controller("pod-phase", views, PhaseLabeller).add()
        })
        .await?;
        assert_eq!(
            stored.labels().get("phase").map(String::as_str),
            Some("Pending"),
            "{strategy}"
        );
        assert_eq!(
            stored.finalizers(),
            ["other.example.com/keep"],
            "{strategy}"
        );
    }
    Ok(())
}

/// `store` becomes ready within a minute in each of three tasks that wait
/// on it at once (beside the controllers' own waits), holding `objects`.
/// Each waits in a task of its own, so a waiter that is never woken fails
/// the test instead of being polled again by the timeout.
async fn ready_with<K: concord::Object>(store: concord::cache::Store<K>, objects: usize) {
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.wait_until_ready().await })
        })
        .collect();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(60), waiter)
            .await
            .expect("every waiter is woken within a minute")
            .expect("the waiting task ran")
            .expect("the store became ready");
    }
    assert!(store.is_ready());
    assert_eq!(store.len(), objects, "the ready store holds every object");
}

#[tokio::test]
async fn the_store_a_context_hands_out_becomes_ready_once_the_cache_synced() -> Result<()> {
    const OBJECTS: usize = 30;
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    for i in 0..OBJECTS {
        let pod = json!({
            "metadata": {"name": format!("ready-{i}")},
            "spec": {"containers": [{"name": "main", "image": "registry.invalid/pause:1"}]}
        });
        pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
            .await?;
    }
    let mut manager = manager(ns.client(), "guarded", CacheTrim::default()).await;
    let whole: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let metadata: Api<PartialObjectMeta<Pod>> = Api::namespaced(ns.client(), ns.name());
    let views: Api<PodPhase> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("whole", whole, concord_tests::Idle)
        .add()?;
    manager
        .controller("metadata", metadata, concord_tests::Idle)
        .add()?;
    manager
        .controller("views", views, concord_tests::Idle)
        .add()?;
    let stores = (
        manager.context::<Pod>().store().expect("a store of Pods"),
        manager
            .context::<PartialObjectMeta<Pod>>()
            .store()
            .expect("a store of metadata"),
        manager
            .context::<PodPhase>()
            .store()
            .expect("a store of views"),
    );
    assert!(!stores.0.is_ready(), "not ready before the manager runs");
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    // ANCHOR: wait_until_ready
    let (whole, metadata, views) = stores;
    ready_with(whole, OBJECTS).await;
    ready_with(metadata, OBJECTS).await;
    ready_with(views, OBJECTS).await;
    // ANCHOR_END: wait_until_ready
    stop.shutdown();
    running.await??;
    Ok(())
}

#[tokio::test]
async fn waiting_for_a_store_fails_when_the_manager_stops_before_it_synced() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let mut manager = manager(ns.client(), "guarded", CacheTrim::default()).await;
    let pods: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("never-runs", pods, concord_tests::Idle)
        .add()?;
    let store = manager.context::<Pod>().store().expect("a store of Pods");
    let waiter = tokio::spawn(async move { store.wait_until_ready().await });
    drop(manager);
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiter).await??;
    let error = outcome.expect_err("a manager dropped unstarted never syncs its cache");
    assert!(
        error.to_string().contains("cache:pods/"),
        "the error names the cache: {error}"
    );
    Ok(())
}

/// What a write the test makes conflict puts in, and what another client
/// changed in between: values the API server encodes as Go does (`&`, `<`
/// escaped) and non-ASCII text.
const MINE: &str = "cache.concord.dev/mine";
const MINE_VALUE: &str = "x & y < z — ü";
const OTHER: &str = "other.example.com/note";
const OTHER_VALUE: &str = "a&b <c> ä";

/// Creates the ConfigMap `settings` as `kubectl apply` would (with the
/// last-applied annotation), returning it and that annotation.
async fn applied_config_map(maps: &Api<ConfigMap>) -> Result<(ConfigMap, &'static str)> {
    let applied = r#"{"apiVersion":"v1","kind":"ConfigMap","data":{"big":"yes"}}"#;
    let created = maps
        .create(
            &PostParams {
                field_manager: Some("kubectl-client-side-apply".into()),
                ..PostParams::default()
            },
            &serde_json::from_value(json!({
                "metadata": {"name": "settings", "annotations": {LAST_APPLIED: applied, "team": "a"}},
                "data": {"big": "yes"},
            }))?,
        )
        .await?;
    Ok((created, applied))
}

/// Another client annotates `settings`, moving it past any copy taken
/// before; waits until `cached` (a manager's cache) holds that version.
async fn another_client_annotates(
    maps: &Api<ConfigMap>,
    cached: impl Fn() -> Option<String>,
) -> Result<()> {
    let params = PatchParams {
        field_manager: Some("other-client".into()),
        ..PatchParams::default()
    };
    let patch = json!({"metadata": {"annotations": {OTHER: OTHER_VALUE}}});
    let newer = maps
        .patch("settings", &params, &Patch::Merge(&patch))
        .await?
        .resource_version();
    // The write still starts from its older copy; what follows does not
    // depend on how fast the watch is.
    let caught_up = eventually(Duration::from_secs(30), || async { cached() == newer }).await;
    assert!(caught_up, "the cache never held the other client's version");
    Ok(())
}

#[tokio::test]
async fn a_metadata_only_write_rereads_from_a_full_cache_after_a_conflict() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let (created, applied) = applied_config_map(&maps).await?;
    let mut manager = manager(ns.client(), "strict", CacheTrim::default()).await;
    manager
        .controller("whole", maps.clone(), concord_tests::Idle)
        .add()?;
    // A metadata-only controller of the same resource, whose own cache
    // does not hold `settings`.
    let metadata: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(ns.client(), ns.name());
    manager
        .controller("triggers", metadata, concord_tests::Idle)
        .with_labels("role=trigger")
        .add()?;
    let whole = manager.context::<ConfigMap>();
    let ctx = manager.context::<PartialObjectMeta<ConfigMap>>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let stale = maps.get_metadata("settings").await?;
    another_client_annotates(&maps, || {
        whole
            .cached(Some(ns.name()), "settings")
            .and_then(|cm| cm.resource_version())
    })
    .await?;
    let own = ctx.store().expect("the metadata-only controller's cache");
    own.wait_until_ready().await?;
    assert!(ctx.cached(Some(ns.name()), "settings").is_none());
    let mine = Mutation::from(Intent::set_annotation(MINE, MINE_VALUE));
    let written = ctx.write(&stale, mine).await?;
    stop.shutdown();
    running.await??;

    let outcome = &written.outcome;
    assert_eq!(
        (
            outcome.conflicts,
            outcome.rereads_from_cache,
            outcome.rereads_by_get
        ),
        (1, 1, 0),
        "re-read from the ConfigMap cache: {outcome:?}"
    );
    assert_eq!(outcome.requests(Verb::Get), 0, "{outcome:?}");
    let stored = maps.get("settings").await?;
    let annotation = |key: &str| stored.annotations().get(key).map(String::as_str);
    assert_eq!(annotation(MINE), Some(MINE_VALUE), "{stored:?}");
    assert_eq!(annotation(OTHER), Some(OTHER_VALUE), "{stored:?}");
    assert_eq!(annotation(LAST_APPLIED), Some(applied), "{stored:?}");
    assert_eq!(annotation("team"), Some("a"), "{stored:?}");
    assert_eq!(stored.data, created.data);
    let (before, after) = (managers(&created), managers(&stored));
    assert!(
        before.iter().all(|m| after.contains(m)) && after.contains(&"other-client".to_owned()),
        "managed fields kept: {before:?} → {after:?}"
    );
    Ok(())
}

/// A ConfigMap as a controller that reads only its data sees it.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct DataView {
    metadata: kube::core::ObjectMeta,
    data: Option<BTreeMap<String, String>>,
}

concord::view!(DataView, of = ConfigMap);

/// Watches ConfigMaps as `DynamicObject`s and does nothing.
struct IdleDynamic;

#[concord::async_trait]
impl Reconciler<DynamicObject> for IdleDynamic {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        _: Arc<DynamicObject>,
        _: &Context<DynamicObject>,
    ) -> Result<Action, Self::Error> {
        Ok(Action::await_change())
    }
}

/// A view's write of a stale copy through a manager with a full typed
/// cache of ConfigMaps (and a `DynamicObject` one when `dynamic`): its
/// outcome, after checking that both clients' changes are stored.
async fn view_write_after_a_conflict(
    env: &TestEnv,
    dynamic: bool,
) -> Result<concord::strategies::Outcome> {
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let (created, applied) = applied_config_map(&maps).await?;
    let mut manager = manager(ns.client(), "strict", CacheTrim::default()).await;
    manager
        .controller("whole", maps.clone(), concord_tests::Idle)
        .add()?;
    let resource = ApiResource::erase::<ConfigMap>(&());
    if dynamic {
        let objects = Api::<DynamicObject>::namespaced_with(ns.client(), ns.name(), &resource);
        manager
            .controller_with("dynamic", objects, resource.clone(), IdleDynamic)
            .add()?;
    }
    let whole = manager.context::<ConfigMap>();
    let objects = manager.context_with::<DynamicObject>(resource);
    let ctx = manager.context::<DataView>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let stale: DataView = serde_json::from_value(serde_json::to_value(&created)?)?;
    another_client_annotates(&maps, || {
        let typed = whole
            .cached(Some(ns.name()), "settings")
            .and_then(|cm| cm.resource_version());
        if !dynamic {
            return typed;
        }
        // Both caches hold the version, or neither counts.
        objects
            .cached(Some(ns.name()), "settings")
            .and_then(|o| o.resource_version())
            .filter(|rv| Some(rv) == typed.as_ref())
    })
    .await?;
    let mine = Mutation::typed(|view: &mut DataView| {
        view.data
            .get_or_insert_default()
            .insert("mine".into(), MINE_VALUE.into());
    });
    let written = ctx.write(&stale, mine).await?;
    stop.shutdown();
    running.await??;

    let stored = maps.get("settings").await?;
    let data = stored.data.clone().unwrap_or_default();
    assert_eq!(data.get("mine").map(String::as_str), Some(MINE_VALUE));
    assert_eq!(data.get("big").map(String::as_str), Some("yes"));
    let annotation = |key: &str| stored.annotations().get(key).map(String::as_str);
    assert_eq!(annotation(OTHER), Some(OTHER_VALUE), "{stored:?}");
    assert_eq!(annotation(LAST_APPLIED), Some(applied), "{stored:?}");
    Ok(written.outcome)
}

#[tokio::test]
async fn a_view_write_never_rereads_from_a_typed_cache_of_another_type() -> Result<()> {
    let env = TestEnv::shared()?;
    let outcome = view_write_after_a_conflict(env, false).await?;
    assert_eq!(
        (
            outcome.conflicts,
            outcome.rereads_from_cache,
            outcome.rereads_by_get
        ),
        (1, 0, 1),
        "a ConfigMap may lack a field the view declares: {outcome:?}"
    );
    assert_eq!(outcome.requests(Verb::Get), 1, "{outcome:?}");
    let outcome = view_write_after_a_conflict(env, true).await?;
    assert_eq!(
        (
            outcome.conflicts,
            outcome.rereads_from_cache,
            outcome.rereads_by_get
        ),
        (1, 1, 0),
        "a DynamicObject holds every field the server sent: {outcome:?}"
    );
    assert_eq!(outcome.requests(Verb::Get), 0, "{outcome:?}");
    Ok(())
}

/// A manager whose client goes through `proxy`, with an idle controller of
/// the namespace's ConfigMaps; its store once ready (three objects were
/// created first), or an error after 60 s.
async fn synced_through(proxy: &FaultProxy, ns: &TestNamespace) -> Result<usize> {
    let client = kube::Client::try_from(proxy.config())?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let mut manager = manager(client, "strict", CacheTrim::default()).await;
    manager
        .controller("maps", maps, concord_tests::Idle)
        .add()?;
    let store = manager
        .context::<ConfigMap>()
        .store()
        .expect("the controller's cache");
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let ready = tokio::time::timeout(Duration::from_secs(60), store.wait_until_ready()).await;
    let held = store.len();
    stop.shutdown();
    running.await??;
    ready.map_err(|_| anyhow::anyhow!("the cache did not sync in 60 s: {}", proxy.report()))??;
    Ok(held)
}

async fn three_config_maps(ns: &TestNamespace) -> Result<()> {
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for name in ["a", "b", "c"] {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    }
    Ok(())
}

#[tokio::test]
async fn the_first_list_streams_where_the_server_serves_streaming_lists() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    three_config_maps(&ns).await?;
    // Every LIST of ConfigMaps fails: a cache that listed could not sync.
    let faults = Faults::seeded(1)
        .on(FaultVerb::List)
        .resource("configmaps")
        .fail_with(500);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    assert_eq!(synced_through(&proxy, &ns).await?, 3);
    assert_eq!(
        proxy.report().total(),
        0,
        "no LIST was sent: {}",
        proxy.report()
    );
    Ok(())
}

#[tokio::test]
async fn the_first_list_comes_in_pages_when_the_server_does_not_stream() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    three_config_maps(&ns).await?;
    // The first watch (the cache's question whether lists stream) fails,
    // as on a server without streaming lists; the first LIST is throttled,
    // which shows that one was sent.
    let faults = Faults::seeded(2)
        .on(FaultVerb::Watch)
        .resource("configmaps")
        .fail_with(500)
        .times(1)
        .on(FaultVerb::List)
        .resource("configmaps")
        .throttle(1)
        .times(1);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    assert_eq!(synced_through(&proxy, &ns).await?, 3);
    let report = proxy.report();
    assert_eq!(
        (
            report.count(FaultClass::ServerError),
            report.count(FaultClass::Throttle)
        ),
        (1, 1),
        "the question failed and the cache listed: {report}"
    );
    Ok(())
}
