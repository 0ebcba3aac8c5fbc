//! The cache layouts on the real control plane: controllers whose cache
//! holds each object as JSON (the default) reconcile every object, through
//! requeues they schedule themselves, and their writes lose nothing while
//! another client writes the same objects (`strict`, `guarded`, `update`),
//! with values holding `&`, `<` and non-ASCII text; so do those of a
//! cache of typed objects.
//!
//! ```text
//! cargo test -p concord-tests --test framework compact::
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, ensure};
use concord::{
    Action, Context, Manager, ManagerArgs, Mutation, Reconciler, WriteError, cache::CacheLayout,
};
use concord_testenv::{TestEnv, TestNamespace};
use concord_tests::{eventually, merge_patch_all};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::json;

const OBJECTS: usize = 12;
/// Reconciles per object, each a write, chained by `Action::requeue`.
const ROUNDS: usize = 3;
/// Writes of the other client per object, racing the reconciles.
const OTHERS: usize = 6;
/// Not plain ASCII, and what the API server escapes in JSON (`&`, `<`).
const VALUE: &str = "a&b<c>ü";

/// Writes `r<n>` into each ConfigMap, one round per reconcile, asking to
/// be requeued until it has written them all: the requeue reaches the
/// controller without the queue, so a compact cache's controller finds
/// the object missing from its store and takes it back from the cache.
struct Rounds {
    reconciles: Arc<Mutex<HashMap<String, usize>>>,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Rounds {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        *self
            .reconciles
            .lock()
            .unwrap()
            .entry(cm.name_any())
            .or_default() += 1;
        let data = cm.data.clone().unwrap_or_default();
        let Some(round) = (0..ROUNDS).find(|n| !data.contains_key(&format!("r{n}"))) else {
            return Ok(Action::await_change());
        };
        let write = Mutation::typed(move |cm: &mut ConfigMap| {
            cm.data
                .get_or_insert_default()
                .insert(format!("r{round}"), VALUE.into());
        });
        ctx.write(&cm, write).await?;
        Ok(Action::requeue(Duration::from_millis(50)))
    }
}

async fn manager_in(
    ns: &TestNamespace,
    strategy: &str,
    layout: CacheLayout,
) -> Result<(Manager, tempfile::TempPath)> {
    let mut config = tempfile::Builder::new()
        .prefix("concord-compact-")
        .suffix(".yaml")
        .tempfile()?;
    std::io::Write::write_all(
        &mut config,
        format!("strategies:\n  default: {strategy}\n").as_bytes(),
    )?;
    let config = config.into_temp_path();
    // ANCHOR: layout
    let manager = Manager::builder("framework-compact-test")
        .with_client(ns.client())
        .with_args(ManagerArgs::new().with_config(&config))
        .with_signal_handling(false)
        .with_cache_layout(layout)
        .build()
        .await?;
    // ANCHOR_END: layout
    Ok((manager, config))
}

/// Runs the controller on [`OBJECTS`] ConfigMaps under `strategy` while
/// another client writes each [`OTHERS`] times, and checks every write of
/// both is stored.
async fn race(env: &TestEnv, strategy: &'static str, layout: CacheLayout) -> Result<()> {
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("compact-{i}")).collect();
    for name in &names {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}, "data": {"seed": VALUE}}))?,
        )
        .await?;
    }
    let (mut manager, _config) = manager_in(&ns, strategy, layout).await?;
    let reconciles = Arc::new(Mutex::new(HashMap::new()));
    manager
        .controller(
            "rounds",
            maps.clone(),
            Rounds {
                reconciles: reconciles.clone(),
            },
        )
        .add()?;
    let store = manager
        .context::<ConfigMap>()
        .store()
        .context("the cache's store")?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    tokio::time::timeout(Duration::from_secs(30), store.wait_until_ready())
        .await
        .context("the compact cache synced within 30 s")??;
    let others = (0..OTHERS).flat_map(|n| {
        names
            .iter()
            .map(move |name| (name.clone(), json!({"data": {format!("other-{n}"): VALUE}})))
    });
    merge_patch_all(&maps, others, 4).await?;

    let expected: BTreeMap<String, String> = (0..ROUNDS)
        .map(|n| format!("r{n}"))
        .chain((0..OTHERS).map(|n| format!("other-{n}")))
        .chain(["seed".to_owned()])
        .map(|key| (key, VALUE.to_owned()))
        .collect();
    let all_written = eventually(Duration::from_secs(60), || async {
        let mut done = true;
        for name in &names {
            let data = maps.get(name).await.ok().and_then(|cm| cm.data);
            done &= data.as_ref() == Some(&expected);
        }
        done
    })
    .await;
    // The cache serves the stored copy, decoded, as `Context::cached` reads it.
    let cached_matches = eventually(Duration::from_secs(10), || async {
        let mut same = true;
        for name in &names {
            let stored = maps
                .get(name)
                .await
                .ok()
                .and_then(|cm| cm.resource_version());
            let key = kube::runtime::reflector::ObjectRef::new(name).within(ns.name());
            let cached = store.get(&key).and_then(|cm| cm.resource_version());
            same &= stored.is_some() && stored == cached;
        }
        same
    })
    .await;
    stop.shutdown();
    running.await??;

    let mut lost = Vec::new();
    for name in &names {
        let data = maps.get(name).await?.data.unwrap_or_default();
        if data != expected {
            lost.push(format!("{name}: {data:?}"));
        }
    }
    ensure!(
        all_written && lost.is_empty(),
        "{strategy}: writes lost or never made from a compact cache: {lost:?}"
    );
    ensure!(
        cached_matches,
        "{strategy}: the compact cache's copy is not the stored one"
    );
    ensure!(
        store.len() == OBJECTS,
        "{strategy}: the cache holds {} objects",
        store.len()
    );
    let reconciles = reconciles.lock().unwrap();
    for name in &names {
        let n = reconciles.get(name).copied().unwrap_or(0);
        ensure!(
            n > ROUNDS,
            "{strategy}: {name} was reconciled {n} times: its requeues did not reach it"
        );
    }
    Ok(())
}

/// [`race`] under `strict`, `guarded` and `update` side by side.
async fn race_each_strategy(layout: CacheLayout) -> Result<()> {
    let env = TestEnv::shared()?;
    let (strict, guarded, update) = tokio::join!(
        race(env, "strict", layout),
        race(env, "guarded", layout),
        race(env, "update", layout),
    );
    strict.and(guarded).and(update)
}

#[tokio::test]
async fn a_compact_caches_controllers_write_everything_and_lose_nothing() -> Result<()> {
    race_each_strategy(CacheLayout::Compact).await
}

/// The same with typed objects (`CacheLayout::Decoded`, the opt-out).
#[tokio::test]
async fn a_decoded_caches_controllers_write_everything_and_lose_nothing() -> Result<()> {
    race_each_strategy(CacheLayout::Decoded).await
}

/// Counts its reconciles of each object and asks for another in 50 ms,
/// writing nothing: only its own requeues bring an object back.
struct Ticks(Arc<Mutex<HashMap<String, usize>>>);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Ticks {
    type Error = WriteError;

    async fn reconcile(
        &self,
        cm: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        let mut ticks = self.0.lock().unwrap();
        let n = ticks.entry(cm.name_any()).or_default();
        *n += 1;
        Ok(if *n < 5 {
            Action::requeue(Duration::from_millis(50))
        } else {
            Action::await_change()
        })
    }
}

#[tokio::test]
async fn a_compact_caches_controller_gets_the_requeues_it_asks_for() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    for i in 0..3 {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("tick-{i}")}}))?,
        )
        .await?;
    }
    let (mut manager, _config) = manager_in(&ns, "guarded", CacheLayout::Compact).await?;
    let ticks = Arc::new(Mutex::new(HashMap::new()));
    manager
        .controller("ticks", maps.clone(), Ticks(ticks.clone()))
        .add()?;
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    let all_ticked = eventually(Duration::from_secs(30), || async {
        let ticks = ticks.lock().unwrap();
        ticks.len() == 3 && ticks.values().all(|n| *n >= 5)
    })
    .await;
    stop.shutdown();
    running.await??;
    ensure!(
        all_ticked,
        "requeues were lost: {:?}",
        ticks.lock().unwrap()
    );
    Ok(())
}
