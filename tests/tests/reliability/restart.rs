//! kube-apiserver and etcd restarted (same data directory, same ports) in
//! the middle of a 1,000-pod run of both incidents, for every safe strategy
//! at once.
//!
//! | scenario | per strategy | writers | strategies |
//! | --- | --- | --- | --- |
//! | `kueue` | 1,000 pods: our finalizer removed while another controller adds its own | 8 + 4 foreign | `strict`, `update`, `apply` |
//! | `argo` | 1,000 pods: two code paths each remove Argo's finalizer and label the pod completed, from the same cached read | 8 (4 per path) | `strict`, `update`, `locked`, `apply` |
//!
//! Each logical write runs in a controller's bounded requeue loop: a call
//! either returns `Ok` or a typed [`Error`] the loop counts and requeues on.
//! Afterwards every pod is checked on the server (no lost write, no
//! finalizer removed twice or wrongly) and through a watch started before
//! the restart (the watch resumed and converged).
//!
//! The race benchmark library (`concord_examples::race`) was still being
//! written when this test was, and it treats a failed setup or foreign write
//! as a fatal error; the writes are driven here directly with [`Writer`]s.
//!
//! Run with `cargo test -p concord-tests --test reliability restart:: -- --nocapture`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use concord_strategies::{
    ConflictPolicy, Error, Intent, Mutation, StrategyName, Writer, strategy_for,
};
use concord_testenv::{ControlPlane, ControlPlaneOptions};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ObjectMeta;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Config};
use serde_json::json;

const PODS: usize = 1_000;
const WRITERS: usize = 8;
const FOREIGN_WRITERS: usize = 4;
const OURS: &str = "kueue.x-k8s.io/managed";
const FOREIGN: &str = "example.com/foreign";
const ARGO: &str = "workflows.argoproj.io/status";
const COMPLETED: &str = "workflows.argoproj.io/completed";
const RUN_LABEL: &str = "concord.dev/restart-run";
/// Restart once this fraction of the writes has landed.
const RESTART_AT: f64 = 0.25;
/// Requeues a controller allows one write before giving up.
const MAX_REQUEUES: u32 = 200;
/// The whole test's budget.
const BUDGET: Duration = Duration::from_secs(420);

/// Tests in this module each start (and restart) a control plane of their
/// own; two at once would starve a small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Kueue,
    Argo,
}

/// Calls and their results, by strategy.
#[derive(Debug, Default)]
struct Counts {
    ok: AtomicU64,
    errors: Mutex<BTreeMap<&'static str, u64>>,
    permanent: Mutex<Vec<String>>,
    given_up: AtomicU64,
}

impl Counts {
    fn error(&self, err: &Error) {
        let kind = match err {
            Error::Conflict { .. } => "Conflict",
            Error::ConflictRetriesExhausted { .. } => "ConflictRetriesExhausted",
            Error::TransientRetriesExhausted { .. } => "TransientRetriesExhausted",
            Error::Request { .. } => "Request",
            Error::Rejected { .. } => "Rejected",
            Error::NotFound { .. } => "NotFound",
            Error::ObjectRecreated { .. } => "ObjectRecreated",
            _ => "other",
        };
        *self
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(kind)
            .or_default() += 1;
        if !err.is_retryable() {
            self.permanent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(err.to_string());
        }
    }

    fn errors(&self) -> BTreeMap<&'static str, u64> {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

async fn client_for(kubeconfig: &std::path::Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

async fn namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let meta = ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    };
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta,
                ..Default::default()
            },
        )
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    for _ in 0..600 {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no default ServiceAccount in {name}")
}

fn pod(name: &str, run: &str, finalizers: &[&str]) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": finalizers, "labels": {RUN_LABEL: run, COMPLETED: "false"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))?)
}

/// Creates the pods of one strategy, 16 at a time; returns them as created
/// (the stale "cache" every writer starts from).
async fn create_pods(pods: &Api<Pod>, run: &str, finalizers: &[&str]) -> anyhow::Result<Vec<Pod>> {
    let finalizers: Vec<String> = finalizers.iter().map(|f| (*f).to_owned()).collect();
    let tasks: Vec<_> = (0..16)
        .map(|lane| {
            let (pods, run, finalizers) = (pods.clone(), run.to_owned(), finalizers.clone());
            tokio::spawn(async move {
                let refs: Vec<&str> = finalizers.iter().map(String::as_str).collect();
                let mut created = Vec::new();
                for i in (lane..PODS).step_by(16) {
                    created.push((
                        i,
                        pods.create(
                            &PostParams::default(),
                            &pod(&format!("p{i:04}"), &run, &refs)?,
                        )
                        .await?,
                    ));
                }
                anyhow::Ok(created)
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, p)| p).collect())
}

/// One controller write in a bounded requeue loop: back off, re-read,
/// try again; every call's result is counted.
async fn write_until_done(
    writer: &Writer<Pod>,
    pods: &Api<Pod>,
    mut seen: Pod,
    mutation: &Mutation,
    counts: &Counts,
    landed: &AtomicU64,
) {
    let name = seen.metadata.name.clone().unwrap_or_default();
    for requeue in 0..MAX_REQUEUES {
        match writer.write(&seen, mutation).await {
            Ok(_) => {
                counts.ok.fetch_add(1, Ordering::Relaxed);
                landed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(err) => counts.error(&err),
        }
        tokio::time::sleep(Duration::from_millis((20u64 << requeue.min(6)).min(1_000))).await;
        // The cache catches up eventually; a failed read keeps the old copy.
        match pods.get_opt(&name).await {
            Ok(Some(fresh)) => seen = fresh,
            Ok(None) => return,
            Err(_) => {}
        }
    }
    counts.given_up.fetch_add(1, Ordering::Relaxed);
}

struct Lane {
    strategy: StrategyName,
    ns: String,
    counts: Arc<Counts>,
}

async fn restart_mid_run(scenario: Scenario, strategies: &[StrategyName]) -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let tag = match scenario {
        Scenario::Kueue => "kueue",
        Scenario::Argo => "argo",
    };
    let dir = std::env::temp_dir().join(format!("concord-restart-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = ControlPlaneOptions::default().with_data_dir(&dir);
    let control_plane = tokio::task::spawn_blocking(move || ControlPlane::start(options)).await??;
    let kubeconfig = control_plane.kubeconfig_path().to_path_buf();
    let control_plane = Arc::new(Mutex::new(control_plane));
    let client = client_for(&kubeconfig).await?;
    let foreign_client = client_for(&kubeconfig).await?;
    let started = Instant::now();

    // Setup: a namespace and 1,000 pods per strategy.
    let mut lanes = Vec::new();
    let mut cached = Vec::new();
    for &strategy in strategies {
        let ns = format!("restart-{tag}-{}", strategy.as_str());
        namespace(&client, &ns).await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let finalizers: &[&str] = match scenario {
            Scenario::Kueue => &[OURS],
            Scenario::Argo => &[ARGO, FOREIGN],
        };
        cached.push(create_pods(&pods, tag, finalizers).await?);
        lanes.push(Lane {
            strategy,
            ns,
            counts: Arc::new(Counts::default()),
        });
    }
    println!(
        "{tag}: created {} pods in {:.1?}",
        PODS * strategies.len(),
        started.elapsed()
    );

    // A watch across every namespace, started before the restart.
    let (store, store_writer) = reflector::store::<Pod>();
    let watched = Api::<Pod>::all(client.clone());
    let watch_config = watcher::Config::default().labels(&format!("{RUN_LABEL}={tag}"));
    let watch = tokio::spawn(
        reflector(
            store_writer,
            watcher(watched, watch_config).default_backoff(),
        )
        .for_each(|_| std::future::ready(())),
    );

    // Writes, with the restart once a quarter has landed.
    let calls_per_pod = match scenario {
        Scenario::Kueue => 1,
        Scenario::Argo => 2,
    };
    let total = (PODS * calls_per_pod * strategies.len()) as u64;
    let landed = Arc::new(AtomicU64::new(0));
    let restarter = {
        let (landed, control_plane) = (landed.clone(), control_plane.clone());
        tokio::spawn(async move {
            while (landed.load(Ordering::Relaxed) as f64) < total as f64 * RESTART_AT {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let at = landed.load(Ordering::Relaxed);
            let begun = Instant::now();
            tokio::task::spawn_blocking(move || {
                control_plane
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .restart()
            })
            .await??;
            anyhow::Ok((at, begun.elapsed()))
        })
    };
    let writes_started = Instant::now();
    let mut tasks = Vec::new();
    for (lane, pods) in lanes.iter().zip(cached) {
        let api: Api<Pod> = Api::namespaced(client.clone(), &lane.ns);
        let writer = Writer::<Pod>::new(
            client.clone(),
            strategy_for(lane.strategy, ConflictPolicy::default()),
        );
        let pods = Arc::new(pods);
        let (ours, paths): (Mutation, usize) = match scenario {
            Scenario::Kueue => (Intent::remove_finalizer(OURS).into(), 1),
            Scenario::Argo => (
                Mutation::new()
                    .with(Intent::remove_finalizer(ARGO))
                    .with(Intent::set_label(COMPLETED, "true")),
                2,
            ),
        };
        // Argo: writers 0..4 are the deletion path, 4..8 the completion
        // path; each path covers every pod. Kueue: 8 writers share the pods.
        for w in 0..WRITERS {
            let per_path = WRITERS / paths;
            let (start, step) = (w % per_path, per_path);
            let (writer, api, pods, ours, counts, landed) = (
                writer.clone(),
                api.clone(),
                pods.clone(),
                ours.clone(),
                lane.counts.clone(),
                landed.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for i in (start..PODS).step_by(step) {
                    write_until_done(&writer, &api, pods[i].clone(), &ours, &counts, &landed).await;
                }
            }));
        }
        if scenario == Scenario::Kueue {
            // The other controller, with a client of its own, walks the pods
            // from the other end.
            let foreign = Writer::<Pod>::new(
                foreign_client.clone(),
                strategy_for(StrategyName::Strict, ConflictPolicy::default()),
            );
            let api: Api<Pod> = Api::namespaced(foreign_client.clone(), &lane.ns);
            for w in 0..FOREIGN_WRITERS {
                let (foreign, api, pods) = (foreign.clone(), api.clone(), pods.clone());
                let counts = Arc::new(Counts::default());
                let sink = Arc::new(AtomicU64::new(0));
                tasks.push(tokio::spawn(async move {
                    let add: Mutation = Intent::add_finalizer(FOREIGN).into();
                    for i in (w..PODS).step_by(FOREIGN_WRITERS).rev() {
                        write_until_done(&foreign, &api, pods[i].clone(), &add, &counts, &sink)
                            .await;
                    }
                    assert_eq!(
                        counts.given_up.load(Ordering::Relaxed),
                        0,
                        "the foreign controller gave up a write"
                    );
                }));
            }
        }
    }
    let work = async {
        for task in tasks {
            task.await?;
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(BUDGET, work)
        .await
        .context("writes did not finish in time")??;
    let write_time = writes_started.elapsed();
    let (restart_at, restart_took) = restarter.await??;

    // Check every pod on the server, then through the resumed watch.
    let broken = |p: &Pod| -> bool {
        let finalizers = p.metadata.finalizers.clone().unwrap_or_default();
        let completed = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(COMPLETED))
            .map(String::as_str);
        match scenario {
            Scenario::Kueue => finalizers != [FOREIGN],
            Scenario::Argo => finalizers != [FOREIGN] || completed != Some("true"),
        }
    };
    let mut lost_total = 0;
    for lane in &lanes {
        let listed = Api::<Pod>::namespaced(client.clone(), &lane.ns)
            .list(&ListParams::default())
            .await?;
        ensure!(
            listed.items.len() == PODS,
            "{}: {} pods",
            lane.strategy,
            listed.items.len()
        );
        let lost = listed.items.iter().filter(|p| broken(p)).count();
        lost_total += lost;
        let errors = lane.counts.errors();
        let failed: u64 = errors.values().sum();
        println!(
            "{tag} {:<7} {} pods, {} calls: {} ok, {failed} typed errors {errors:?}, {} given up, {lost} lost writes",
            lane.strategy.as_str(),
            PODS,
            lane.counts.ok.load(Ordering::Relaxed) + failed,
            lane.counts.ok.load(Ordering::Relaxed),
            lane.counts.given_up.load(Ordering::Relaxed),
        );
    }
    println!(
        "{tag}: restart after {restart_at}/{total} writes took {restart_took:.1?}; writes {write_time:.1?}; total {:.1?}",
        started.elapsed()
    );
    for lane in &lanes {
        let permanent = lane
            .counts
            .permanent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        ensure!(
            permanent.is_empty(),
            "{}: permanent errors from a restart: {permanent:?}",
            lane.strategy
        );
        assert_eq!(
            lane.counts.given_up.load(Ordering::Relaxed),
            0,
            "{}: writes never landed",
            lane.strategy
        );
        assert_eq!(
            lane.counts.ok.load(Ordering::Relaxed),
            (PODS * calls_per_pod) as u64,
            "{}: every logical write ends in exactly one Ok",
            lane.strategy
        );
    }
    assert_eq!(
        lost_total, 0,
        "safe strategies lost writes across the restart"
    );
    ensure!(restart_at < total, "the restart happened after the writes");

    let converged = async {
        loop {
            let state = store.state();
            if state.len() == PODS * strategies.len() && !state.iter().any(|p| broken(p)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), converged)
        .await
        .context("the watch did not resume and converge after the restart")?;
    watch.abort();
    tokio::task::spawn_blocking(move || drop(control_plane)).await?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_run_across_an_api_server_restart_loses_no_write() -> anyhow::Result<()> {
    restart_mid_run(
        Scenario::Kueue,
        &[
            StrategyName::Strict,
            StrategyName::Update,
            StrategyName::Apply,
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_run_across_an_api_server_restart_loses_no_write() -> anyhow::Result<()> {
    restart_mid_run(
        Scenario::Argo,
        &[
            StrategyName::Strict,
            StrategyName::Update,
            StrategyName::Locked,
            StrategyName::Apply,
        ],
    )
    .await
}
