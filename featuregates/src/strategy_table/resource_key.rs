use std::fmt;

/// Names the resource a controller writes, the way kube-rs's `ApiResource`
/// does; the strategy table matches it against the configured forms.
///
/// ```
/// use concord_featuregates::ResourceKey;
/// let pods = ResourceKey::new("", "v1", "Pod", "pods");
/// let workloads = ResourceKey::new("kueue.x-k8s.io", "v1beta1", "Workload", "workloads");
/// assert_eq!(workloads.to_string(), "workloads.kueue.x-k8s.io");
/// assert_eq!(pods.to_string(), "pods");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceKey {
    group: String,
    version: String,
    kind: String,
    plural: String,
}

impl ResourceKey {
    /// A resource key; `group` is empty for the core group.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
        plural: impl Into<String>,
    ) -> Self {
        ResourceKey {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
        }
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.group.as_str() {
            "" => f.write_str(&self.plural),
            group => write!(f, "{}.{group}", self.plural),
        }
    }
}

/// A resource as the configuration names it. Variants are in the order a
/// lookup tries them: the most specific first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ResourceSelector {
    GroupVersionKind {
        group: String,
        version: String,
        kind: String,
    },
    GroupKind {
        group: String,
        kind: String,
    },
    PluralGroup {
        plural: String,
        group: String,
    },
}

impl ResourceSelector {
    /// Parses `pods`, `workloads.kueue.x-k8s.io`, `apps/v1/Deployment`,
    /// `v1/Pod` or `apps/Deployment`.
    pub(crate) fn parse(form: &str) -> Option<Self> {
        let parts: Vec<&str> = form.split('/').collect();
        match parts.as_slice() {
            [plural_group] => {
                let (plural, group) = plural_group.split_once('.').unwrap_or((plural_group, ""));
                let plural_ok = is_dns_label(plural);
                let group_ok = !plural_group.contains('.') || group.split('.').all(is_dns_label);
                (plural_ok && group_ok).then(|| ResourceSelector::PluralGroup {
                    plural: plural.to_owned(),
                    group: group.to_owned(),
                })
            }
            [first, kind] if is_kind(kind) && is_version(first) => {
                Some(ResourceSelector::GroupVersionKind {
                    group: String::new(),
                    version: (*first).to_owned(),
                    kind: (*kind).to_owned(),
                })
            }
            [group, kind] if is_kind(kind) && is_group(group) => {
                Some(ResourceSelector::GroupKind {
                    group: (*group).to_owned(),
                    kind: (*kind).to_owned(),
                })
            }
            [group, version, kind] if is_group(group) && is_version(version) && is_kind(kind) => {
                Some(ResourceSelector::GroupVersionKind {
                    group: (*group).to_owned(),
                    version: (*version).to_owned(),
                    kind: (*kind).to_owned(),
                })
            }
            _ => None,
        }
    }

    pub(crate) fn matches(&self, key: &ResourceKey) -> bool {
        match self {
            ResourceSelector::GroupVersionKind {
                group,
                version,
                kind,
            } => *group == key.group && *version == key.version && *kind == key.kind,
            ResourceSelector::GroupKind { group, kind } => *group == key.group && *kind == key.kind,
            ResourceSelector::PluralGroup { plural, group } => {
                *plural == key.plural && *group == key.group
            }
        }
    }
}

fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

fn is_group(group: &str) -> bool {
    group.split('.').all(is_dns_label) && !is_version(group)
}

fn is_version(version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (major, suffix) = rest.split_at(digits);
    let suffix_ok = match suffix
        .strip_prefix("alpha")
        .or_else(|| suffix.strip_prefix("beta"))
    {
        Some(n) => !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
        None => suffix.is_empty(),
    };
    !major.is_empty() && suffix_ok
}

fn is_kind(kind: &str) -> bool {
    kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_every_documented_form() {
        let s = String::from;
        let cases = [
            (
                "pods",
                ResourceSelector::PluralGroup {
                    plural: s("pods"),
                    group: s(""),
                },
            ),
            (
                "workloads.kueue.x-k8s.io",
                ResourceSelector::PluralGroup {
                    plural: s("workloads"),
                    group: s("kueue.x-k8s.io"),
                },
            ),
            (
                "v1/Pod",
                ResourceSelector::GroupVersionKind {
                    group: s(""),
                    version: s("v1"),
                    kind: s("Pod"),
                },
            ),
            (
                "kueue.x-k8s.io/v1beta1/Workload",
                ResourceSelector::GroupVersionKind {
                    group: s("kueue.x-k8s.io"),
                    version: s("v1beta1"),
                    kind: s("Workload"),
                },
            ),
            (
                "apps/Deployment",
                ResourceSelector::GroupKind {
                    group: s("apps"),
                    kind: s("Deployment"),
                },
            ),
        ];
        for (form, expected) in cases {
            assert_eq!(ResourceSelector::parse(form), Some(expected), "{form}");
        }
    }

    #[test]
    fn parse_rejects_other_forms() {
        for form in [
            "",
            "Pod",
            "pods.",
            "PODS",
            "apps/v1/deployment",
            "a/b/c/D",
            "v1/",
            "/v1/Pod",
            "apps/vx/Deployment",
        ] {
            assert_eq!(ResourceSelector::parse(form), None, "{form}");
        }
    }

    #[test]
    fn selectors_match_their_resource_only() {
        let pods = ResourceKey::new("", "v1", "Pod", "pods");
        let deployments = ResourceKey::new("apps", "v1", "Deployment", "deployments");
        let pods_sel = ResourceSelector::parse("pods").unwrap();
        let core_pod = ResourceSelector::parse("v1/Pod").unwrap();
        let apps_kind = ResourceSelector::parse("apps/Deployment").unwrap();
        assert!(pods_sel.matches(&pods) && !pods_sel.matches(&deployments));
        assert!(core_pod.matches(&pods) && !core_pod.matches(&deployments));
        assert!(apps_kind.matches(&deployments) && !apps_kind.matches(&pods));
    }
}
