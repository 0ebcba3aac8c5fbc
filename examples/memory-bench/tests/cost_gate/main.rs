//! The cost gate: a Manager's counts for a small fixed workload on the
//! embedded control plane, checked against a committed baseline
//! (`examples/memory-bench/cost-baseline.yaml`). The test fails when any count exceeds
//! its baseline by more than 10%.
//!
//! It counts, never times, so a loaded machine does not move it:
//!
//! | count | how |
//! | --- | --- |
//! | heap bytes per cached object | a Manager's shared cache (compact, the default) of 500 seeded ConfigMaps: the live bytes freed when its last handle drops, per object |
//! | allocations per reconcile | a controller whose reconciler does nothing, each object triggered once more (`reconcile_on`), per reconcile |
//! | allocations per write, per strategy | 100 label writes through a Manager's `Context` under `strict`, `guarded`, `update`, `locked` and `apply` (each from a YAML strategy table), the writes' echoes into the cache included |
//! | requests per write, per strategy | the requests the API server itself counted (`apiserver_request_total`) over the same writes |
//!
//! Every allocation of the process is counted (a counting global
//! allocator), so each window opens and closes only once nothing has
//! allocated for a while (`measure::quiet`), and each count is the least of
//! three measurements. The workload runs on one thread, in the binary's one
//! test against the control plane; the rule's own test (`baseline.rs`) is
//! over in microseconds, long before the control plane is up.
//!
//! ```text
//! cargo test -p concord-memory-bench --test cost_gate -- --nocapture   # the table
//! CONCORD_BLESS=1 cargo test -p concord-memory-bench --test cost_gate  # rewrite the baseline
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod baseline;
mod measure;
mod workload;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use concord::{
    Action, Context, Manager, ManagerArgs, Reconciler, featuregates::Operation,
    featuregates::StrategyName,
};
use concord_testenv::{TestEnv, TestNamespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;

use baseline::Figure;
use measure::{Served, quiet};
use workload::{REPEATS, SELECTOR, WRITES};

/// The strategies that never lose a write, measured in this order (each
/// writes a label of its own, which the later ones' objects then carry).
const SAFE: [StrategyName; 5] = [
    StrategyName::Strict,
    StrategyName::Guarded,
    StrategyName::Update,
    StrategyName::Locked,
    StrategyName::Apply,
];

/// How long any wait of the workload may take.
const MINUTE: Duration = Duration::from_secs(60);

// One thread: every task of the manager runs between the test's own
// steps, so a quiet process is a finished workload.
#[tokio::test(flavor = "current_thread")]
async fn a_managers_counts_stay_within_their_baseline() -> anyhow::Result<()> {
    let started = Instant::now();
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let objects = workload::create(&ns).await?;
    let mut figures = vec![cache_bytes_per_object(env, &ns, objects).await?];
    figures.push(allocations_per_reconcile(env, &ns, objects).await?);
    let tables = tempfile::tempdir()?;
    for strategy in SAFE {
        figures.extend(write_costs(env, &ns, strategy, tables.path()).await?);
    }
    println!("measured in {:.1} s", started.elapsed().as_secs_f64());
    gate(&figures)
}

/// A manager on the test's control plane, its strategy table from `table`.
async fn manager(env: &TestEnv, table: Option<&std::path::Path>) -> anyhow::Result<Manager> {
    let args = match table {
        Some(path) => ManagerArgs::new().with_config(path),
        None => ManagerArgs::new(),
    };
    // Its objects are ConfigMaps, stated `k8s-openapi`'s as an author
    // would: `update` then puts a cached copy without reading it first.
    Ok(Manager::builder("cost-gate")
        .with_builtin_type::<ConfigMap>()
        .with_args(args)
        .with_kube_config(env.config().clone())
        .with_signal_handling(false)
        .build()
        .await?)
}

/// Keeps `manager` running (a manager runs while it has a controller)
/// with a controller of no object, so only the caches under test react
/// to the workload's changes.
fn idle(manager: &mut Manager, ns: &TestNamespace) -> anyhow::Result<()> {
    let maps: Api<ConfigMap> = Api::namespaced(manager.client().clone(), ns.name());
    manager
        .controller("idle", maps, Counting(Arc::default()))
        .with_labels("cost-gate=no-object")
        .add()?;
    Ok(())
}

/// Heap bytes a Manager's shared cache holds per object once synced: the
/// manager stopped, the live bytes freed when the test drops the last
/// handle on the cache (so connection buffers and the list's transient
/// copies are not counted).
async fn cache_bytes_per_object(
    env: &TestEnv,
    ns: &TestNamespace,
    objects: usize,
) -> anyhow::Result<Figure> {
    let mut least = f64::INFINITY;
    for _ in 0..REPEATS {
        let mut manager = manager(env, None).await?;
        let store = manager.cache(Api::<ConfigMap>::namespaced(
            manager.client().clone(),
            ns.name(),
        ));
        idle(&mut manager, ns)?;
        let running = concord::testing::start(manager);
        tokio::time::timeout(MINUTE, store.wait_until_ready()).await??;
        ensure!(store.len() == objects, "the cache holds {}", store.len());
        running.stop().await?;
        let held = quiet().await?;
        drop(store);
        let released = quiet().await?;
        let bytes = held.live.saturating_sub(released.live) as f64 / objects as f64;
        println!("cache: {bytes:.1} bytes per object");
        least = least.min(bytes);
    }
    Ok(Figure {
        key: "cache_bytes_per_object".into(),
        what: format!(
            "heap bytes a Manager's compact cache holds per ConfigMap ({objects} seeded objects)"
        ),
        value: least,
    })
}

// ANCHOR: reconciler
/// A reconciler that does nothing but count its reconciles.
struct Counting(Arc<AtomicUsize>);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Counting {
    type Error = std::convert::Infallible;

    async fn reconcile(
        &self,
        _map: Arc<ConfigMap>,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, Self::Error> {
        self.0.fetch_add(1, Relaxed);
        Ok(Action::await_change())
    }
}
// ANCHOR_END: reconciler

/// Allocations per reconcile of a no-op reconciler: once every object has
/// been reconciled, each is triggered again (as a mapped or requeued object
/// is: the queue takes it from the cache and decodes it), with no request
/// to the API server.
async fn allocations_per_reconcile(
    env: &TestEnv,
    ns: &TestNamespace,
    objects: usize,
) -> anyhow::Result<Figure> {
    let mut manager = manager(env, None).await?;
    let maps: Api<ConfigMap> = Api::namespaced(manager.client().clone(), ns.name());
    let names: Vec<String> = maps
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    ensure!(names.len() == objects, "{} ConfigMaps", names.len());
    let reconciles = Arc::new(AtomicUsize::new(0));
    let (trigger, triggers) = futures::channel::mpsc::unbounded();
    manager
        .controller("cost-gate", maps, Counting(reconciles.clone()))
        .reconcile_on(triggers)
        .add()?;
    let running = concord::testing::start(manager);
    reconciled(&reconciles, objects).await?;
    let mut least = f64::INFINITY;
    for round in 1..=REPEATS {
        let batch: Vec<ObjectRef<ConfigMap>> = names
            .iter()
            .map(|n| ObjectRef::new(n).within(ns.name()))
            .collect();
        let from = quiet().await?;
        for object in batch {
            trigger.unbounded_send(object)?;
        }
        reconciled(&reconciles, objects * (round + 1)).await?;
        let to = quiet().await?;
        let per = to.allocations_since(from) as f64 / objects as f64;
        println!("reconcile: {per:.2} allocations per reconcile");
        least = least.min(per);
    }
    running.stop().await?;
    Ok(Figure {
        key: "allocations_per_reconcile".into(),
        what: format!(
            "allocations per reconcile of a no-op reconciler, each of {objects} objects triggered once"
        ),
        value: least,
    })
}

/// Waits until `count` reconciles have run (allocating nothing).
async fn reconciled(reconciles: &AtomicUsize, count: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    while reconciles.load(Relaxed) < count {
        ensure!(
            started.elapsed() < MINUTE,
            "{} of {count} reconciles ran",
            reconciles.load(Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// Allocations and requests per label write through a Manager's `Context`
/// whose strategy table sends label writes through `strategy`: each round
/// changes the label's value on [`WRITES`] objects, from copies just
/// listed.
async fn write_costs(
    env: &TestEnv,
    ns: &TestNamespace,
    strategy: StrategyName,
    tables: &std::path::Path,
) -> anyhow::Result<[Figure; 2]> {
    let table = workload::strategy_table(tables, strategy)?;
    let mut manager = manager(env, Some(&table)).await?;
    let maps: Api<ConfigMap> = Api::namespaced(manager.client().clone(), ns.name());
    let store = manager.cache(maps.clone());
    let ctx = manager.context::<ConfigMap>();
    idle(&mut manager, ns)?;
    ensure!(ctx.strategy(Operation::Metadata) == strategy);
    let running = concord::testing::start(manager);
    tokio::time::timeout(MINUTE, store.wait_until_ready()).await??;
    let label = format!("cost-gate-{}", strategy.as_str());
    let listed = |n: usize| {
        let maps = maps.clone();
        async move {
            let params = ListParams::default().labels(SELECTOR).limit(n as u32);
            anyhow::Ok(maps.list(&params).await?.items)
        }
    };
    // A round unmeasured: connections open, and every measured round
    // changes the label rather than adding it.
    for copy in listed(WRITES).await? {
        ctx.set_label(&copy, &label, "warm-up").await?;
    }
    let admin = ns.client();
    let (mut allocations, mut requests) = (f64::INFINITY, 0.0_f64);
    for round in 0..REPEATS {
        let value = format!("round-{round}");
        let copies = listed(WRITES).await?;
        ensure!(copies.len() == WRITES, "{} copies", copies.len());
        let served = Served::read(&admin).await?;
        let from = quiet().await?;
        for copy in &copies {
            ctx.set_label(copy, &label, &value)
                .await
                .with_context(|| format!("{} writing {label}", strategy.as_str()))?;
        }
        let to = quiet().await?;
        let sent = Served::read(&admin).await?.since(&served);
        let per = to.allocations_since(from) as f64 / WRITES as f64;
        let per_request = sent.total() as f64 / WRITES as f64;
        println!(
            "{}: {per:.1} allocations per write, requests: {sent}",
            strategy.as_str()
        );
        allocations = allocations.min(per);
        requests = requests.max(per_request);
    }
    running.stop().await?;
    let s = strategy.as_str();
    Ok([
        Figure {
            key: format!("{s}_allocations_per_write"),
            what: format!(
                "allocations per label write through a Manager's Context under `{s}`, its echo into the cache included"
            ),
            value: allocations,
        },
        Figure {
            key: format!("{s}_requests_per_write"),
            what: format!("requests the API server served per label write under `{s}`"),
            value: requests,
        },
    ])
}

/// Judges `figures` against the committed baseline, or rewrites it with
/// `CONCORD_BLESS=1`.
fn gate(figures: &[Figure]) -> anyhow::Result<()> {
    let path = std::path::Path::new(baseline::FILE);
    if std::env::var_os("CONCORD_BLESS").is_some() {
        std::fs::write(path, baseline::render(figures))
            .with_context(|| format!("writing {}", path.display()))?;
        let (table, _) = baseline::judge(figures, &baseline::read(path)?);
        println!("rewrote {}:\n{table}", path.display());
        return Ok(());
    }
    let base = baseline::read(path)?;
    let (table, mut failed) = baseline::judge(figures, &base);
    failed.extend(
        base.keys()
            .filter(|k| figures.iter().all(|f| &f.key != *k))
            .map(|k| format!("{k} (in the baseline, not measured)")),
    );
    ensure!(
        failed.is_empty(),
        "the cost gate failed on {}\n{table}\n\
         A count fails when it exceeds its baseline by more than {:.0}%. If the \
         change is intended, rewrite the baseline with\n  {}\n\
         and commit examples/memory-bench/cost-baseline.yaml with the change, saying why the counts moved.",
        failed.join(", "),
        baseline::TOLERANCE * 100.0,
        baseline::BLESS,
    );
    println!("{table}");
    Ok(())
}
