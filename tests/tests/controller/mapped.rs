//! Watches of another kind mapped to a controller's objects through an
//! index, and cached reads of any kind, on the real control plane.
//!
//! ```text
//! cargo test -p concord-tests --test controller mapped:: -- --nocapture
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::exact_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use concord::{Action, Context, Manager, Reconciler, cache::CacheError};
use concord_testenv::TestEnv;
use concord_tests::eventually;
use exact_support::Gadget;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const OWNERS: usize = 100;
const MAPS_PER_OWNER: usize = 10;
/// The annotation a gadget lists its source ConfigMaps in, comma-separated.
const SOURCES: &str = "first-week.example/sources";

async fn manager(client: Client) -> Manager {
    Manager::builder("mapped-test")
        .with_client(client)
        .with_signal_handling(false)
        .build()
        .await
        .unwrap()
}

/// Counts each gadget's reconciles and what its sources hold, read from
/// the manager's ConfigMap cache.
#[derive(Clone, Default)]
struct Counting {
    reconciles: Arc<Mutex<BTreeMap<String, usize>>>,
    /// Per gadget: how many of its labelled sources the cache held.
    sources_seen: Arc<Mutex<BTreeMap<String, usize>>>,
    /// What asking for a kind nobody caches answered.
    uncached: Arc<Mutex<Option<CacheError>>>,
}

#[concord::async_trait]
impl Reconciler<Gadget> for Counting {
    type Error = CacheError;

    async fn reconcile(
        &self,
        gadget: Arc<Gadget>,
        ctx: &Context<Gadget>,
    ) -> Result<Action, CacheError> {
        let name = gadget.name_any();
        // ANCHOR: cached_reads
        let maps = ctx.cache::<ConfigMap>()?;
        let mine = maps.list(
            gadget.namespace().as_deref(),
            Some(&format!("owner={name}")),
        )?;
        // ANCHOR_END: cached_reads
        self.sources_seen
            .lock()
            .unwrap()
            .insert(name.clone(), mine.len());
        *self.reconciles.lock().unwrap().entry(name).or_default() += 1;
        *self.uncached.lock().unwrap() = ctx.cache::<Secret>().err();
        Ok(Action::await_change())
    }
}

fn source_names(owner: usize) -> Vec<String> {
    (0..MAPS_PER_OWNER)
        .map(|i| format!("src-{}", owner * MAPS_PER_OWNER + i))
        .collect()
}

/// 1,000 ConfigMaps mapped to 100 gadgets through an index: every map's
/// event reconciles exactly the gadget that names it, the gadgets' compact
/// cache decodes no gadget for the mapping (no more copies than
/// reconciles), the reconciler reads the maps from the shared cache by
/// label, and a kind nobody caches is an error, not a request.
#[tokio::test]
async fn mapped_watches_reconcile_the_indexed_owners_and_decode_nothing_else() -> Result<()> {
    let env = TestEnv::shared()?;
    exact_support::install(env).await?;
    let ns = env.namespace().await?;
    let gadgets: Api<Gadget> = Api::namespaced(ns.client(), ns.name());
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for owner in 0..OWNERS {
        let gadget: Gadget = serde_json::from_value(json!({
            "apiVersion": "exact.concord.example/v1", "kind": "Gadget",
            "metadata": {"name": format!("g-{owner}"),
                         "annotations": {SOURCES: source_names(owner).join(",")}},
            "spec": {"size": 1},
        }))?;
        gadgets.create(&PostParams::default(), &gadget).await?;
    }

    let mut manager = manager(env.client()?).await;
    let counting = Counting::default();
    // ANCHOR: watches
    manager.index::<Gadget>("source", |gadget| {
        let namespace = gadget.namespace().unwrap_or_default();
        gadget
            .annotations()
            .get(SOURCES)
            .map(|list| {
                list.split(',')
                    .map(|map| format!("{namespace}/{map}"))
                    .collect()
            })
            .unwrap_or_default()
    })?;
    manager
        .controller("gadgets", gadgets.clone(), counting.clone())
        .watches(maps.clone(), |map: &ConfigMap, caches| {
            let key = format!("{}/{}", map.namespace().unwrap_or_default(), map.name_any());
            caches
                .store::<Gadget>()
                .and_then(|gadgets| gadgets.indexed("source", &key))
                .unwrap_or_else(|error| {
                    eprintln!("mapping a ConfigMap: {error}");
                    Vec::<ObjectRef<Gadget>>::new()
                })
        })
        .add()?;
    // ANCHOR_END: watches
    let store = manager.caches().store::<Gadget>()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let reconciled = |min: usize| {
        let counts = counting.reconciles.clone();
        move || {
            let counts = counts.clone();
            async move {
                let counts = counts.lock().unwrap();
                counts.len() == OWNERS && counts.values().all(|n| *n >= min)
            }
        }
    };
    assert!(
        eventually(WAIT, reconciled(1)).await,
        "each gadget reconciled once"
    );
    let (decoded_before, _) = store.decoding();
    let reconciles_before: usize = counting.reconciles.lock().unwrap().values().sum();

    for owner in 0..OWNERS {
        for map in source_names(owner) {
            let object = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(map),
                    labels: Some(BTreeMap::from([("owner".to_owned(), format!("g-{owner}"))])),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            maps.create(&PostParams::default(), &object).await?;
        }
    }
    assert!(
        eventually(WAIT, || async {
            let seen = counting.sources_seen.lock().unwrap();
            seen.len() == OWNERS && seen.values().all(|n| *n == MAPS_PER_OWNER)
        })
        .await,
        "every gadget was reconciled after its last source arrived, and read all {MAPS_PER_OWNER} from the cache: {:?}",
        counting.sources_seen.lock().unwrap()
    );
    let (decoded_after, _) = store.decoding();
    let reconciles_after: usize = counting.reconciles.lock().unwrap().values().sum();
    let decoded = decoded_after - decoded_before;
    let reconciles = reconciles_after - reconciles_before;
    println!(
        "mapped {} ConfigMaps to {OWNERS} gadgets: {reconciles} reconciles, {decoded} gadgets decoded",
        OWNERS * MAPS_PER_OWNER
    );
    assert!(reconciles >= OWNERS, "every owner was reconciled again");
    assert!(
        decoded <= reconciles as u64,
        "the mapping decoded gadgets it did not hand out: {decoded} decoded, {reconciles} reconciles"
    );
    assert!(
        matches!(
            counting.uncached.lock().unwrap().as_ref(),
            Some(CacheError::NoCache { resource }) if resource == "secrets"
        ),
        "a kind nobody caches is a NoCache error"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}

/// Counts each gadget's reconciles.
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<BTreeMap<String, usize>>>);

#[concord::async_trait]
impl Reconciler<Gadget> for Tally {
    type Error = CacheError;

    async fn reconcile(
        &self,
        gadget: Arc<Gadget>,
        _: &Context<Gadget>,
    ) -> Result<Action, CacheError> {
        *self.0.lock().unwrap().entry(gadget.name_any()).or_default() += 1;
        Ok(Action::await_change())
    }
}

/// `owns`: a change to a ConfigMap whose controller owner is a gadget
/// reconciles that gadget, and one to a ConfigMap it does not own does not.
#[tokio::test]
async fn an_owned_child_changed_by_another_writer_reconciles_its_owner() -> Result<()> {
    let env = TestEnv::shared()?;
    exact_support::install(env).await?;
    let ns = env.namespace().await?;
    let gadgets: Api<Gadget> = Api::namespaced(ns.client(), ns.name());
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?).await;
    let tally = Tally::default();
    // ANCHOR: owns
    manager
        .controller("gadgets", gadgets.clone(), tally.clone())
        .owns(maps.clone())
        .add()?;
    // ANCHOR_END: owns
    let ctx = manager.context::<Gadget>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let gadget: Gadget = serde_json::from_value(json!({
        "apiVersion": "exact.concord.example/v1", "kind": "Gadget",
        "metadata": {"name": "owner"}, "spec": {"size": 1},
    }))?;
    let owner = gadgets.create(&PostParams::default(), &gadget).await?;
    let count = || tally.0.lock().unwrap().get("owner").copied().unwrap_or(0);
    assert!(eventually(WAIT, || async { count() >= 1 }).await);
    let child = ConfigMap {
        metadata: ObjectMeta {
            name: Some("child".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    ctx.create_owned(&owner, child).await.unwrap();
    let stranger = ConfigMap {
        metadata: ObjectMeta {
            name: Some("stranger".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    maps.create(&PostParams::default(), &stranger).await?;
    // Let the creates' events pass, then count from here.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = count();
    maps.patch(
        "stranger",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        count(),
        before,
        "a ConfigMap the gadget does not own is not mapped to it"
    );
    maps.patch(
        "child",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"data": {"changed": "by another writer"}})),
    )
    .await?;
    assert!(
        eventually(WAIT, || async { count() > before }).await,
        "the owner was reconciled after its child changed"
    );
    stop.shutdown();
    running.await??;
    Ok(())
}
