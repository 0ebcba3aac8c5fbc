//! Property tests: arbitrary YAML bytes and `--feature-gates` strings never
//! panic the loader, and every rejection names its source.
//!
//! 6 properties × 512 cases = 3,072 generated inputs per run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use concord_featuregates::{
    ConfigError, ConfigLoader, FeatureRegistry, FeatureSpec, Origin, Problem,
};
use proptest::prelude::*;

const CASES: u32 = 512;

fn registry() -> FeatureRegistry {
    let mut registry = FeatureRegistry::new();
    registry
        .register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch"))
        .unwrap();
    registry.register(FeatureSpec::alpha("FancyAlpha")).unwrap();
    registry.register(FeatureSpec::ga("LockedOn")).unwrap();
    registry
}

fn assert_names_source(error: &ConfigError, file: Option<&str>, flag: bool) {
    assert!(!error.problems.is_empty());
    for problem in &error.problems {
        let named = match (problem, problem.origin()) {
            (_, Some(Origin::File { path, .. })) => file.is_some_and(|f| path.ends_with(f)),
            (_, Some(Origin::Flag { .. })) => flag,
            (_, Some(_)) => false,
            (
                Problem::UnreadableFile { .. }
                | Problem::NotUtf8 { .. }
                | Problem::MalformedYaml { .. },
                None,
            ) => file.is_some_and(|f| problem.to_string().contains(&format!("`{f}`"))),
            (_, None) => false,
        };
        assert!(named, "problem does not name its source: {problem}");
    }
}

fn load_yaml(bytes: &[u8]) {
    if let Err(error) = ConfigLoader::new()
        .with_yaml("fuzz.yaml", bytes)
        .load(registry())
    {
        assert_names_source(&error, Some("fuzz.yaml"), false);
    }
}

fn load_flag(flag: &str) {
    if let Err(error) = ConfigLoader::new()
        .with_feature_gates(flag)
        .load(registry())
    {
        assert_names_source(&error, None, true);
    }
}

/// Text close enough to the schema that it gets past the YAML parser often.
fn yamlish() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("featureGates".to_owned()),
        Just("strategies".to_owned()),
        Just("default".to_owned()),
        Just("resources".to_owned()),
        Just("operations".to_owned()),
        Just("remove-finalizer".to_owned()),
        Just("other".to_owned()),
        Just("pods".to_owned()),
        Just("gate".to_owned()),
        Just("enabled".to_owned()),
        Just("onConflict".to_owned()),
        Just("retry".to_owned()),
        Just("steps".to_owned()),
        Just("RemoveFinalizersWithStrictPatch".to_owned()),
        Just("AllAlpha".to_owned()),
        "[a-zA-Z./-]{0,12}",
    ];
    let value = prop_oneof![
        Just("strict".to_owned()),
        Just("apply".to_owned()),
        Just("true".to_owned()),
        Just("requeue".to_owned()),
        Just("{strategy: update, retry: {steps: 3}}".to_owned()),
        Just("".to_owned()),
        "-?[0-9.]{1,6}",
        "[ -~]{0,16}",
    ];
    prop::collection::vec((0usize..4, key, value), 0..24).prop_map(|lines| {
        lines
            .into_iter()
            .map(|(depth, key, value)| format!("{}{key}: {value}\n", "  ".repeat(depth)))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        load_yaml(&bytes);
    }

    #[test]
    fn schema_like_yaml_never_panics(text in yamlish()) {
        load_yaml(text.as_bytes());
    }

    #[test]
    fn deep_nesting_never_panics(depth in 1usize..2_000, flow in any::<bool>()) {
        let text = if flow {
            format!("strategies: {}x{}", "{a: ".repeat(depth), "}".repeat(depth))
        } else {
            (0..depth).map(|d| format!("{}k{d}:\n", " ".repeat(d))).collect()
        };
        load_yaml(text.as_bytes());
    }

    #[test]
    fn huge_values_never_panic(len in 0usize..100_000, key in any::<bool>()) {
        let big = "x".repeat(len);
        let text = if key {
            format!("featureGates:\n  {big}: true\n")
        } else {
            format!("strategies:\n  default: {big}\n")
        };
        load_yaml(text.as_bytes());
    }

    #[test]
    fn arbitrary_flag_strings_never_panic(flag in any::<String>()) {
        load_flag(&flag);
    }

    #[test]
    fn flag_like_strings_never_panic(flag in "(( ?[A-Za-z]{0,12}(=[A-Za-z0-9 ]{0,6})?),){0,8}") {
        load_flag(&flag);
    }
}
