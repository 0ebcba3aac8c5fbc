//! Which source wins: defaults < YAML files < `CONCORD_FEATURE_GATES` <
//! `CONCORD_GATE_*` < `--feature-gates`, and where each value came from.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use concord_featuregates::{
    ConfigLoader, Feature, FeatureRegistry, FeatureSpec, Origin, Stage, StageChange,
};

const STRICT_PATCH: FeatureSpec = FeatureSpec::beta("RemoveFinalizersWithStrictPatch")
    .with_history(&[StageChange::new(Stage::Beta, "0.1")]);
const ALPHA: FeatureSpec = FeatureSpec::alpha("FancyAlpha");

fn registry() -> (FeatureRegistry, Feature, Feature) {
    let mut registry = FeatureRegistry::new();
    let strict = registry.register(STRICT_PATCH).unwrap();
    let alpha = registry.register(ALPHA).unwrap();
    (registry, strict, alpha)
}

struct Case {
    name: &'static str,
    yaml: Option<&'static str>,
    env: &'static [(&'static str, &'static str)],
    flag: Option<&'static str>,
    strict: bool,
    alpha: bool,
    strict_origin: &'static str,
}

const CASES: &[Case] = &[
    Case {
        name: "defaults",
        yaml: None,
        env: &[],
        flag: None,
        strict: true,
        alpha: false,
        strict_origin: "built-in default",
    },
    Case {
        name: "file over default",
        yaml: Some("featureGates:\n  RemoveFinalizersWithStrictPatch: false\n"),
        env: &[],
        flag: None,
        strict: false,
        alpha: false,
        strict_origin: "file `c.yaml` line 2, key `featureGates.RemoveFinalizersWithStrictPatch`",
    },
    Case {
        name: "env list over file",
        yaml: Some("featureGates:\n  RemoveFinalizersWithStrictPatch: false\n"),
        env: &[(
            "CONCORD_FEATURE_GATES",
            "RemoveFinalizersWithStrictPatch=true",
        )],
        flag: None,
        strict: true,
        alpha: false,
        strict_origin: "environment variable `CONCORD_FEATURE_GATES`",
    },
    Case {
        name: "per-gate variable over env list",
        yaml: None,
        env: &[
            (
                "CONCORD_FEATURE_GATES",
                "RemoveFinalizersWithStrictPatch=true",
            ),
            ("CONCORD_GATE_REMOVE_FINALIZERS_WITH_STRICT_PATCH", "false"),
        ],
        flag: None,
        strict: false,
        alpha: false,
        strict_origin: "environment variable `CONCORD_GATE_REMOVE_FINALIZERS_WITH_STRICT_PATCH`",
    },
    Case {
        name: "flag over everything",
        yaml: Some("featureGates:\n  RemoveFinalizersWithStrictPatch: true\n"),
        env: &[("CONCORD_GATE_RemoveFinalizersWithStrictPatch", "true")],
        flag: Some("RemoveFinalizersWithStrictPatch=false"),
        strict: false,
        alpha: false,
        strict_origin: "flag `--feature-gates=RemoveFinalizersWithStrictPatch=false`",
    },
    Case {
        name: "AllAlpha from flag sets alpha gates",
        yaml: None,
        env: &[],
        flag: Some("AllAlpha=true"),
        strict: true,
        alpha: true,
        strict_origin: "built-in default",
    },
    Case {
        name: "explicit gate in file wins over AllBeta in flag",
        yaml: Some("featureGates:\n  RemoveFinalizersWithStrictPatch: true\n"),
        env: &[],
        flag: Some("AllBeta=false"),
        strict: true,
        alpha: false,
        strict_origin: "file `c.yaml` line 2, key `featureGates.RemoveFinalizersWithStrictPatch`",
    },
    Case {
        name: "AllBeta applies to beta gates nobody named",
        yaml: None,
        env: &[("CONCORD_GATE_ALL_BETA", "0")],
        flag: None,
        strict: false,
        alpha: false,
        strict_origin: "environment variable `CONCORD_GATE_ALL_BETA`",
    },
    Case {
        name: "later item of the flag wins",
        yaml: None,
        env: &[],
        flag: Some("RemoveFinalizersWithStrictPatch=false,RemoveFinalizersWithStrictPatch=true"),
        strict: true,
        alpha: false,
        strict_origin: "flag `--feature-gates=RemoveFinalizersWithStrictPatch=true`",
    },
];

#[test]
fn sources_merge_in_rising_precedence_and_remember_origin() {
    for case in CASES {
        let (registry, strict, alpha) = registry();
        let mut loader = ConfigLoader::new().with_env_vars(case.env.iter().copied());
        if let Some(yaml) = case.yaml {
            loader = loader.with_yaml("c.yaml", yaml);
        }
        if let Some(flag) = case.flag {
            loader = loader.with_feature_gates(flag);
        }
        let config = loader
            .load(registry)
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let gates = config.gates();
        assert_eq!(gates.enabled(strict), case.strict, "{}", case.name);
        assert_eq!(gates.enabled(alpha), case.alpha, "{}", case.name);
        assert_eq!(
            gates.state(strict).origin.to_string(),
            case.strict_origin,
            "{}",
            case.name
        );
    }
}

#[test]
fn later_files_win_over_earlier_ones() {
    let (registry, strict, _) = registry();
    let config = ConfigLoader::new()
        .with_yaml(
            "base.yaml",
            "featureGates:\n  RemoveFinalizersWithStrictPatch: false\n",
        )
        .with_yaml(
            "overlay.yaml",
            "featureGates:\n  RemoveFinalizersWithStrictPatch: true\n",
        )
        .load(registry)
        .unwrap();
    let origin = config.gates().state(strict).origin.clone();
    assert!(matches!(origin, Origin::File { path, .. } if path.ends_with("overlay.yaml")));
}

#[test]
fn process_environment_and_file_are_read_at_load() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("concord.yaml", "featureGates:\n  FancyAlpha: true\n")?;
        jail.set_env("CONCORD_GATE_REMOVE_FINALIZERS_WITH_STRICT_PATCH", "false");
        let (registry, strict, alpha) = registry();
        let config = ConfigLoader::new()
            .with_file("concord.yaml")
            .with_env()
            .load(registry)
            .unwrap();
        assert!(config.gates().enabled(alpha));
        assert!(!config.gates().enabled(strict));
        Ok(())
    });
}

#[test]
fn setting_ga_gate_from_a_source_warns_with_its_origin() {
    let mut registry = FeatureRegistry::new();
    registry.register(FeatureSpec::ga("OldNews")).unwrap();
    let config = ConfigLoader::new()
        .with_feature_gates("OldNews=true")
        .load(registry)
        .unwrap();
    let warnings: Vec<String> = config.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "setting GA feature gate `OldNews`=true (flag `--feature-gates=OldNews=true`); it will be removed in a future release"
        ]
    );
}

#[test]
fn empty_feature_gates_key_is_accepted() {
    let (registry, strict, _) = registry();
    let config = ConfigLoader::new()
        .with_yaml("c.yaml", "featureGates:\n  # A: true\n")
        .load(registry)
        .unwrap();
    assert!(config.gates().enabled(strict));
}
