//! Sharding in the chaos suite: three `--shards=hash` replicas of the Kueue
//! example, each behind a fault proxy of its own with a seeded schedule of
//! every fault class (its crash faults kill the replica mid-flight, its
//! runtime dropped as SIGKILL drops a process, and restart it under a new
//! identity); one replica is killed outright once the pods are held, and
//! another is partitioned from the API server a few requests in (every
//! request it sends from then on is held by its proxy for longer than a
//! lease, then delivered — the late write a real partition can cause).
//! The Kueue invariants must hold once everything is quiet, and no pod may
//! ever be in a reconcile on two replicas at once.
//!
//! The same run with `--shards=selector` and `--shards=label` (strategy
//! `strict`) checks the placements by the API server and by labels.
//!
//! ```text
//! cargo test -p concord-tests --test sharding chaos::                          # seed 1 per strategy
//! CONCORD_CHAOS_SEEDS=50 cargo test -p concord-tests --test sharding chaos::   # a soak
//! CONCORD_CHAOS_SEED=17 cargo test -p concord-tests --test sharding chaos::    # replay one seed
//! ```

use concord_tests::chaos_strategy_file;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use concord::strategies::{ConflictPolicy, Writer, strategy_for};
use concord::{
    Action, Context, Intent, Manager, ManagerArgs, Reconciler, featuregates::StrategyName,
    manager::LeaderElectionConfig, sharding::ShardingMode,
};
use concord_examples::invariants::{self, Violation};
use concord_examples::kueue::{self, PodPhase};
use concord_examples::wait_until;
use concord_testenv::faults::{FaultProxy, FaultReport, Faults, Supervised, Verb};
use concord_testenv::{TestEnv, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::support::{Log, Open, overlaps};

const SAFE: [StrategyName; 3] = [
    StrategyName::Strict,
    StrategyName::Update,
    StrategyName::Apply,
];
const PODS: usize = 24;
const REPLICAS: usize = 3;
const MINUTE: Duration = Duration::from_secs(60);
/// How long the partitioned replica's requests are held: past its lease.
const PARTITION: Duration = Duration::from_secs(7);

/// `CONCORD_CHAOS_SEED=s` replays one seed; `CONCORD_CHAOS_SEEDS=n` runs
/// seeds 1..=n; by default seed 1.
fn seeds() -> Vec<u64> {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match (var("CONCORD_CHAOS_SEED"), var("CONCORD_CHAOS_SEEDS")) {
        (Some(seed), _) => vec![seed],
        (None, Some(n)) => (1..=n).collect(),
        (None, None) => vec![1],
    }
}

/// Lease timings short enough for CI: a crash hands over in about 4 s.
fn timings() -> LeaderElectionConfig {
    let mut config = LeaderElectionConfig::default();
    config.lease_duration = Duration::from_secs(4);
    config.renew_deadline = Duration::from_secs(3);
    config.retry_period = Duration::from_millis(500);
    config
}

/// The Kueue example's reconciler, recording each reconcile's span.
struct Spanned {
    replica: usize,
    log: Log,
}

#[concord::async_trait]
impl Reconciler<PodPhase> for Spanned {
    type Error = <kueue::PodFinalizer as Reconciler<PodPhase>>::Error;

    async fn reconcile(
        &self,
        pod: Arc<PodPhase>,
        ctx: &Context<PodPhase>,
    ) -> Result<Action, Self::Error> {
        let _open = Open {
            replica: self.replica,
            key: format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
            start: Instant::now(),
            log: self.log.clone(),
        };
        kueue::PodFinalizer.reconcile(pod, ctx).await
    }
}

/// One replica behind `proxy`; every incarnation (one per crash) records
/// under an id of its own.
fn replica(
    proxy: &FaultProxy,
    args: ManagerArgs,
    ns: &TestNamespace,
    log: &Log,
    ids: &Arc<AtomicUsize>,
) -> Supervised {
    let namespace = ns.name().to_owned();
    let (log, ids) = (log.clone(), ids.clone());
    proxy.supervise(move |config| {
        let (args, namespace, log) = (args.clone(), namespace.clone(), log.clone());
        let replica = ids.fetch_add(1, Relaxed);
        async move {
            let pods: Api<PodPhase> =
                Api::namespaced(Client::try_from(config.clone())?, &namespace);
            let mut manager = Manager::builder("kueue-finalizer")
                .with_kube_config(config)
                .with_args(args)
                .with_registry(kueue::registry()?.0)
                .with_leader_election_config(timings())
                .with_signal_handling(false)
                .build()
                .await?;
            manager
                .controller("pods", pods, Spanned { replica, log })
                .add()?;
            manager.run().await?;
            anyhow::Ok(())
        }
    })
}

/// The partition: from a few requests in, every request of each kind is
/// held for [`PARTITION`] before the proxy forwards it.
fn partitioned(faults: Faults) -> Faults {
    let kinds = [
        (Verb::Update, 6),
        (Verb::List, 6),
        (Verb::Get, 1),
        (Verb::Watch, 1),
        (Verb::Patch, 2),
        (Verb::Create, 1),
        (Verb::Delete, 1),
    ];
    kinds.into_iter().fold(faults, |faults, (verb, after)| {
        faults.on(verb).delay(PARTITION).after(after).times(10_000)
    })
}

/// Half the pods finish while another controller adds its finalizer 30 ms
/// later; the other half are deleted. The pods given the foreign finalizer.
async fn workload(ns: &TestNamespace) -> Result<BTreeSet<String>> {
    let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let other = Writer::<Pod>::new(
        ns.client(),
        strategy_for(StrategyName::Update, ConflictPolicy::default()),
    );
    let names: Vec<String> = (0..PODS).map(|i| format!("job-{i}")).collect();
    let (finishing, deleting) = names.split_at(PODS / 2);
    let finish = finishing.iter().map(|name| async {
        let done = json!({"status": {"phase": "Succeeded"}});
        let pod = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
            .await?;
        tokio::time::sleep(Duration::from_millis(30)).await;
        other
            .write(
                &pod,
                &Intent::add_finalizer(kueue::FOREIGN_FINALIZER).into(),
            )
            .await?;
        anyhow::Ok(name.clone())
    });
    let delete = deleting.iter().map(|name| async {
        api.delete(name, &DeleteParams::default()).await?;
        anyhow::Ok(())
    });
    let (foreign, deleted) = futures::join!(
        futures::future::try_join_all(finish),
        futures::future::try_join_all(delete)
    );
    deleted?;
    Ok(foreign?.into_iter().collect())
}

/// Waits until no proxy holds a request, then checks; re-checks while
/// violations remain, for up to `patience` (a handover may be due).
async fn verdict(
    proxies: &[FaultProxy],
    ns: &TestNamespace,
    foreign: &BTreeSet<String>,
    patience: Duration,
) -> Result<Vec<Violation>> {
    let deadline = Instant::now() + patience;
    loop {
        // Never a quiet second: the membership Leases are renewed every
        // retry period. What matters is that no held request (the
        // partition's late writes) is still to land.
        for proxy in proxies {
            proxy.settle(Duration::ZERO, MINUTE).await?;
        }
        let found = invariants::kueue(&ns.client(), ns.name(), foreign).await?;
        if found.is_empty() || Instant::now() > deadline {
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One seeded run; a description of what broke, if anything did.
async fn run(
    env: &TestEnv,
    mode: ShardingMode,
    strategy: StrategyName,
    seed: u64,
) -> Result<Option<String>> {
    let ns = env.namespace().await?;
    let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    for i in 0..PODS {
        let pod = kueue::managed_pod(&format!("job-{i}"))?;
        api.create(&PostParams::default(), &pod).await?;
    }
    let config = chaos_strategy_file(strategy, "pods")?;
    let args = ManagerArgs::new()
        .with_config(&*config)
        .with_shards(mode, ns.name());
    let (log, ids): (Log, _) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
    let mut proxies = Vec::new();
    let mut schedules = Vec::new();
    let mut replicas = Vec::new();
    for i in 0..REPLICAS {
        let mut faults = Faults::chaos(seed * 10 + i as u64, &["pods"], &["pods"]);
        if i == 2 {
            faults = partitioned(faults);
        }
        schedules.push(faults.to_string());
        let proxy = FaultProxy::start(env.config(), faults).await?;
        replicas.push(Some(replica(&proxy, args.clone(), &ns, &log, &ids)));
        proxies.push(proxy);
    }
    let label = format!("sharded kueue ({mode}) {strategy} seed {seed}");
    let ours = |p: &Pod| p.finalizers().iter().any(|f| f == kueue::FINALIZER);
    wait_until(&api, "our finalizer on every pod", MINUTE, |l| {
        l.iter().all(ours) && l.len() == PODS
    })
    .await
    .map_err(|e| anyhow::anyhow!("{label}: {e:#}"))?;

    // Replica 0 dies mid-run: its runtime dropped, its Lease left to expire.
    if let Some(killed) = replicas[0].take() {
        killed.stop().await?;
    }
    let foreign = workload(&ns).await?;
    let violations = verdict(&proxies, &ns, &foreign, Duration::from_secs(45)).await?;
    // The partitioned replica stops by itself: it could not renew its
    // Lease, so it fenced itself and `Manager::run` returned an error.
    let partitioned_exit = match &replicas[2] {
        Some(replica) => {
            let start = Instant::now();
            while replica.exited().is_none() && start.elapsed() < MINUTE {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            replica.exited()
        }
        None => None,
    };
    let overlapping = overlaps(&log);
    let mut total = FaultReport::default();
    let mut exits = Vec::new();
    for (proxy, replica) in proxies.iter().zip(replicas) {
        total.add(&proxy.report());
        if let Some(replica) = replica {
            let report = replica.stop().await?;
            exits.push(format!(
                "{} starts, exited {:?}",
                report.starts, report.exited
            ));
        }
    }
    let spans: usize = log.lock().unwrap().values().map(Vec::len).sum();
    println!(
        "chaos {label}: {spans} reconciles on {} incarnations, none overlapping: {}; survivors: {exits:?}; faults: {total}",
        ids.load(Relaxed),
        overlapping.is_empty()
    );
    let stopped = partitioned_exit
        .as_deref()
        .is_some_and(|why| why.contains("could not be renewed"));
    if violations.is_empty() && overlapping.is_empty() && stopped {
        return Ok(None);
    }
    let mut problems: Vec<String> = violations.iter().map(ToString::to_string).collect();
    problems.extend(overlapping);
    if !stopped {
        problems.push(format!(
            "the partitioned replica did not stop for want of its Lease: {partitioned_exit:?}"
        ));
    }
    Ok(Some(format!(
        "{label}\n  replay: CONCORD_CHAOS_SEED={seed}\n  schedules:\n    {}\n  {}",
        schedules.join("\n    "),
        problems.join("\n  ")
    )))
}

#[tokio::test]
async fn sharded_kueue_keeps_its_invariants_through_kills_and_a_partition() -> Result<()> {
    let env = TestEnv::shared()?;
    // The strategies run side by side, each in its own namespace and ring;
    // a strategy's seeds run one after another.
    let per_strategy = SAFE.map(|strategy| async move {
        let mut broken = Vec::new();
        for seed in seeds() {
            if let Some(problem) = run(env, ShardingMode::Hash, strategy, seed).await? {
                broken.push(problem);
            }
        }
        anyhow::Ok(broken)
    });
    let mut broken = Vec::new();
    for outcome in futures::future::join_all(per_strategy).await {
        broken.extend(outcome?);
    }
    let runs = SAFE.len() * seeds().len();
    println!("sharded chaos: {runs} seeded runs, {} broken", broken.len());
    ensure!(
        broken.is_empty(),
        "invariants broken:\n{}",
        broken.join("\n")
    );
    Ok(())
}

/// The same chaos with the objects placed by the API server's shard
/// selectors (`selector`) and by labels (`label`), each with `strict`.
#[tokio::test]
async fn sharded_kueue_keeps_its_invariants_in_selector_and_label_modes() -> Result<()> {
    let env = TestEnv::shared()?;
    let per_mode = [ShardingMode::Selector, ShardingMode::Label].map(|mode| async move {
        let mut broken = Vec::new();
        for seed in seeds() {
            if let Some(problem) = run(env, mode, StrategyName::Strict, seed).await? {
                broken.push(problem);
            }
        }
        anyhow::Ok(broken)
    });
    let mut broken = Vec::new();
    for outcome in futures::future::join_all(per_mode).await {
        broken.extend(outcome?);
    }
    println!(
        "sharded chaos by placement: {} seeded runs, {} broken",
        2 * seeds().len(),
        broken.len()
    );
    ensure!(
        broken.is_empty(),
        "invariants broken:\n{}",
        broken.join("\n")
    );
    Ok(())
}
