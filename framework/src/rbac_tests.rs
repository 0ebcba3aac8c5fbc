//! The RBAC rules' unit tests.

use super::*;
use concord_featuregates::{Config, ConfigLoader, FeatureRegistry};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

fn config(yaml: &str) -> Config {
    ConfigLoader::new()
        .with_yaml("test.yaml", yaml.as_bytes().to_vec())
        .load(FeatureRegistry::new())
        .unwrap()
}

fn verbs_of<'r>(rules: &'r [PolicyRule], resource: &str) -> Vec<&'r str> {
    let mut verbs: Vec<&str> = rules
        .iter()
        .filter(|r| r.resources.iter().flatten().any(|x| x == resource))
        .flat_map(|r| r.verbs.iter().map(String::as_str))
        .collect();
    verbs.sort_unstable();
    verbs
}

#[test]
fn secure_metrics_may_review_tokens_and_access() {
    let config = config("{}");
    let rules = Permissions::new(config.strategies())
        .secure_metrics()
        .rules();
    assert_eq!(verbs_of(&rules, "tokenreviews"), ["create"]);
    assert_eq!(verbs_of(&rules, "subjectaccessreviews"), ["create"]);
    let groups: Vec<_> = rules
        .iter()
        .flat_map(|r| r.api_groups.iter().flatten())
        .collect();
    assert_eq!(groups, ["authentication.k8s.io", "authorization.k8s.io"]);
}

#[test]
fn managed_certificates_may_keep_the_ca_secret_and_the_bundles() {
    let config = config("strategies: {default: update}");
    let permissions = Permissions::new(config.strategies()).managed_webhook_certificates();
    let (namespaced, cluster) = permissions.cluster_scoped();
    assert_eq!(
        verbs_of(&namespaced, "secrets"),
        ["create", "get", "update"]
    );
    for resource in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "customresourcedefinitions",
    ] {
        assert_eq!(
            verbs_of(&cluster, resource),
            ["get", "update"],
            "{resource}"
        );
        assert!(verbs_of(&namespaced, resource).is_empty(), "{resource}");
    }
    assert!(verbs_of(&cluster, "secrets").is_empty());
}

#[test]
fn update_strategy_needs_update_and_patch_strategies_need_patch() {
    let config = config(
        "strategies:\n  resources:\n    pods:\n      operations:\n        remove-finalizer: update\n        add-finalizer: lax\n",
    );
    let rules = Permissions::new(config.strategies())
        .writes::<Pod>(&[Operation::RemoveFinalizer, Operation::AddFinalizer])
        .rules();
    assert_eq!(verbs_of(&rules, "pods"), ["get", "patch", "update"]);
}

#[test]
fn status_writes_go_to_the_status_subresource() {
    let config = config("strategies: {default: strict}");
    let rules = Permissions::new(config.strategies())
        .writes::<Pod>(&[Operation::Status])
        .rules();
    assert_eq!(verbs_of(&rules, "pods/status"), ["patch"]);
    assert_eq!(verbs_of(&rules, "pods"), ["get"]);
}

#[test]
fn only_declared_resources_are_granted() {
    let config = config("strategies: {default: strict}");
    let rules = Permissions::new(config.strategies())
        .watches::<ConfigMap>()
        .events()
        .leader_election()
        .rules();
    assert!(verbs_of(&rules, "pods").is_empty());
    assert_eq!(verbs_of(&rules, "configmaps"), ["get", "list", "watch"]);
    assert_eq!(verbs_of(&rules, "leases"), ["create", "get", "update"]);
    let events = rules
        .iter()
        .find(|r| r.resources.iter().flatten().any(|x| x == "events"))
        .unwrap();
    assert_eq!(
        events.api_groups.as_deref(),
        Some(&["events.k8s.io".to_owned()][..])
    );
}

#[test]
fn sharding_reads_the_ring_and_label_mode_labels_what_is_watched() {
    use crate::sharding::ShardingMode;
    let config = config("strategies: {default: strict}");
    let off = Permissions::new(config.strategies())
        .watches::<ConfigMap>()
        .sharding(ShardingMode::Off)
        .rules();
    assert!(verbs_of(&off, "leases").is_empty());
    let hash = Permissions::new(config.strategies())
        .watches::<ConfigMap>()
        .leader_election()
        .sharding(ShardingMode::Hash)
        .rules();
    let ring = ["create", "delete", "get", "list", "update", "watch"];
    assert_eq!(verbs_of(&hash, "leases"), ring);
    assert_eq!(verbs_of(&hash, "configmaps"), ["get", "list", "watch"]);
    // Label mode patches what is watched, declared before or after.
    let label = Permissions::new(config.strategies())
        .watches::<ConfigMap>()
        .sharding(ShardingMode::Label)
        .watches::<Pod>()
        .rules();
    assert_eq!(verbs_of(&label, "leases"), ring);
    for watched in ["configmaps", "pods"] {
        assert_eq!(verbs_of(&label, watched), ["get", "list", "patch", "watch"]);
    }
}
