//! Declares the Kueue-like gate, loads `book/src/feature-gates/kueue.yaml`
//! with the environment and a `--feature-gates` value, and prints the
//! effective configuration with its reasons.
//!
//! Needs nothing but this repository. Run:
//! `cargo run -p kube-concord-featuregates --example feature_gates -- RemoveFinalizersWithStrictPatch=false`

#![allow(clippy::print_stdout)]

use std::error::Error;

use concord_featuregates::{
    ConfigLoader, FeatureRegistry, FeatureSpec, Operation, ResourceKey, Stage, StageChange,
    StrategyName, register_framework_gates,
};

// ANCHOR: declare
/// Remove our finalizer from pods with an optimistic lock.
///
/// owner: kueue-like maintainers; beta: 0.1.
pub const REMOVE_FINALIZERS_WITH_STRICT_PATCH: FeatureSpec =
    FeatureSpec::beta("RemoveFinalizersWithStrictPatch")
        .with_owner("kueue-like maintainers")
        .with_history(&[StageChange::new(Stage::Beta, "0.1")])
        .with_description("remove our finalizer with `strict` instead of `lax`");
// ANCHOR_END: declare

fn main() -> Result<(), Box<dyn Error>> {
    let flag = std::env::args().nth(1).unwrap_or_default();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../book/src/feature-gates/kueue.yaml"
    );

    // ANCHOR: load
    let mut registry = FeatureRegistry::new();
    register_framework_gates(&mut registry)?;
    let strict_patch = registry.register(REMOVE_FINALIZERS_WITH_STRICT_PATCH)?;

    let config = ConfigLoader::new()
        .with_file(file)
        .with_env()
        .with_feature_gates(flag)
        .load(registry)?; // one error listing every problem
    for warning in config.warnings() {
        eprintln!("warning: {warning}");
    }
    // ANCHOR_END: load

    // ANCHOR: lookup
    // Once per controller: no string work per write afterwards.
    let pods = config
        .strategies()
        .for_resource(&ResourceKey::new("", "v1", "Pod", "pods"));
    // On the hot path: an array index and an atomic load.
    let remove = pods.get(Operation::RemoveFinalizer);
    if config.gates().enabled(strict_patch) {
        assert_eq!(remove.strategy, StrategyName::Strict);
    }
    // ANCHOR_END: lookup

    // ANCHOR: explain
    println!("{}", config.explain()); // text, with a reason for every cell
    println!("{}", config.explain().to_yaml()); // a file that loads back the same
    // ANCHOR_END: explain
    Ok(())
}
