//! Smoke.
use concord_featuregates::*;

const KUEUE: FeatureSpec = FeatureSpec::beta("RemoveFinalizersWithStrictPatch");

#[test]
fn smoke() {
    let mut registry = FeatureRegistry::new();
    register_framework_gates(&mut registry).unwrap();
    registry.register(KUEUE).unwrap();
    let config = ConfigLoader::new()
        .with_file(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../book/src/feature-gates/kueue.yaml"
        ))
        .with_feature_gates("RemoveFinalizersWithStrictPatch=false")
        .load(registry)
        .unwrap();
    println!("{}", config.explain());
    println!("{}", config.explain().to_yaml());
}

#[test]
fn smoke_errors() {
    let mut registry = FeatureRegistry::new();
    register_framework_gates(&mut registry).unwrap();
    registry.register(KUEUE).unwrap();
    let yaml = "featureGates:\n  Nope: true\n  RemoveFinalizersWithStrictPatch: yes\nstrategies:\n  default: apply\n  resources:\n    Pod:\n      default: fast\n    pods:\n      operations:\n        frobnicate: lax\n        other: {strategy: lax, onConflict: retry}\n  extra: 1\n";
    let err = ConfigLoader::new()
        .with_yaml("bad.yaml", yaml)
        .with_env_vars([
            ("CONCORD_GATE_FOO_BAR", "true"),
            ("CONCORD_FEATURE_GATES", "AllAlpha=maybe,Bare"),
        ])
        .with_feature_gates("StrictWritesByDefault=false,X=1")
        .load(registry)
        .unwrap_err();
    println!("{err}");
    let err = ConfigLoader::new()
        .with_yaml("m.yaml", "a: [\n")
        .load(FeatureRegistry::new())
        .unwrap_err();
    println!("{err}");
}
