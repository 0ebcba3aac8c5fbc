//! Every YAML sample the book includes loads, resolves to what the chapter
//! says, and round-trips through `explain().to_yaml()`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use concord_featuregates::{
    Config, ConfigLoader, ConflictPolicy, FeatureRegistry, FeatureSpec, Operation, ResourceKey,
    StrategyName, register_framework_gates,
};

const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../book/src/feature-gates");

fn registry() -> FeatureRegistry {
    let mut registry = FeatureRegistry::new();
    register_framework_gates(&mut registry).unwrap();
    registry
        .register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch"))
        .unwrap();
    registry.register(FeatureSpec::alpha("FancyAlpha")).unwrap();
    registry
}

fn load(path: &Path, flag: &str) -> Config {
    ConfigLoader::new()
        .with_file(path)
        .with_feature_gates(flag)
        .load(registry())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn pods() -> ResourceKey {
    ResourceKey::new("", "v1", "Pod", "pods")
}

/// The strategies of the five operations the samples configure (all but
/// `apply-owned`, `create` and `delete`, which no default covers: always
/// `apply`, `strict` and `strict` here).
fn strategies(config: &Config, key: &ResourceKey) -> [StrategyName; 5] {
    let row = config.strategies().for_resource(key);
    assert_eq!(row.strategy(Operation::ApplyOwned), StrategyName::Apply);
    assert_eq!(row.strategy(Operation::Create), StrategyName::Strict);
    assert_eq!(row.strategy(Operation::Delete), StrategyName::Strict);
    std::array::from_fn(|i| row.strategy(Operation::ALL[i]))
}

fn samples() -> Vec<PathBuf> {
    let mut samples: Vec<PathBuf> = std::fs::read_dir(SAMPLES)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    samples.sort();
    samples
}

#[test]
fn every_book_sample_resolves_as_the_chapter_says() {
    use StrategyName::{Apply, Lax, Locked, Strict, Update};
    let samples = samples();
    assert!(samples.len() >= 3);
    for path in samples {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let config = load(&path, "");
        match name.as_str() {
            "kueue.yaml" => {
                assert_eq!(strategies(&config, &pods()), [Strict; 5]);
                let off = load(&path, "RemoveFinalizersWithStrictPatch=false");
                assert_eq!(
                    off.strategies()
                        .for_resource(&pods())
                        .strategy(Operation::RemoveFinalizer),
                    Lax
                );
                let workloads =
                    ResourceKey::new("kueue.x-k8s.io", "v1beta1", "Workload", "workloads");
                assert_eq!(
                    strategies(&config, &workloads),
                    [Update, Update, Update, Apply, Update]
                );
                let row = config.strategies().for_resource(&workloads);
                assert_eq!(
                    row.get(Operation::AddFinalizer).on_conflict,
                    ConflictPolicy::Requeue
                );
            }
            "argo.yaml" => {
                assert_eq!(strategies(&config, &pods()), [Update; 5]);
                let ConflictPolicy::Retry(retry) = config
                    .strategies()
                    .for_resource(&pods())
                    .get(Operation::RemoveFinalizer)
                    .on_conflict
                else {
                    panic!("argo.yaml retries in place");
                };
                assert_eq!(
                    (retry.steps, retry.initial, retry.factor),
                    (10, Duration::from_millis(5), 2.0)
                );
                assert_eq!((retry.jitter, retry.cap), (0.2, Duration::from_secs(1)));
                let other = ResourceKey::new("apps", "v1", "Deployment", "deployments");
                assert_eq!(strategies(&config, &other), [Strict; 5], "built-in default");
                let lax = load(&path, "StrictWritesByDefault=false");
                assert_eq!(strategies(&lax, &other), [Lax; 5]);
            }
            "reference.yaml" => {
                assert_eq!(
                    strategies(&config, &pods()),
                    [Strict, Strict, Lax, Update, Locked]
                );
                let row = config.strategies().for_resource(&pods());
                assert_eq!(
                    row.get(Operation::RemoveFinalizer).on_conflict,
                    ConflictPolicy::Requeue
                );
                let off = load(&path, "RemoveFinalizersWithStrictPatch=false");
                assert_eq!(
                    off.strategies()
                        .for_resource(&pods())
                        .strategy(Operation::RemoveFinalizer),
                    Lax
                );
                let deployments = ResourceKey::new("apps", "v1", "Deployment", "deployments");
                assert_eq!(
                    strategies(&config, &deployments),
                    [Strict, Strict, Strict, Apply, Update]
                );
                let jobs = ResourceKey::new("batch", "v1", "Job", "jobs");
                assert_eq!(strategies(&config, &jobs), [Update; 5]);
                let reason = config
                    .strategies()
                    .row_for(&pods())
                    .reason(Operation::RemoveFinalizer)
                    .to_string();
                assert!(
                    reason.contains("gate RemoveFinalizersWithStrictPatch is on (file"),
                    "{reason}"
                );
            }
            other => panic!("book sample {other} has no test: add one here"),
        }
    }
}

#[test]
fn explain_yaml_loads_back_to_the_same_configuration() {
    for path in samples() {
        for flag in ["", "RemoveFinalizersWithStrictPatch=false,AllAlpha=true"] {
            let config = load(&path, flag);
            let yaml = config.explain().to_yaml();
            let reloaded = ConfigLoader::new()
                .with_yaml("explained.yaml", yaml.clone())
                .load(registry())
                .unwrap_or_else(|e| panic!("{}: {e}\n{yaml}", path.display()));
            let cells = |c: &Config| {
                let table = c.strategies();
                let rows = std::iter::once(table.default_row()).chain(table.rows());
                rows.map(|row| (row.resource().map(str::to_owned), row.strategies()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                cells(&reloaded),
                cells(&config),
                "{}\n{yaml}",
                path.display()
            );
            let values = |c: &Config| c.gates().iter().map(|s| s.enabled).collect::<Vec<_>>();
            assert_eq!(values(&reloaded), values(&config), "{}", path.display());
            assert!(reloaded.warnings().is_empty());
        }
    }
}
