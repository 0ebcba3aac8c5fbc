//! What makes a ring one deployment's: its name (`--shard-ring`, else
//! `--leader-election-id`), the manager, the shard mode, the protocol
//! version and the watched scope. Every membership Lease carries this
//! configuration; a replica counts as members only the Leases whose
//! configuration equals its own.

use std::collections::BTreeSet;

use kube::core::ApiResource;
use serde::{Deserialize, Serialize};

use super::ShardingMode;
use super::names::sanitize;
use super::ring::fingerprint;

/// The version of the membership protocol (the Lease layout and the
/// `acked` annotation). Version 1 was the Lease labelled only with the
/// manager's name; a replica never shares a ring across versions.
pub(crate) const RING_VERSION: u32 = 2;

/// The configuration of one ring, as written into the
/// `shard.concord.dev/config` annotation of every member's Lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RingConfig {
    /// [`RING_VERSION`] of the replica that wrote it.
    pub(crate) version: u32,
    /// The ring's name: `--shard-ring`, else `--leader-election-id`.
    pub(crate) ring: String,
    /// The manager's name (its field manager).
    pub(crate) manager: String,
    /// `hash` or `label`.
    pub(crate) mode: String,
    /// What the replica's controllers watch, one `group/version/Kind@namespace`
    /// per controller (`*` for every namespace), sorted.
    pub(crate) scope: BTreeSet<String>,
}

impl RingConfig {
    pub(crate) fn new(ring: &str, manager: &str, mode: ShardingMode) -> Self {
        RingConfig {
            version: RING_VERSION,
            ring: ring.to_owned(),
            manager: manager.to_owned(),
            mode: mode.as_str().to_owned(),
            scope: BTreeSet::new(),
        }
    }

    /// Adds what one controller watches: `resource` in `namespace`
    /// (`None`: every namespace, or a cluster-scoped type).
    pub(crate) fn watch(&mut self, resource: &ApiResource, namespace: Option<&str>) {
        self.scope.insert(format!(
            "{}/{}@{}",
            resource.api_version,
            resource.kind,
            namespace.unwrap_or("*")
        ));
    }

    /// The ring's label value and Lease name prefix.
    pub(crate) fn ring_id(&self) -> String {
        sanitize(&self.ring)
    }

    /// The annotation text (JSON).
    pub(crate) fn annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses an annotation; `None` when it is not a configuration this
    /// version can read.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// Eight hex digits that differ between configurations: part of every
    /// name the ring owns, so two configurations never share a Lease.
    pub(crate) fn fingerprint(&self) -> String {
        fingerprint(self.annotation().as_bytes())
    }

    /// The prefix of every membership Lease name of this configuration.
    pub(crate) fn lease_prefix(&self) -> String {
        format!("{}-{}", self.ring_id(), self.fingerprint())
    }

    /// The name of the sharder's Lease (`label` mode).
    pub(crate) fn sharder_lease(&self) -> String {
        format!("{}-sharder", self.lease_prefix())
    }

    /// The label key that carries an object's owner (`label` mode).
    pub(crate) fn label_key(&self) -> String {
        format!("shard.concord.dev/{}", self.ring_id())
    }

    /// Whether a replica of `other` may reconcile an object a replica of
    /// this configuration watches: the same kind (any version) in the
    /// same namespace, or either watching every namespace.
    pub(crate) fn overlaps(&self, other: &RingConfig) -> bool {
        self.scope.iter().any(|mine| {
            other
                .scope
                .iter()
                .any(|theirs| scope_overlaps(mine, theirs))
        })
    }

    /// How `other` differs from this configuration, for the log.
    pub(crate) fn differences(&self, other: &RingConfig) -> String {
        let mut out = Vec::new();
        if self.version != other.version {
            out.push(format!(
                "ring version {} (ours {})",
                other.version, self.version
            ));
        }
        if self.mode != other.mode {
            out.push(format!("mode {} (ours {})", other.mode, self.mode));
        }
        if self.manager != other.manager {
            out.push(format!("manager {} (ours {})", other.manager, self.manager));
        }
        if self.scope != other.scope {
            out.push(format!(
                "scope [{}] (ours [{}])",
                join(&other.scope),
                join(&self.scope)
            ));
        }
        if self.ring != other.ring {
            out.push(format!("ring {} (ours {})", other.ring, self.ring));
        }
        out.join(", ")
    }
}

fn join(scope: &BTreeSet<String>) -> String {
    scope.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// `group/version/Kind@namespace` entries overlap when the group and kind
/// match and the namespaces do (or either is `*`).
fn scope_overlaps(a: &str, b: &str) -> bool {
    let split = |s: &str| -> (String, String) {
        let (resource, namespace) = s.rsplit_once('@').unwrap_or((s, "*"));
        // group/version/Kind or version/Kind: drop the version.
        let mut parts: Vec<&str> = resource.split('/').collect();
        if parts.len() >= 2 {
            parts.remove(parts.len() - 2);
        }
        (parts.join("/"), namespace.to_owned())
    };
    let (ra, na) = split(a);
    let (rb, nb) = split(b);
    ra == rb && (na == "*" || nb == "*" || na == nb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn config(namespace: Option<&str>) -> RingConfig {
        let mut config = RingConfig::new("concord-operator", "argo", ShardingMode::Hash);
        config.watch(&ApiResource::erase::<ConfigMap>(&()), namespace);
        config
    }

    #[test]
    fn deployments_watching_different_namespaces_get_different_leases() {
        let a = config(Some("two-a"));
        let b = config(Some("two-b"));
        assert_ne!(a.lease_prefix(), b.lease_prefix());
        assert_ne!(a.sharder_lease(), b.sharder_lease());
        assert_eq!(
            a.ring_id(),
            b.ring_id(),
            "one ring name, two configurations"
        );
        assert!(!a.overlaps(&b));
        assert!(a.differences(&b).contains("scope [v1/ConfigMap@two-b]"));
    }

    #[test]
    fn every_namespace_overlaps_one_namespace_of_the_same_kind() {
        assert!(config(None).overlaps(&config(Some("x"))));
        assert!(config(Some("x")).overlaps(&config(Some("x"))));
        assert!(scope_overlaps(
            "apps/v1/Deployment@x",
            "apps/v1beta1/Deployment@x"
        ));
        assert!(!scope_overlaps("apps/v1/Deployment@x", "v1/ConfigMap@x"));
    }

    #[test]
    fn a_configuration_survives_its_annotation() {
        let a = config(Some("two-a"));
        assert_eq!(RingConfig::parse(&a.annotation()), Some(a.clone()));
        assert_eq!(RingConfig::parse("not json"), None);
        let mut label = a.clone();
        label.mode = "label".into();
        assert_ne!(label.fingerprint(), a.fingerprint());
        assert!(a.differences(&label).contains("mode label (ours hash)"));
    }
}
