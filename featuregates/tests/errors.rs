//! Every error message, each naming the file and key, the variable or the
//! flag at fault, and all of them reported at once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use concord_featuregates::{ConfigLoader, FeatureRegistry, FeatureSpec, Problem};

fn registry() -> FeatureRegistry {
    let mut registry = FeatureRegistry::new();
    registry
        .register(FeatureSpec::beta("RemoveFinalizersWithStrictPatch"))
        .unwrap();
    registry.register(FeatureSpec::ga("LockedOn")).unwrap();
    registry
}

fn yaml_problems(yaml: &[u8]) -> Vec<String> {
    match ConfigLoader::new()
        .with_yaml("c.yaml", yaml)
        .load(registry())
    {
        Ok(_) => Vec::new(),
        Err(error) => error.problems.iter().map(ToString::to_string).collect(),
    }
}

/// (YAML, the one message expected).
const YAML_CASES: &[(&str, &str)] = &[
    (
        "a: [\n",
        "malformed YAML in config file `c.yaml`: did not find expected node content at line 2 column 1, while parsing a flow node",
    ),
    (
        "just text",
        "malformed YAML in config file `c.yaml`: invalid type: string \"just text\", expected a map",
    ),
    (
        "colour: blue\n",
        "unknown key `colour`, expected one of featureGates, strategies (file `c.yaml` line 1, key `colour`)",
    ),
    (
        "featureGates: [A]\n",
        "expected a mapping of gate names to true or false, found a list (file `c.yaml` line 1, key `featureGates`)",
    ),
    (
        "featureGates:\n  Nope: true\n",
        "unknown feature gate `Nope` (file `c.yaml` line 2, key `featureGates.Nope`)",
    ),
    (
        "featureGates:\n  LockedOn: false\n",
        "feature gate `LockedOn` is locked to true and cannot be set to false (file `c.yaml` line 2, key `featureGates.LockedOn`)",
    ),
    (
        "featureGates:\n  RemoveFinalizersWithStrictPatch: \"yes\"\n",
        "feature gate `RemoveFinalizersWithStrictPatch` must be true or false, found `yes` (file `c.yaml` line 2, key `featureGates.RemoveFinalizersWithStrictPatch`)",
    ),
    (
        "featureGates:\n  RemoveFinalizersWithStrictPatch: 1\n",
        "feature gate `RemoveFinalizersWithStrictPatch` must be true or false, found the number 1 (file `c.yaml` line 2, key `featureGates.RemoveFinalizersWithStrictPatch`)",
    ),
    (
        "strategies: strict\n",
        "expected a mapping, found `strict` (file `c.yaml` line 1, key `strategies`)",
    ),
    (
        "strategies:\n  fallback: lax\n",
        "unknown key `fallback`, expected one of default, operations, resources (file `c.yaml` line 2, key `strategies.fallback`)",
    ),
    (
        "strategies:\n  default: optimistic\n",
        "unknown strategy `optimistic`, expected one of lax, strict, update, locked, apply, guarded (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  default: 3\n",
        "expected a strategy name or a mapping with `strategy`, found the number 3 (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  resources:\n    Pod: {default: lax}\n",
        "unknown resource form `Pod`, expected plural[.group] (`pods`, `workloads.kueue.x-k8s.io`), group/version/Kind (`apps/v1/Deployment`, `v1/Pod`) or group/Kind (`apps/Deployment`) (file `c.yaml` line 3, key `strategies.resources.Pod`)",
    ),
    (
        "strategies:\n  resources:\n    pods: {fallback: lax}\n",
        "unknown key `fallback`, expected one of default, operations (file `c.yaml` line 3, key `strategies.resources.pods.fallback`)",
    ),
    (
        "strategies:\n  operations:\n    labels: lax\n",
        "unknown operation `labels`, expected one of add-finalizer, remove-finalizer, metadata, status, other, apply-owned, create, delete (file `c.yaml` line 3, key `strategies.operations.labels`)",
    ),
    (
        "strategies:\n  operations:\n    other: apply\n",
        "strategy `apply` cannot serve operation `other`: server-side apply cannot express an arbitrary closure (file `c.yaml` line 3, key `strategies.operations.other`)",
    ),
    (
        "strategies:\n  resources:\n    configmaps:\n      operations:\n        apply-owned: strict\n",
        "strategy `strict` cannot serve operation `apply-owned`: only server-side apply (`apply`) can create or update a whole owned child (file `c.yaml` line 5, key `strategies.resources.configmaps.operations.apply-owned`)",
    ),
    (
        "strategies:\n  resources:\n    pods:\n      operations:\n        delete: locked\n",
        "strategy `locked` cannot serve operation `delete`: only `lax`, `strict`, `update` and `guarded` create and delete objects (file `c.yaml` line 5, key `strategies.resources.pods.operations.delete`)",
    ),
    (
        "strategies:\n  operations:\n    create: {strategy: strict, onConflict: retry}\n",
        "invalid strategy rule: `onConflict` and `retry` do not apply to `create` or `delete`: a delete whose copy is stale hands the object back to the reconciler, and a create has nothing to retry onto (file `c.yaml` line 3, key `strategies.operations.create`)",
    ),
    (
        "strategies:\n  default: apply\n",
        "strategy `apply` cannot serve operation `other`: server-side apply cannot express an arbitrary closure (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  default: {strategy: lax, onConflict: requeue}\n",
        "strategy `lax` takes no conflict policy, only strict, update and guarded do (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, onConflict: shrug}\n",
        "unknown conflict policy `shrug`, expected retry or requeue (file `c.yaml` line 2, key `strategies.default.onConflict`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, retry: {steps: 0}}\n",
        "invalid retry setting: `steps` must be a whole number from 1 to 4294967295, found the number 0 (file `c.yaml` line 2, key `strategies.default.retry.steps`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, retry: {initial: 10}}\n",
        "invalid retry setting: `initial` must be a duration such as `10ms`, found the number 10 (file `c.yaml` line 2, key `strategies.default.retry.initial`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, retry: {cap: 10 parsecs}}\n",
        "invalid retry setting: duration `10 parsecs` needs a unit: ns, us, ms, s, m or h (file `c.yaml` line 2, key `strategies.default.retry.cap`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, retry: {factor: 0.5}}\n",
        "invalid retry setting: `factor` must be a number of at least 1.0, found the number 0.5 (file `c.yaml` line 2, key `strategies.default.retry.factor`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, retry: {jitter: -1}}\n",
        "invalid retry setting: `jitter` must be a number of at least 0.0, found the number -1 (file `c.yaml` line 2, key `strategies.default.retry.jitter`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, retry: {tries: 3}}\n",
        "unknown key `tries`, expected one of steps, initial, factor, jitter, cap (file `c.yaml` line 2, key `strategies.default.retry.tries`)",
    ),
    (
        "strategies:\n  default: {strategy: strict, onConflict: requeue, retry: {steps: 2}}\n",
        "invalid strategy rule: `retry` settings contradict `onConflict: requeue` (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  default: {onConflict: requeue}\n",
        "invalid strategy rule: missing `strategy` (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  default: {gate: RemoveFinalizersWithStrictPatch}\n",
        "invalid strategy rule: a gated rule needs `enabled`, `disabled` or both (file `c.yaml` line 2, key `strategies.default`)",
    ),
    (
        "strategies:\n  default: {gate: NoSuchGate, enabled: strict}\n",
        "unknown feature gate `NoSuchGate` (file `c.yaml` line 2, key `strategies.default.gate`)",
    ),
    (
        "strategies:\n  default: {gate: RemoveFinalizersWithStrictPatch, enabled: strict, on: lax}\n",
        "unknown key `on`, expected one of gate, enabled, disabled (file `c.yaml` line 2, key `strategies.default.on`)",
    ),
];

#[test]
fn each_mistake_yields_one_message_naming_file_line_and_key() {
    for (yaml, expected) in YAML_CASES {
        assert_eq!(
            yaml_problems(yaml.as_bytes()),
            [*expected],
            "for YAML:\n{yaml}"
        );
    }
}

#[test]
fn file_level_problems_name_the_file() {
    assert_eq!(
        yaml_problems(b"featureGates:\n  A: \xff\n"),
        ["config file `c.yaml` is not valid UTF-8 (bad byte at offset 19)"]
    );
    let error = ConfigLoader::new()
        .with_file("/nonexistent/concord.yaml")
        .load(registry())
        .unwrap_err();
    assert_eq!(
        error.problems[0].to_string(),
        "cannot read config file `/nonexistent/concord.yaml`: No such file or directory (os error 2)"
    );
    let nested = format!("featureGates: {}1{}", "[".repeat(200), "]".repeat(200));
    let problems = yaml_problems(nested.as_bytes());
    assert!(
        problems[0].contains("recursion limit exceeded"),
        "{problems:?}"
    );
}

/// (flag, environment, the one message expected).
type EnvVars = &'static [(&'static str, &'static str)];

const FLAG_AND_ENV_CASES: &[(&str, EnvVars, &str)] = &[
    (
        "Nope=true",
        &[],
        "unknown feature gate `Nope` (flag `--feature-gates=Nope=true`)",
    ),
    (
        "RemoveFinalizersWithStrictPatch",
        &[],
        "missing bool value for `RemoveFinalizersWithStrictPatch` (flag `--feature-gates=RemoveFinalizersWithStrictPatch`)",
    ),
    (
        "RemoveFinalizersWithStrictPatch=maybe",
        &[],
        "feature gate `RemoveFinalizersWithStrictPatch` must be true or false, found `maybe` (flag `--feature-gates=RemoveFinalizersWithStrictPatch=maybe`)",
    ),
    (
        "LockedOn=false",
        &[],
        "feature gate `LockedOn` is locked to true and cannot be set to false (flag `--feature-gates=LockedOn=false`)",
    ),
    (
        "",
        &[("CONCORD_GATE_NOPE", "true")],
        "unknown feature gate `NOPE` (environment variable `CONCORD_GATE_NOPE`)",
    ),
    (
        "",
        &[("CONCORD_GATE_LOCKED_ON", "off")],
        "feature gate `LockedOn` must be true or false, found `off` (environment variable `CONCORD_GATE_LOCKED_ON`)",
    ),
    (
        "",
        &[("CONCORD_FEATURE_GATES", "AllAlpha")],
        "missing bool value for `AllAlpha` (environment variable `CONCORD_FEATURE_GATES`)",
    ),
];

#[test]
fn flag_and_environment_mistakes_name_the_flag_item_or_variable() {
    for (flag, env, expected) in FLAG_AND_ENV_CASES {
        let error = ConfigLoader::new()
            .with_feature_gates(*flag)
            .with_env_vars(env.iter().copied())
            .load(registry())
            .unwrap_err();
        let problems: Vec<String> = error.problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems, [*expected], "flag {flag:?}, env {env:?}");
    }
}

#[test]
fn all_problems_are_reported_at_once_in_one_error() {
    let yaml = "featureGates:\n  Nope: true\nstrategies:\n  default: optimistic\n  resources:\n    Pod: {}\n";
    let error = ConfigLoader::new()
        .with_yaml("c.yaml", yaml)
        .with_env_vars([("CONCORD_GATE_ALSO_NOPE", "1")])
        .with_feature_gates("LockedOn=false")
        .load(registry())
        .unwrap_err();
    assert_eq!(error.problems.len(), 5, "{error}");
    assert!(
        error
            .problems
            .iter()
            .all(|problem| problem.origin().is_some())
    );
    let message = error.to_string();
    assert!(
        message.starts_with("invalid concord configuration, 5 problems:\n  - "),
        "{message}"
    );
    for needle in [
        "`Nope`",
        "`ALSO_NOPE`",
        "`LockedOn`",
        "`optimistic`",
        "`Pod`",
    ] {
        assert!(message.contains(needle), "{needle} missing from {message}");
    }
    assert!(matches!(error.problems[0], Problem::UnknownGate { .. }));
}
