//! Re-reads after a conflict, against a real kube-apiserver and etcd: the
//! manager's shared watch cache serves them when it has caught up (the
//! request counts show no `GET`), a write falls back to a `GET` when the
//! cache lags or does not hold the object, nothing is lost either way, and
//! controllers of one type share one watch.
//!
//! ```text
//! cargo test -p concord-tests --test strategies incidents::reread::
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use concord::{Action, Context, Intent, Manager, ManagerArgs, Reconciler, WriteError};
use concord_strategies::{
    ConflictPolicy, FreshCopies, Observed, StrategyName, Target, Verb, Writer, is_newer,
    strategy_for,
};
use concord_testenv::TestEnv;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, PodTemplate};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn table(test: &str, strategy: StrategyName) -> tempfile::TempPath {
    let yaml = format!("strategies:\n  default: {}\n", strategy.as_str());
    concord_tests::yaml_file(&format!("concord-reread-{test}-"), &yaml).unwrap()
}

async fn manager(client: Client, test: &str, wait: Option<Duration>) -> Manager {
    manager_with(client, test, wait, StrategyName::Strict).await
}

async fn manager_with(
    client: Client,
    test: &str,
    wait: Option<Duration>,
    strategy: StrategyName,
) -> Manager {
    // Read when the manager is built, removed after.
    let config = table(test, strategy);
    let builder = Manager::builder("reread-test")
        .with_builtin_type::<ConfigMap>()
        .with_client(client)
        .with_args(ManagerArgs::new().with_config(config.to_path_buf()))
        .with_signal_handling(false);
    let builder = match wait {
        Some(wait) => builder.with_fresh_wait(wait),
        None => builder,
    };
    builder.build().await.unwrap()
}

/// A controller that does nothing: it makes the manager watch the type.
struct Idle;

#[concord::async_trait]
impl<K: kube::Resource + Send + Sync + 'static> Reconciler<K> for Idle {
    type Error = WriteError;
    async fn reconcile(&self, _: Arc<K>, _: &Context<K>) -> Result<Action, WriteError> {
        Ok(Action::await_change())
    }
}

/// Polls `check` every 20 ms for up to 30 s.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Another writer's change, moving the object past the copy we hold.
async fn competing_label(maps: &Api<ConfigMap>, name: &str) -> Result<String> {
    let patch = json!({"metadata": {"labels": {"other": "yes"}}});
    let stored = maps
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    stored.resource_version().context("resourceVersion")
}

fn labels(object: &ConfigMap) -> (Option<&str>, Option<&str>) {
    let labels = object.metadata.labels.as_ref();
    let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    (get("other"), get("mine"))
}

/// A stale write through a manager's context conflicts, and its re-read
/// comes from the shared cache (no `GET`) when `from_cache`, else from a
/// `GET`; both changes stored either way.
// ANCHOR: from_cache
async fn reread_after_conflict(strategy: StrategyName, from_cache: bool) -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let test = format!("from-cache-{}", strategy.as_str());
    let mut manager = manager_with(env.client()?, &test, None, strategy).await;
    manager.controller("configmaps", maps.clone(), Idle).add()?;
    let ctx = manager.context::<ConfigMap>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let created = maps
        .create(&PostParams::default(), &config_map("cm"))
        .await?;
    let stale = created.clone();
    let newer = competing_label(&maps, "cm").await?;
    // Let the watch deliver the competitor's version, so what follows does
    // not depend on timing: the write still starts from the stale copy.
    assert!(
        eventually(|| ctx
            .cached(Some(ns.name()), "cm")
            .and_then(|c| c.resource_version())
            .as_deref()
            == Some(newer.as_str()))
        .await
    );
    let written = ctx.set_label(&stale, "mine", "yes").await?;

    let outcome = &written.outcome;
    let gets = u32::from(!from_cache);
    assert_eq!(outcome.conflicts, 1, "{outcome:?}");
    assert_eq!(outcome.rereads_from_cache, 1 - gets, "{outcome:?}");
    assert_eq!(outcome.rereads_by_get, gets, "{outcome:?}");
    assert_eq!(outcome.requests(Verb::Get), gets, "{outcome:?}");
    assert_eq!(
        outcome.total_requests(),
        2 + gets,
        "two writes: {outcome:?}"
    );
    let stored = maps.get("cm").await?;
    assert_eq!(labels(&stored), (Some("yes"), Some("yes")), "{stored:?}");
    stop.shutdown();
    running.await??;
    Ok(())
}
// ANCHOR_END: from_cache

#[tokio::test]
async fn strict_rereads_after_conflict_from_the_shared_cache() -> Result<()> {
    reread_after_conflict(StrategyName::Strict, true).await
}

/// Not `update` from a typed cache: the cached copy went through the Rust
/// type, which may lack fields the server stores (a built-in type older
/// than the server), so it never becomes the next `PUT`; a `GET` does.
#[tokio::test]
async fn update_rereads_from_a_typed_cache_by_get() -> Result<()> {
    reread_after_conflict(StrategyName::Update, false).await
}

/// Right after the competing write the cache may not have its version yet:
/// the re-read waits for the watch (woken by it, up to the configured
/// wait) rather than sending a `GET`.
#[tokio::test]
async fn reread_waits_for_the_watch_to_catch_up() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut manager = manager(env.client()?, "waits", Some(Duration::from_secs(20))).await;
    manager.controller("configmaps", maps.clone(), Idle).add()?;
    let ctx = manager.context::<ConfigMap>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let created = maps
        .create(&PostParams::default(), &config_map("cm"))
        .await?;
    assert!(eventually(|| ctx.cached(Some(ns.name()), "cm").is_some()).await);
    competing_label(&maps, "cm").await?;
    let written = ctx.set_label(&created, "mine", "yes").await?;

    let outcome = &written.outcome;
    assert_eq!(
        (outcome.rereads_from_cache, outcome.requests(Verb::Get)),
        (1, 0),
        "{outcome:?}"
    );
    let stored = maps.get("cm").await?;
    assert_eq!(labels(&stored), (Some("yes"), Some("yes")), "{stored:?}");
    stop.shutdown();
    running.await??;
    Ok(())
}

/// An object the shared cache does not hold (the controller watches
/// another namespace) is re-read with a `GET`, and nothing is lost.
#[tokio::test]
async fn an_object_outside_the_cache_is_reread_with_get() -> Result<()> {
    let env = TestEnv::shared()?;
    let (watched, other) = (env.namespace().await?, env.namespace().await?);
    let mut manager = manager(env.client()?, "outside", None).await;
    let watched_maps: Api<ConfigMap> = Api::namespaced(watched.client(), watched.name());
    manager.controller("configmaps", watched_maps, Idle).add()?;
    let ctx = manager.context::<ConfigMap>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());

    let maps: Api<ConfigMap> = Api::namespaced(other.client(), other.name());
    let stale = maps
        .create(&PostParams::default(), &config_map("cm"))
        .await?;
    competing_label(&maps, "cm").await?;
    let written = ctx.set_label(&stale, "mine", "yes").await?;
    let outcome = &written.outcome;
    assert_eq!(
        (outcome.rereads_from_cache, outcome.rereads_by_get),
        (0, 1),
        "{outcome:?}"
    );
    assert_eq!(outcome.requests(Verb::Get), 1, "{outcome:?}");
    let stored = maps.get("cm").await?;
    assert_eq!(labels(&stored), (Some("yes"), Some("yes")), "{stored:?}");
    stop.shutdown();
    running.await??;
    Ok(())
}

/// A watch cache that stopped: filled once, never updated again.
#[derive(Debug)]
struct Paused(Store<ConfigMap>);

impl FreshCopies for Paused {
    fn newer<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        than: &'a str,
        wait: Duration,
    ) -> BoxFuture<'a, Option<Observed>> {
        Box::pin(async move {
            let key = ObjectRef::new(name).within(namespace?);
            let deadline = Instant::now() + wait;
            // Polls, as a stopped watch would never wake a waiter anyway.
            while Instant::now() < deadline {
                let copy = self.0.get(&key)?;
                if is_newer(copy.resource_version()?.as_str(), than) == Some(true) {
                    return Some(Observed::typed(serde_json::to_value(&*copy).ok()?));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            None
        })
    }
}

/// When the cache never catches up, the re-read falls back to a `GET` after
/// the bounded wait and the write lands on the current object.
#[tokio::test]
async fn a_lagging_cache_falls_back_to_get_and_loses_nothing() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let created = maps
        .create(&PostParams::default(), &config_map("cm"))
        .await?;
    let (store, mut fill) = reflector::store::<ConfigMap>();
    fill.apply_watcher_event(&watcher::Event::Apply(created.clone()));
    competing_label(&maps, "cm").await?;

    let target = Target::new(env.client()?, ApiResource::erase::<ConfigMap>(&()))
        .with_fresh_copies(Arc::new(Paused(store)))
        .with_fresh_wait(Duration::from_millis(100));
    let writer = Writer::<ConfigMap>::from_target(
        target,
        strategy_for(StrategyName::Strict, ConflictPolicy::default()),
    );
    let written = writer
        .write(&created, &Intent::set_label("mine", "yes").into())
        .await?;
    let outcome = &written.outcome;
    assert_eq!(
        (
            outcome.conflicts,
            outcome.rereads_from_cache,
            outcome.rereads_by_get
        ),
        (1, 0, 1),
        "{outcome:?}"
    );
    assert_eq!(outcome.requests(Verb::Get), 1, "{outcome:?}");
    let stored = maps.get("cm").await?;
    assert_eq!(labels(&stored), (Some("yes"), Some("yes")), "{stored:?}");
    Ok(())
}

/// Namespaced watches of PodTemplates the API server is serving now, from
/// its metrics. No other test here watches PodTemplates (the garbage
/// collector's watch of every resource is cluster-wide).
async fn podtemplate_watches(client: &Client) -> Result<u64> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
        .filter(|l| l.contains("resource=\"podtemplates\"") && l.contains("verb=\"WATCH\""))
        .filter(|l| l.contains("scope=\"namespace\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// Three controllers of one type, scope and selector open one watch and
/// see the same cache.
#[tokio::test]
async fn controllers_of_one_type_share_one_watch() -> Result<()> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let client = env.client()?;
    let templates: Api<PodTemplate> = Api::namespaced(ns.client(), ns.name());
    let template: PodTemplate =
        serde_json::from_value(json!({"metadata": {"name": "t"}, "template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}],
        }}}))?;
    templates.create(&PostParams::default(), &template).await?;

    let mut manager = manager(client.clone(), "share", None).await;
    for name in ["one", "two", "three"] {
        manager.controller(name, templates.clone(), Idle).add()?;
    }
    let ctx = manager.context::<PodTemplate>();
    let stop = manager.shutdown_handle();
    let running = tokio::spawn(manager.run());
    assert!(eventually(|| ctx.cached(Some(ns.name()), "t").is_some()).await);
    // The cache's question whether lists stream is a short watch of its
    // own: wait until only the lasting ones are left, then count them.
    let mut watches = podtemplate_watches(&client).await?;
    for _ in 0..150 {
        if watches <= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        watches = podtemplate_watches(&client).await?;
    }
    assert_eq!(watches, 1, "one watch for the three controllers");
    stop.shutdown();
    running.await??;
    Ok(())
}
