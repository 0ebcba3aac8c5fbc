//! The mirror example (a controller-runtime author's first port: a
//! finalizer, a generation predicate, a watch of ConfigMaps mapped back
//! through an index, cached reads, apply without an owner) keeps its
//! invariants behind the fault proxy: every seeded chaos schedule (stale
//! watches, crashes before and after writes, conflicts, 5xx, throttling,
//! timeouts), and a schedule that holds every ConfigMap event back and
//! crashes the operator after its first copy is written.
//!
//! ```text
//! cargo test -p concord-tests --test examples mirror:: -- --nocapture
//! CONCORD_CHAOS_SEEDS=50 cargo test -p concord-tests --test examples mirror::   # a soak
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Result;
use concord::{Manager, ManagerArgs, featuregates::FeatureRegistry};
use concord_examples::invariants::Violation;
use concord_examples::mirror::{self, FROM_LABEL, Mirror, MirrorSpec};
use concord_examples::wait_until;
use concord_testenv::TestEnv;
use concord_testenv::faults::{FaultProxy, Faults, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

fn seeds() -> Vec<u64> {
    match std::env::var("CONCORD_CHAOS_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => (1..=n).collect(),
        None => vec![1, 2],
    }
}

/// Every ConfigMap event 500 ms late, and a crash right after the first
/// copy is applied (the answer never reaches the operator).
fn stale_and_crash() -> Faults {
    Faults::seeded(0)
        .on(Verb::Watch)
        .resource("configmaps")
        .hold_events(Duration::from_millis(500))
        .on(Verb::Patch)
        .resource("configmaps")
        .crash_after()
        .times(1)
}

fn source(namespace: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("mode".to_owned(), value.to_owned())])),
        ..ConfigMap::default()
    }
}

/// One run: three Mirrors over two target namespaces; the source changes,
/// one Mirror moves, one is deleted, another writer deletes a copy; the
/// invariants are checked once the operator is quiet.
async fn run(label: &str, faults: Faults) -> Result<Vec<Violation>> {
    let env = TestEnv::shared()?;
    env.install_crd(Mirror::crd()).await?;
    let ns = env.namespace().await?;
    let (one, two) = (env.namespace().await?, env.namespace().await?);
    let targets = [one.name().to_owned(), two.name().to_owned()];
    let maps: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    maps.create(&PostParams::default(), &source(ns.name(), "fast & <ü>"))
        .await?;
    let proxy = FaultProxy::start(env.config(), faults).await?;
    let namespace = ns.name().to_owned();
    let operator = proxy.supervise(move |config| {
        let namespace = namespace.clone();
        async move {
            let mut manager = Manager::builder("mirror-operator")
                .with_kube_config(config)
                .with_args(ManagerArgs::new().with_config(mirror::CONFIG))
                .with_registry(FeatureRegistry::new())
                .with_signal_handling(false)
                .build()
                .await?;
            mirror::add_controller(&mut manager, Some(&namespace))?;
            manager.run().await?;
            anyhow::Ok(())
        }
    });
    let mirrors: Api<Mirror> = Api::namespaced(ns.client(), ns.name());
    for (name, source, to) in [
        ("keep", "settings", &targets[..]),
        ("move", "settings", &targets[..]),
        ("gone", "settings", &targets[..1]),
        ("orphan", "absent", &targets[..1]),
    ] {
        let spec = MirrorSpec {
            source: source.into(),
            targets: to.to_vec(),
        };
        mirrors
            .create(&PostParams::default(), &Mirror::new(name, spec))
            .await?;
    }
    let copies: Api<ConfigMap> = Api::all(ns.client());
    let from = |mirror: &str| format!("{FROM_LABEL}={}.{mirror}", ns.name());
    let count = |mirror: &'static str| {
        let (copies, selector) = (copies.clone(), from(mirror));
        async move {
            copies
                .list(&ListParams::default().labels(&selector))
                .await
                .map(|l| l.items.len())
                .unwrap_or(0)
        }
    };
    let started = Instant::now();
    while count("keep").await < 2 || count("gone").await < 1 {
        anyhow::ensure!(
            started.elapsed() < MINUTE,
            "{label}: the first copies never appeared; operator exited: {:?}",
            operator.exited()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    maps.patch(
        "settings",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"mode": "slow, then \u{2028} fast"}})),
    )
    .await?;
    mirrors
        .patch(
            "move",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targets": [targets[1]]}})),
        )
        .await?;
    mirrors.delete("gone", &DeleteParams::default()).await?;
    Api::<ConfigMap>::namespaced(ns.client(), &targets[1])
        .delete("keep", &DeleteParams::default())
        .await?;
    let deleted: BTreeSet<String> = ["gone".to_owned()].into();
    let deadline = Instant::now() + MINUTE;
    let violations = loop {
        proxy.settle(Duration::from_secs(1), MINUTE).await?;
        let found = mirror::invariants(&ns.client(), ns.name(), &deleted).await?;
        if found.is_empty() || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    wait_until(&mirrors, "the deleted mirror gone", MINUTE, |l| {
        l.iter().all(|m| m.name_any() != "gone")
    })
    .await
    .ok();
    let report = proxy.report();
    let stopped = operator.stop().await?;
    println!(
        "mirror {label}: starts {}, faults: {report}",
        stopped.starts
    );
    assert_eq!(
        stopped.exited, None,
        "{label}: the operator never stops by itself"
    );
    Ok(violations)
}

#[tokio::test]
async fn mirror_invariants_hold_under_a_stale_watch_and_crashes() -> Result<()> {
    let mut broken = Vec::new();
    let mut runs = vec![("stale watch + crash".to_owned(), stale_and_crash())];
    for seed in seeds() {
        let faults = Faults::chaos(
            seed,
            &["mirrors", "mirrors/status", "configmaps"],
            &["mirrors", "configmaps"],
        );
        runs.push((format!("seed {seed}: {faults}"), faults));
    }
    for (label, faults) in runs {
        let violations = run(&label, faults).await?;
        if !violations.is_empty() {
            let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
            broken.push(format!("{label}\n  {}", list.join("\n  ")));
        }
    }
    assert!(
        broken.is_empty(),
        "invariants broken:\n{}",
        broken.join("\n")
    );
    Ok(())
}
