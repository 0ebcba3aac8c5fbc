//! The least RBAC rules an operator needs, derived from its strategy
//! table ([`Permissions`]).

use std::collections::{BTreeMap, BTreeSet};

use concord_featuregates::{Operation, ResourceKey, StrategyName, StrategyTable};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::Resource;
use kube::core::{ApiResource, ObjectMeta};

/// The least RBAC an operator needs, derived from what it watches and
/// writes and from the strategy the configuration chose for each write.
///
/// An operator declares what its code does — the resources its controllers
/// watch, the operations its reconcilers write, the children it applies —
/// and [`rules`](Self::rules) turns that into [`PolicyRule`]s using the
/// resolved [`StrategyTable`], so changing a strategy in the YAML changes
/// the verbs the operator asks for:
///
/// | strategy | verbs on the written resource |
/// | --- | --- |
/// | `lax` | `patch`, `get` |
/// | `strict` | `patch`, `get` (re-read after a conflict) |
/// | `update` | `update`, `get` (re-read after a conflict) |
/// | `locked` | `patch`, `get` (fresh read under the lock) |
/// | `apply` | `patch`, `get` (re-read when it falls back to a guarded JSON patch) |
///
/// Every strategy may `get` the object: after a `422` to a write that
/// carried the observed uid, a read tells a recreated object from an
/// invalid write. Status writes go to the `<resource>/status`
/// subresource; their re-reads go to the resource itself.
///
/// ```
/// use concord::rbac::Permissions;
/// use concord::featuregates::{ConfigLoader, FeatureRegistry, Operation};
/// use k8s_openapi::api::core::v1::Pod;
///
/// let config = ConfigLoader::new()
///     .with_yaml("c.yaml", "strategies: {default: update}")
///     .load(FeatureRegistry::new())?;
/// let rules = Permissions::new(config.strategies())
///     .watches::<Pod>()
///     .writes::<Pod>(&[Operation::RemoveFinalizer])
///     .rules();
/// assert_eq!(rules[0].resources.as_deref(), Some(&["pods".to_owned()][..]));
/// assert_eq!(rules[0].verbs, ["get", "list", "update", "watch"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Caveats
///
/// Only what is declared is granted: a write the reconciler makes through
/// [`Context::client`](crate::Context::client) directly must be declared
/// with [`verbs`](Self::verbs).
#[derive(Clone, Debug)]
pub struct Permissions<'a> {
    table: &'a StrategyTable,
    verbs: BTreeMap<(String, String), BTreeSet<&'static str>>,
    /// `label` sharding patches every watched resource.
    labels_watched: bool,
}

impl<'a> Permissions<'a> {
    /// No permissions yet; writes will be resolved against `table`.
    pub fn new(table: &'a StrategyTable) -> Self {
        Permissions {
            table,
            verbs: BTreeMap::new(),
            labels_watched: false,
        }
    }

    /// `K` is listed and watched by a controller (`get`, `list`, `watch`).
    #[must_use]
    pub fn watches<K: Resource<DynamicType = ()>>(self) -> Self {
        self.watches_resource(&ApiResource::erase::<K>(&()))
    }

    /// A resource known at run time (a
    /// [`DynamicObject`](kube::core::DynamicObject) controller's) is listed
    /// and watched, as [`watches`](Self::watches).
    #[must_use]
    pub fn watches_resource(self, resource: &ApiResource) -> Self {
        let labels = if self.labels_watched {
            &["patch"][..]
        } else {
            &[]
        };
        self.verbs(&resource.group, &resource.plural, &["get", "list", "watch"])
            .verbs(&resource.group, &resource.plural, labels)
    }

    /// `K` is written with these operations, each through the strategy the
    /// table chose for it.
    #[must_use]
    pub fn writes<K: Resource<DynamicType = ()>>(self, operations: &[Operation]) -> Self {
        self.writes_resource(&ApiResource::erase::<K>(&()), operations)
    }

    /// A resource known at run time is written with these operations, as
    /// [`writes`](Self::writes): its strategy table row is found by its
    /// group, version, kind and plural.
    #[must_use]
    pub fn writes_resource(mut self, resource: &ApiResource, operations: &[Operation]) -> Self {
        let key = ResourceKey::new(
            &resource.group,
            &resource.version,
            &resource.kind,
            &resource.plural,
        );
        let row = self.table.for_resource(&key);
        for &operation in operations {
            let verbs = match operation {
                // Every strategy that serves them sends one request, and
                // reads the object when it meets one of the same name
                // (`lax` create) or a stale copy (delete).
                Operation::Create => &["create", "get"][..],
                Operation::Delete => &["delete", "get"][..],
                _ => strategy_verbs(row.strategy(operation)),
            };
            let target = match operation {
                Operation::Status => format!("{}/status", resource.plural),
                _ => resource.plural.clone(),
            };
            let (reads, writes): (Vec<&'static str>, Vec<&'static str>) =
                verbs.iter().partition(|v| **v == "get");
            self = self.verbs(&resource.group, &resource.plural, &reads).verbs(
                &resource.group,
                &target,
                &writes,
            );
        }
        self
    }

    /// Children of type `K` are created or updated with server-side apply
    /// ([`Context::apply_owned`](crate::Context::apply_owned)): the verbs
    /// of the strategy the table chose for `apply-owned` (`apply`: `patch`,
    /// `get`), plus `create` for the first apply, which creates the child.
    #[must_use]
    pub fn applies<K: Resource<DynamicType = ()>>(self) -> Self {
        let resource = ApiResource::erase::<K>(&());
        self.writes::<K>(&[Operation::ApplyOwned]).verbs(
            &resource.group,
            &resource.plural,
            &["create"],
        )
    }

    /// Objects of type `K` are created
    /// ([`Context::create`](crate::Context::create),
    /// [`create_owned`](crate::Context::create_owned)): `create`, and `get`
    /// for the stored copy a `lax` create of an existing name reads.
    #[must_use]
    pub fn creates<K: Resource<DynamicType = ()>>(self) -> Self {
        self.writes::<K>(&[Operation::Create])
    }

    /// Objects of type `K` are deleted
    /// ([`Context::delete`](crate::Context::delete)): `delete`, and `get`
    /// to tell a stale copy from a gone object when a precondition fails.
    #[must_use]
    pub fn deletes<K: Resource<DynamicType = ()>>(self) -> Self {
        self.writes::<K>(&[Operation::Delete])
    }

    /// Events are published ([`Context::event`](crate::Context::event)):
    /// `create` and `patch` (for series) on `events.k8s.io` events.
    #[must_use]
    pub fn events(self) -> Self {
        self.verbs("events.k8s.io", "events", &["create", "patch"])
    }

    /// The manager runs with `--leader-elect`: `get`, `create` and `update`
    /// on `coordination.k8s.io` leases.
    #[must_use]
    pub fn leader_election(self) -> Self {
        self.verbs(
            "coordination.k8s.io",
            "leases",
            &["create", "get", "update"],
        )
    }

    /// The manager runs with `--shards` in `mode`. `hash` and `label`
    /// need, on `coordination.k8s.io` leases, `create`, `get`, `update`
    /// and `delete` (each replica's membership Lease, deleted when it
    /// leaves, and a long-expired member's) and `list` and `watch` (reading
    /// the ring); `label` and `auto` (which may fall back to labels) also
    /// `patch` on every resource declared with
    /// [`watches`](Self::watches) (before or after this call): the sharder
    /// labels each object for its owner. `off` needs nothing.
    ///
    /// A replica that cannot list the Leases refuses to start
    /// ([`Error::ShardMembership`](crate::Error::ShardMembership)).
    #[must_use]
    pub fn sharding(mut self, mode: crate::sharding::ShardingMode) -> Self {
        if !mode.is_on() {
            return self;
        }
        // `auto` may fall back to labels; `selector` writes nothing.
        if matches!(
            mode,
            crate::sharding::ShardingMode::Label | crate::sharding::ShardingMode::Auto
        ) {
            self.labels_watched = true;
            let watched: Vec<(String, String)> = self
                .verbs
                .iter()
                .filter(|(_, verbs)| verbs.contains("watch"))
                .map(|(key, _)| key.clone())
                .collect();
            for (group, resource) in watched {
                self = self.verbs(&group, &resource, &["patch"]);
            }
        }
        self.verbs(
            "coordination.k8s.io",
            "leases",
            &["create", "delete", "get", "list", "update", "watch"],
        )
    }

    /// The manager serves secure metrics (`--metrics-secure`): `create` on
    /// `authentication.k8s.io` tokenreviews and `authorization.k8s.io`
    /// subjectaccessreviews, to review each scrape. Both are
    /// cluster-scoped: grant these rules through a ClusterRole.
    #[must_use]
    pub fn secure_metrics(self) -> Self {
        self.verbs("authentication.k8s.io", "tokenreviews", &["create"])
            .verbs("authorization.k8s.io", "subjectaccessreviews", &["create"])
    }

    /// The manager makes its own webhook certificates
    /// ([`ManagerBuilder::with_managed_webhook_certificates`](crate::manager::ManagerBuilder::with_managed_webhook_certificates),
    /// `--webhook-cert-managed`): on `secrets`, `get` and what the table's
    /// strategies for `create` and `other` send (the CA Secret, in the
    /// manager's namespace); on `admissionregistration.k8s.io`
    /// `validatingwebhookconfigurations` and `mutatingwebhookconfigurations`
    /// and `apiextensions.k8s.io` `customresourcedefinitions`, `get` and
    /// what the strategy for `other` sends (the `caBundle` writes). Those
    /// three are cluster-scoped: grant them through a ClusterRole; the
    /// Secret rule belongs in a Role of the manager's namespace
    /// ([`cluster_scoped`](Self::cluster_scoped) tells them apart).
    #[must_use]
    pub fn managed_webhook_certificates(self) -> Self {
        use k8s_openapi::api::admissionregistration::v1::{
            MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
        };
        use k8s_openapi::api::core::v1::Secret;
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        self.writes::<Secret>(&[Operation::Create, Operation::Other])
            .writes::<ValidatingWebhookConfiguration>(&[Operation::Other])
            .writes::<MutatingWebhookConfiguration>(&[Operation::Other])
            .writes::<CustomResourceDefinition>(&[Operation::Other])
    }

    /// Splits the rules into those of namespaced resources (for a Role)
    /// and those of cluster-scoped ones concord knows (webhook
    /// configurations, CRDs, token and access reviews: for a ClusterRole).
    pub fn cluster_scoped(&self) -> (Vec<PolicyRule>, Vec<PolicyRule>) {
        const CLUSTER: &[(&str, &str)] = &[
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
            ),
            (
                "admissionregistration.k8s.io",
                "mutatingwebhookconfigurations",
            ),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ];
        let (cluster, namespaced): (BTreeMap<_, _>, BTreeMap<_, _>) = self
            .verbs
            .clone()
            .into_iter()
            .partition(|((group, resource), _)| {
                CLUSTER.contains(&(group.as_str(), resource.as_str()))
            });
        let rules = |verbs| {
            Permissions {
                table: self.table,
                verbs,
                labels_watched: self.labels_watched,
            }
            .rules()
        };
        (rules(namespaced), rules(cluster))
    }

    /// Any other `verbs` on `resource` (a plural, or `plural/subresource`)
    /// of API group `group` (empty for the core group).
    #[must_use]
    pub fn verbs(mut self, group: &str, resource: &str, verbs: &[&'static str]) -> Self {
        if verbs.is_empty() {
            return self;
        }
        self.verbs
            .entry((group.to_owned(), resource.to_owned()))
            .or_default()
            .extend(verbs.iter().copied());
        self
    }

    /// The rules, one per API group and verb set, sorted so the output is
    /// stable.
    pub fn rules(&self) -> Vec<PolicyRule> {
        let mut merged: BTreeMap<(&str, Vec<&str>), Vec<String>> = BTreeMap::new();
        for ((group, resource), verbs) in &self.verbs {
            merged
                .entry((group.as_str(), verbs.iter().copied().collect()))
                .or_default()
                .push(resource.clone());
        }
        merged
            .into_iter()
            .map(|((group, verbs), resources)| PolicyRule {
                api_groups: Some(vec![group.to_owned()]),
                resources: Some(resources),
                verbs: verbs.into_iter().map(str::to_owned).collect(),
                ..PolicyRule::default()
            })
            .collect()
    }

    /// The rules as a namespaced [`Role`].
    pub fn role(&self, name: &str, namespace: &str) -> Role {
        Role {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            rules: Some(self.rules()),
        }
    }
}

/// The ClusterRole a scraper of secure metrics is bound to: `get` on the
/// `/metrics` non-resource URL, what each scrape's SubjectAccessReview
/// asks about.
///
/// ```
/// let role = concord::rbac::metrics_reader("demo-metrics-reader");
/// let rule = &role.rules.as_deref().unwrap_or_default()[0];
/// assert_eq!(rule.non_resource_urls.as_deref(), Some(&["/metrics".to_owned()][..]));
/// assert_eq!(rule.verbs, ["get"]);
/// ```
pub fn metrics_reader(name: &str) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".to_owned()]),
            verbs: vec!["get".to_owned()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    }
}

/// The verbs a write through `strategy` may send, `get` included, as its
/// [description](concord_featuregates::StrategyDescription::verbs) declares them.
pub fn strategy_verbs(strategy: StrategyName) -> &'static [&'static str] {
    strategy.description().verbs
}

#[cfg(test)]
#[path = "rbac_tests.rs"]
mod tests;
