use std::fmt;

use kube::core::{ApiResource, DynamicObject};

/// Which object a write is about: resource, namespace (absent for
/// cluster-scoped resources) and name.
///
/// It names the object in errors and keys the per-object locks of the
/// `locked` strategy.
///
/// ```
/// use concord_strategies::ObjectKey;
/// let key = ObjectKey::new("pods", Some("default"), "web-0");
/// assert_eq!(key.to_string(), "pods default/web-0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The plural resource name, qualified by its API group unless it is a
    /// core resource (`pods`, `workloads.kueue.x-k8s.io`).
    pub resource: String,
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(
        resource: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        ObjectKey {
            resource: resource.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    /// The key of `object`, a member of `resource`.
    pub fn of(resource: &ApiResource, object: &DynamicObject) -> Self {
        ObjectKey {
            resource: qualified_plural(resource),
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone().unwrap_or_default(),
        }
    }
}

/// `plural` for the core group, `plural.group` otherwise.
pub(crate) fn qualified_plural(resource: &ApiResource) -> String {
    if resource.group.is_empty() {
        resource.plural.clone()
    } else {
        format!("{}.{}", resource.plural, resource.group)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.resource, ns, self.name),
            None => write!(f, "{} {}", self.resource, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_omits_namespace_of_cluster_scoped_objects() {
        assert_eq!(
            ObjectKey::new("namespaces", None, "kube-system").to_string(),
            "namespaces kube-system"
        );
    }

    #[test]
    fn of_qualifies_custom_resources_with_their_group() {
        let ar = ApiResource {
            group: "kueue.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "kueue.x-k8s.io/v1beta1".into(),
            kind: "Workload".into(),
            plural: "workloads".into(),
        };
        let obj = DynamicObject::new("w", &ar).within("team-a");
        let key = ObjectKey::of(&ar, &obj);
        assert_eq!(key.to_string(), "workloads.kueue.x-k8s.io team-a/w");
    }
}
