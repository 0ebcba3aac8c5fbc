//! The cost of the hot-path questions: is a gate on, and which strategy
//! does this (resource, operation) get.
//!
//! Run: `cargo bench -p kube-concord-featuregates --bench lookup -- --quick`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use concord_featuregates::{
    ConfigLoader, FeatureRegistry, FeatureSpec, Operation, ResourceKey, register_framework_gates,
};
use criterion::{Criterion, criterion_group, criterion_main};

const KUEUE_YAML: &str = include_str!("../../book/src/feature-gates/kueue.yaml");

fn lookup(c: &mut Criterion) {
    let mut registry = FeatureRegistry::new();
    register_framework_gates(&mut registry).unwrap();
    let strict_patch = registry
        .register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch"))
        .unwrap();
    for i in 0..30 {
        let name: &'static str = Box::leak(format!("FillerGate{i}").into_boxed_str());
        registry.register(FeatureSpec::alpha(name)).unwrap();
    }
    let config = ConfigLoader::new()
        .with_yaml("kueue.yaml", KUEUE_YAML)
        .load(registry)
        .unwrap();
    let gates = config.gates().clone();
    let table = config.strategies().clone();
    let pods = ResourceKey::new("", "v1", "Pod", "pods");
    let unknown = ResourceKey::new("apps", "v1", "Deployment", "deployments");
    let pod_row = table.for_resource(&pods);

    c.bench_function("enabled(feature)", |b| {
        b.iter(|| gates.enabled(black_box(strict_patch)))
    });
    c.bench_function("enabled_by_name(str)", |b| {
        b.iter(|| gates.enabled_by_name(black_box("RemoveFinalizersWithStrictPatch")))
    });
    c.bench_function("ResourceStrategies::get(op)", |b| {
        b.iter(|| {
            black_box(&pod_row)
                .get(black_box(Operation::RemoveFinalizer))
                .strategy
        })
    });
    c.bench_function("StrategyTable::for_resource(pods)", |b| {
        b.iter(|| {
            table
                .for_resource(black_box(&pods))
                .strategy(Operation::RemoveFinalizer)
        })
    });
    c.bench_function("StrategyTable::for_resource(unknown)", |b| {
        b.iter(|| {
            table
                .for_resource(black_box(&unknown))
                .strategy(Operation::RemoveFinalizer)
        })
    });
}

criterion_group!(benches, lookup);
criterion_main!(benches);
