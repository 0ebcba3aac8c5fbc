//! Read your own writes, on the real control plane behind a fault proxy
//! that holds every ConfigMap watch event back: a ReplicaSet-like
//! controller that counts its children in the manager's cache creates and
//! deletes exactly what the spec asks with the gate on, and more without.
//!
//! ```text
//! cargo test -p concord-tests --test controller fresh:: -- --nocapture
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::{Action, Context, Manager, Reconciler, WriteError};
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

const PARENTS: usize = 8;
const HOLD: Duration = Duration::from_millis(700);
const MINUTE: Duration = Duration::from_secs(60);

/// Why a reconcile failed.
#[derive(Debug)]
enum Failed {
    Write(WriteError),
    Cache(concord::cache::CacheError),
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failed::Write(e) => e.fmt(f),
            Failed::Cache(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Failed {}

impl From<WriteError> for Failed {
    fn from(e: WriteError) -> Self {
        Failed::Write(e)
    }
}

impl From<concord::cache::CacheError> for Failed {
    fn from(e: concord::cache::CacheError) -> Self {
        Failed::Cache(e)
    }
}

/// Keeps `data.replicas` children per parent, counting them in the cache.
#[derive(Clone, Default)]
struct Replicas {
    created: Arc<AtomicUsize>,
    deleted: Arc<AtomicUsize>,
}

#[concord::async_trait]
impl Reconciler<ConfigMap> for Replicas {
    type Error = Failed;

    async fn reconcile(
        &self,
        parent: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, Failed> {
        let want: usize = parent
            .data
            .as_ref()
            .and_then(|d| d.get("replicas"))
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let name = parent.name_any();
        // ANCHOR: count
        let children = ctx.cache::<ConfigMap>()?.list(
            parent.namespace().as_deref(),
            Some(&format!("parent={name}")),
        )?;
        // ANCHOR_END: count
        for _ in children.len()..want {
            let child = ConfigMap {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{name}-")),
                    labels: Some(BTreeMap::from([("parent".to_owned(), name.clone())])),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            ctx.create_owned(&parent, child).await?;
            self.created.fetch_add(1, Relaxed);
        }
        for child in children.iter().skip(want) {
            match ctx.delete(child.as_ref()).await {
                Ok(written) if written.outcome.gone => {}
                Ok(_) => {
                    self.deleted.fetch_add(1, Relaxed);
                }
                Err(WriteError::Conflict { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Action::await_change())
    }
}

/// What one run did: children created and deleted by the reconciler, the
/// children left per parent, and the records the ledger still held.
struct Run {
    created: usize,
    deleted: usize,
    left: Vec<usize>,
    records: String,
}

async fn run(read_your_writes: bool) -> Result<Run> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let faults = Faults::seeded(0)
        .on(Verb::Watch)
        .resource("configmaps")
        .hold_events(HOLD);
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let mut manager = Manager::builder("fresh-test")
        .with_kube_config(proxy.config())
        .with_signal_handling(false)
        .build()
        .await?;
    let client = manager.client().clone();
    let maps: Api<ConfigMap> = Api::namespaced(client, ns.name());
    let replicas = Replicas::default();
    // ANCHOR: controller
    manager.cache(maps.clone());
    manager
        .controller("replicas", maps.clone(), replicas.clone())
        .with_labels("role=parent")
        .owns(maps.clone())
        .with_read_your_writes(read_your_writes)
        .add()?;
    // ANCHOR_END: controller
    let metrics = manager.metrics();
    let running = concord::testing::start(manager);
    let direct: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let parent = |i: usize, n: usize| ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("p{i}")),
            labels: Some(BTreeMap::from([("role".to_owned(), "parent".to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("replicas".to_owned(), n.to_string())])),
        ..ConfigMap::default()
    };
    for i in 0..PARENTS {
        direct.create(&PostParams::default(), &parent(i, 3)).await?;
    }
    let settled = |want: usize| {
        let direct = direct.clone();
        async move {
            let started = Instant::now();
            loop {
                let children = direct
                    .list(&ListParams::default().labels("parent"))
                    .await?
                    .items;
                if children.len() == want * PARENTS {
                    // Quiet for twice the hold: nothing more on its way.
                    tokio::time::sleep(HOLD * 3).await;
                    let again = direct.list(&ListParams::default().labels("parent")).await?;
                    if again.items.len() == want * PARENTS {
                        return anyhow::Ok(());
                    }
                }
                anyhow::ensure!(
                    started.elapsed() < MINUTE,
                    "never settled at {want} children per parent ({})",
                    children.len()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    settled(3).await?;
    for i in 0..PARENTS {
        let scale = Patch::Merge(json!({"data": {"replicas": "5"}}));
        direct
            .patch(&format!("p{i}"), &PatchParams::default(), &scale)
            .await?;
    }
    settled(5).await?;
    for i in 0..PARENTS {
        let scale = Patch::Merge(json!({"data": {"replicas": "1"}}));
        direct
            .patch(&format!("p{i}"), &PatchParams::default(), &scale)
            .await?;
    }
    settled(1).await?;
    let children = direct
        .list(&ListParams::default().labels("parent"))
        .await?
        .items;
    let left = (0..PARENTS)
        .map(|i| {
            children
                .iter()
                .filter(|c| c.labels().get("parent") == Some(&format!("p{i}")))
                .count()
        })
        .collect();
    let records = metrics
        .render()
        .lines()
        .filter(|l| {
            l.starts_with("concord_own_write_records")
                || l.starts_with("concord_reconcile_stale_cache")
        })
        .collect::<Vec<_>>()
        .join("\n");
    running.stop().await?;
    Ok(Run {
        created: replicas.created.load(Relaxed),
        deleted: replicas.deleted.load(Relaxed),
        left,
        records,
    })
}

/// With the gate, the controller creates 5 children per parent and deletes
/// 4 (3, then 2 more, then 4 of 5): no excess; the ledger empties. Without
/// it, the same controller behind the same held watch creates and deletes
/// more (so the test can fail).
#[tokio::test]
async fn a_controller_counting_children_in_its_cache_creates_exactly_what_it_needs() -> Result<()> {
    let gated = run(true).await?;
    println!(
        "with read-your-own-writes: {} created, {} deleted (needed {} and {})\n{}",
        gated.created,
        gated.deleted,
        5 * PARENTS,
        4 * PARENTS,
        gated.records
    );
    let ungated = run(false).await?;
    println!(
        "without: {} created, {} deleted (needed {} and {})",
        ungated.created,
        ungated.deleted,
        5 * PARENTS,
        4 * PARENTS
    );
    assert!(gated.left.iter().all(|n| *n == 1), "{:?}", gated.left);
    assert_eq!(gated.created, 5 * PARENTS, "no excess child was created");
    assert_eq!(gated.deleted, 4 * PARENTS, "no child was deleted wrongly");
    assert!(
        gated.records.contains("concord_own_write_records 0"),
        "every record was dropped once the watch delivered it:\n{}",
        gated.records
    );
    assert!(
        ungated.created > 5 * PARENTS || ungated.deleted > 4 * PARENTS,
        "without the gate the held watch made the controller decide on a stale cache \
         ({} created, {} deleted): the test can tell the difference",
        ungated.created,
        ungated.deleted
    );
    Ok(())
}

/// Labels each ConfigMap it reconciles `seen=yes` and counts its
/// reconciles.
#[derive(Clone, Default)]
pub(crate) struct Labelling(pub(crate) Arc<AtomicUsize>);

#[concord::async_trait]
impl Reconciler<ConfigMap> for Labelling {
    type Error = WriteError;

    async fn reconcile(
        &self,
        map: Arc<ConfigMap>,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, WriteError> {
        self.0.fetch_add(1, Relaxed);
        ctx.set_label(&map, "seen", "yes").await?;
        Ok(Action::await_change())
    }
}

/// `skip_own_writes`: the events of the controller's own label writes do
/// not reconcile their objects again (12 objects: fewer reconciles than
/// the 2 each costs without it; an event that overtakes the write's answer
/// is not recognised and costs its reconcile, which is why this counts
/// savings rather than demanding all of them), and another writer's change
/// to each object still reconciles it.
#[tokio::test]
async fn skipping_own_writes_saves_the_second_reconcile_and_only_that() -> Result<()> {
    const OBJECTS: usize = 12;
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let mut counts = Vec::new();
    for skip in [false, true] {
        let mut manager = concord::testing::manager("skip-test", env.client()?).await?;
        let labelling = Labelling::default();
        let controller = manager
            .controller("labelling", maps.clone(), labelling.clone())
            .with_labels(&format!("skip={skip}"));
        // ANCHOR: skip
        let controller = if skip {
            controller.skip_own_writes()
        } else {
            controller
        };
        // ANCHOR_END: skip
        controller.add()?;
        let running = concord::testing::start(manager);
        let names: Vec<String> = (0..OBJECTS).map(|i| format!("skip-{skip}-{i}")).collect();
        for name in &names {
            let map = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(BTreeMap::from([("skip".to_owned(), skip.to_string())])),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            maps.create(&PostParams::default(), &map).await?;
        }
        for name in &names {
            concord::testing::wait_for(&maps, name, MINUTE, "get labelled", |m| {
                m.labels().contains_key("seen")
            })
            .await?;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after_own = labelling.0.load(Relaxed);
        for name in &names {
            let theirs = Patch::Merge(json!({"data": {"theirs": "x"}}));
            maps.patch(name, &PatchParams::default(), &theirs).await?;
        }
        let started = Instant::now();
        while labelling.0.load(Relaxed) < after_own + OBJECTS && started.elapsed() < MINUTE {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        running.stop().await?;
        counts.push((after_own, labelling.0.load(Relaxed) - after_own));
    }
    println!(
        "{OBJECTS} objects, reconciles once their own label writes settled, then for another writer's change: without skip {:?}, with skip {:?}",
        counts[0], counts[1]
    );
    assert!(
        counts[0].0 >= 2 * OBJECTS,
        "without skipping, each own label write reconciles again: {:?}",
        counts[0]
    );
    assert!(
        counts[1].0 < counts[0].0,
        "skipping saved reconciles: {:?} against {:?}",
        counts[1],
        counts[0]
    );
    assert!(
        counts[1].1 >= OBJECTS,
        "another writer's change is never skipped: {:?}",
        counts[1]
    );
    Ok(())
}
