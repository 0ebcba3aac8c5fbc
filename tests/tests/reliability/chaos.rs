//! Seeded chaos runs: every example operator, under every safe strategy,
//! behind a fault proxy with a random schedule of every fault class; its
//! invariants are checked once it has gone quiet. `lax` is shown to break
//! the Kueue invariant under a stale cache, so the harness can fail.
//!
//! ```text
//! cargo test -p concord-tests --test reliability chaos::                          # 2 seeds per pair
//! CONCORD_CHAOS_SEEDS=200 cargo test -p concord-tests --test reliability chaos::  # a soak
//! CONCORD_CHAOS_SEED=17 cargo test -p concord-tests --test reliability chaos::    # replay one seed
//! ```

use concord_tests::chaos_strategy_file;
use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::strategies::{ConflictPolicy, Writer, strategy_for};
use concord::{
    Intent, Manager, ManagerArgs, featuregates::FeatureRegistry, featuregates::StrategyName,
};
use concord_examples::invariants::{self, Violation};
use concord_examples::widgets::{self, Widget, WidgetSpec};
use concord_examples::{argo, kueue, wait_until};
use concord_testenv::faults::{FaultProxy, FaultReport, Faults, Supervised, Verb};
use concord_testenv::{TestEnv, TestNamespace};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::json;

/// The strategies that promise no lost write against other processes.
const SAFE: [StrategyName; 4] = [
    StrategyName::Strict,
    StrategyName::Update,
    StrategyName::Apply,
    StrategyName::Guarded,
];
const PODS: usize = 6;
const MINUTE: Duration = Duration::from_secs(60);

/// `CONCORD_CHAOS_SEED=s` replays one seed; `CONCORD_CHAOS_SEEDS=n` runs
/// seeds 1..=n; by default seeds 1 and 2.
fn seeds() -> Vec<u64> {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match (var("CONCORD_CHAOS_SEED"), var("CONCORD_CHAOS_SEEDS")) {
        (Some(seed), _) => vec![seed],
        (None, Some(n)) => (1..=n).collect(),
        (None, None) => vec![1, 2],
    }
}

/// Settles, checks, and while violations remain re-checks after each new
/// quiet period until `patience` runs out (a requeued retry may be due).
async fn verdict<F, Fut>(proxy: &FaultProxy, patience: Duration, check: F) -> Result<Vec<Violation>>
where
    F: Fn() -> Fut,
    Fut: Future<Output = kube::Result<Vec<Violation>>>,
{
    let deadline = Instant::now() + patience;
    loop {
        proxy.settle(Duration::from_secs(1), MINUTE).await?;
        let found = check().await?;
        if found.is_empty() || Instant::now() > deadline {
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What one seeded run left behind.
struct Outcome {
    label: String,
    schedule: String,
    report: FaultReport,
    violations: Vec<Violation>,
    starts: u32,
}

/// Runs `runs`, prints each and the totals, and fails naming every run
/// (with its schedule) whose invariants broke.
fn summarise(example: &str, outcomes: &[Outcome]) {
    let mut total = FaultReport::default();
    let mut broken = Vec::new();
    for o in outcomes {
        println!(
            "chaos {}: starts {}, faults: {}",
            o.label, o.starts, o.report
        );
        total.add(&o.report);
        if !o.violations.is_empty() {
            let list: Vec<String> = o.violations.iter().map(ToString::to_string).collect();
            broken.push(format!(
                "{}\n  replay: {}\n  {}",
                o.label,
                o.schedule,
                list.join("\n  ")
            ));
        }
    }
    println!(
        "chaos {example}: {} seeded schedules; faults injected: {total}",
        outcomes.len()
    );
    assert!(
        broken.is_empty(),
        "invariants broken:\n{}",
        broken.join("\n")
    );
}

async fn stop(operator: Supervised) -> Result<u32> {
    let report = operator.stop().await?;
    assert_eq!(report.exited, None, "the operator never stops by itself");
    Ok(report.starts)
}

// ANCHOR: kueue_operator
/// Runs the Kueue example's controller behind `proxy`, as `main.rs` does.
fn kueue_operator(proxy: &FaultProxy, args: ManagerArgs, ns: &TestNamespace) -> Supervised {
    let namespace = ns.name().to_owned();
    proxy.supervise(move |config| {
        let (args, namespace) = (args.clone(), namespace.clone());
        async move {
            let pods: Api<kueue::PodPhase> =
                Api::namespaced(Client::try_from(config.clone())?, &namespace);
            let mut manager = Manager::builder("kueue-finalizer")
                .with_kube_config(config)
                .with_args(args)
                .with_registry(kueue::registry()?.0)
                .with_signal_handling(false)
                .build()
                .await?;
            kueue::add_controller(&mut manager, pods)?;
            manager.run().await?;
            anyhow::Ok(())
        }
    })
}
// ANCHOR_END: kueue_operator

/// The Kueue example's managed pods, created before the operator starts so
/// that it lists them (and watches only what happens to them next).
async fn kueue_pods(ns: &TestNamespace) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    for i in 0..PODS {
        let pod = kueue::managed_pod(&format!("job-{i}"))?;
        api.create(&PostParams::default(), &pod).await?;
    }
    Ok(())
}

/// The Kueue workload: pods finish while another controller adds its
/// finalizer `gap` later, or are deleted. Returns the pods the other
/// controller added its finalizer to.
async fn kueue_workload(ns: &TestNamespace, gap: Duration) -> Result<BTreeSet<String>> {
    let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
    let names: Vec<String> = (0..PODS).map(|i| format!("job-{i}")).collect();
    let ours = |p: &Pod| p.finalizers().iter().any(|f| f == kueue::FINALIZER);
    wait_until(&api, "our finalizer on every pod", MINUTE, |l| {
        l.iter().all(ours) && l.len() == PODS
    })
    .await?;
    let other = Writer::<Pod>::new(
        ns.client(),
        strategy_for(StrategyName::Update, ConflictPolicy::default()),
    );
    let (finishing, deleting) = names.split_at(PODS / 2);
    let finish = finishing.iter().map(|name| async {
        let done = json!({"status": {"phase": "Succeeded"}});
        let pod = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
            .await?;
        tokio::time::sleep(gap).await;
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

#[tokio::test]
async fn chaos_kueue_invariants_hold_for_safe_strategies() -> Result<()> {
    let env = TestEnv::shared()?;
    let mut outcomes = Vec::new();
    for strategy in SAFE {
        let config = chaos_strategy_file(strategy, "pods")?;
        let args = ManagerArgs::new().with_config(&*config);
        for seed in seeds() {
            let ns = env.namespace().await?;
            let faults = Faults::chaos(seed, &["pods"], &["pods"]);
            let schedule = faults.to_string();
            let proxy = FaultProxy::start(env.config(), faults).await?;
            kueue_pods(&ns).await?;
            let operator = kueue_operator(&proxy, args.clone(), &ns);
            let foreign = kueue_workload(&ns, Duration::from_millis(30))
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "kueue {strategy} seed {seed}: {e:#}; operator exited: {:?}",
                        operator.exited()
                    )
                });
            let client = ns.client();
            let violations = verdict(&proxy, Duration::from_secs(30), || {
                invariants::kueue(&client, ns.name(), &foreign)
            })
            .await?;
            outcomes.push(Outcome {
                label: format!("kueue {strategy} seed {seed}"),
                schedule,
                report: proxy.report(),
                violations,
                starts: stop(operator).await?,
            });
        }
    }
    summarise("kueue", &outcomes);
    Ok(())
}

// ANCHOR: lax
/// Every pod event reaches the operator 300 ms late (a stale cache), and
/// from each pod's third event on, only the last of those within 800 ms
/// (unobserved states): the operator sees the pod finish, but never the
/// other controller's finalizer that came 50 ms later.
fn stale_and_unobserved() -> Faults {
    Faults::seeded(1)
        .on(Verb::Watch)
        .resource("pods")
        .drop_intermediate(Duration::from_millis(800))
        .after(2)
        .per_object()
        .on(Verb::Watch)
        .resource("pods")
        .hold_events(Duration::from_millis(300))
}

/// The foreign finalizers lost with the Kueue gate `on` or off.
async fn kueue_under_stale_cache(gate: bool) -> Result<Vec<Violation>> {
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let proxy = FaultProxy::start(env.config(), stale_and_unobserved()).await?;
    kueue_pods(&ns).await?;
    let args = ManagerArgs::new()
        .with_config(kueue::CONFIG)
        .with_feature_gates(format!("RemoveFinalizersWithStrictPatch={gate}"));
    let operator = kueue_operator(&proxy, args, &ns);
    let foreign = kueue_workload(&ns, Duration::from_millis(50)).await?;
    proxy.settle(Duration::from_secs(1), MINUTE).await?;
    let violations = invariants::kueue(&ns.client(), ns.name(), &foreign).await?;
    stop(operator).await?;
    Ok(violations)
}

#[tokio::test]
async fn chaos_lax_loses_foreign_finalizers_under_a_stale_cache() -> Result<()> {
    let lax = kueue_under_stale_cache(false).await?;
    println!("lax under a stale cache: {} violations", lax.len());
    assert!(
        lax.iter()
            .any(|v| v.invariant == "every foreign finalizer survives"),
        "lax drops the finalizer its stale cache never saw: {lax:?}"
    );
    let strict = kueue_under_stale_cache(true).await?;
    assert!(
        strict.is_empty(),
        "strict keeps them under the same faults: {strict:?}"
    );
    Ok(())
}
// ANCHOR_END: lax

fn argo_operator(proxy: &FaultProxy, args: ManagerArgs, ns: &TestNamespace) -> Supervised {
    let namespace = ns.name().to_owned();
    proxy.supervise(move |config| {
        let (args, namespace) = (args.clone(), namespace.clone());
        async move {
            let pods: Api<argo::PodPhase> =
                Api::namespaced(Client::try_from(config.clone())?, &namespace);
            let mut manager = Manager::builder("argo-cleanup")
                .with_kube_config(config)
                .with_args(args)
                .with_registry(FeatureRegistry::new())
                .with_signal_handling(false)
                .build()
                .await?;
            manager
                .controller("pod-deletion", pods.clone(), argo::DeletionPath)
                .add()?;
            manager
                .controller("pod-completion", pods, argo::CompletionPath)
                .add()?;
            manager.run().await?;
            anyhow::Ok(())
        }
    })
}

#[tokio::test]
async fn chaos_argo_invariants_hold_for_safe_strategies() -> Result<()> {
    let env = TestEnv::shared()?;
    let mut outcomes = Vec::new();
    for strategy in SAFE {
        let config = chaos_strategy_file(strategy, "pods")?;
        let args = ManagerArgs::new().with_config(&*config);
        for seed in seeds() {
            let ns = env.namespace().await?;
            let faults = Faults::chaos(seed, &["pods"], &["pods"]);
            let schedule = faults.to_string();
            let proxy = FaultProxy::start(env.config(), faults).await?;
            let operator = argo_operator(&proxy, args.clone(), &ns);
            let api: Api<Pod> = Api::namespaced(ns.client(), ns.name());
            for i in 0..PODS {
                api.create(
                    &PostParams::default(),
                    &argo::workflow_pod(&format!("step-{i}"))?,
                )
                .await?;
            }
            let holds = |p: &Pod| p.finalizers().iter().any(|f| f == argo::FINALIZER);
            wait_until(&api, "our finalizer on every pod", MINUTE, |l| {
                l.iter().all(holds)
            })
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "argo {strategy} seed {seed}: {e:#}; operator exited: {:?}",
                    operator.exited()
                )
            });
            let race = (0..PODS).map(|i| {
                let api = api.clone();
                async move {
                    let name = format!("step-{i}");
                    let done = Patch::Merge(json!({"status": {"phase": "Succeeded"}}));
                    let (patch, delete) = (PatchParams::default(), DeleteParams::default());
                    let (completed, deleted) = futures::join!(
                        api.patch_status(&name, &patch, &done),
                        api.delete(&name, &delete),
                    );
                    completed?;
                    deleted?;
                    anyhow::Ok(())
                }
            });
            futures::future::try_join_all(race).await?;
            let client = ns.client();
            let violations = verdict(&proxy, Duration::from_secs(30), || {
                invariants::argo(&client, ns.name())
            })
            .await?;
            outcomes.push(Outcome {
                label: format!("argo {strategy} seed {seed}"),
                schedule,
                report: proxy.report(),
                violations,
                starts: stop(operator).await?,
            });
        }
    }
    summarise("argo", &outcomes);
    Ok(())
}

fn widget_operator(proxy: &FaultProxy, args: ManagerArgs, ns: &TestNamespace) -> Supervised {
    let namespace = ns.name().to_owned();
    proxy.supervise(move |config| {
        let (args, namespace) = (args.clone(), namespace.clone());
        async move {
            let mut manager = Manager::builder("crd-operator")
                .with_kube_config(config)
                .with_args(args)
                .with_registry(FeatureRegistry::new())
                .with_signal_handling(false)
                .build()
                .await?;
            widgets::add_controller(&mut manager, &namespace)?;
            manager.run().await?;
            anyhow::Ok(())
        }
    })
}

#[tokio::test]
async fn chaos_crd_operator_invariants_hold_for_safe_strategies() -> Result<()> {
    let env = TestEnv::shared()?;
    env.install_crd(Widget::crd()).await?;
    let mut outcomes = Vec::new();
    let writes = ["widgets", "widgets/status", "configmaps"];
    let watches = ["widgets", "configmaps"];
    for strategy in SAFE {
        let config = chaos_strategy_file(strategy, "widgets.demo.concord.dev")?;
        let args = ManagerArgs::new().with_config(&*config);
        for seed in seeds() {
            let ns = env.namespace().await?;
            let faults = Faults::chaos(seed, &writes, &watches);
            let schedule = faults.to_string();
            let proxy = FaultProxy::start(env.config(), faults).await?;
            let operator = widget_operator(&proxy, args.clone(), &ns);
            let api: Api<Widget> = Api::namespaced(ns.client(), ns.name());
            for (name, shards) in [("kept", 3), ("gone", 2)] {
                let spec = WidgetSpec {
                    message: format!("{name} says hi"),
                    shards,
                };
                api.create(&PostParams::default(), &Widget::new(name, spec))
                    .await?;
            }
            wait_until(&api, "both widgets ready", MINUTE, |l| {
                l.iter()
                    .all(|w| w.status.as_ref().is_some_and(|s| s.shards == w.spec.shards))
            })
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "crd-operator {strategy} seed {seed}: {e:#}; operator exited: {:?}",
                    operator.exited()
                )
            });
            let scale = Patch::Merge(json!({"spec": {"shards": 1}}));
            api.patch("kept", &PatchParams::default(), &scale).await?;
            api.delete("gone", &DeleteParams::default()).await?;
            let deleted: BTreeSet<String> = ["gone".to_owned()].into();
            let client = ns.client();
            let violations = verdict(&proxy, Duration::from_secs(30), || {
                invariants::widgets(&client, ns.name(), &deleted)
            })
            .await?;
            outcomes.push(Outcome {
                label: format!("crd-operator {strategy} seed {seed}"),
                schedule,
                report: proxy.report(),
                violations,
                starts: stop(operator).await?,
            });
        }
    }
    summarise("crd-operator", &outcomes);
    Ok(())
}
