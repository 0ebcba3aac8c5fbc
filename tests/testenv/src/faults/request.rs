//! What a request to the API server asks for: its verb, resource, namespace
//! and name, read from the method and path as the API server's own
//! `RequestInfoFactory` does.

use std::fmt;

use http::Method;

/// The Kubernetes verb of a request, as RBAC names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verb {
    /// `GET` of one object.
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` of a collection with `watch=true`: a stream of events.
    Watch,
    /// `POST`.
    Create,
    /// `PUT`.
    Update,
    /// `PATCH` (merge, JSON, strategic or server-side apply).
    Patch,
    /// `DELETE` of one object.
    Delete,
    /// `DELETE` of a collection.
    DeleteCollection,
}

impl Verb {
    /// Whether this verb changes objects.
    pub fn is_write(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        })
    }
}

/// One resource request, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    pub(crate) verb: Verb,
    /// API group, empty for the core group.
    pub(crate) group: String,
    /// Plural resource name (`pods`).
    pub(crate) resource: String,
    /// Subresource (`status`), empty for the main resource.
    pub(crate) subresource: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    /// A watch that starts with the current objects (`sendInitialEvents`,
    /// a streaming list): its events up to the bookmark that ends them are
    /// the list, not changes.
    pub(crate) initial_events: bool,
}

impl RequestInfo {
    /// Whether `pattern` names this request's resource: `pods`,
    /// `pods/status`, `widgets.demo.concord.dev`, `widgets/status` or `*`.
    /// As in RBAC, `pods` does not cover `pods/status`.
    pub(crate) fn resource_is(&self, pattern: &str) -> bool {
        resource_matches(pattern, &self.group, &self.resource, &self.subresource)
    }

    /// The object key used to keep per-object decisions apart.
    pub(crate) fn key(&self) -> String {
        format!(
            "{}/{}",
            self.namespace.as_deref().unwrap_or(""),
            self.name.as_deref().unwrap_or("")
        )
    }
}

/// Whether `pattern` names `group`'s `resource` (and `subresource`).
pub(crate) fn resource_matches(
    pattern: &str,
    group: &str,
    resource: &str,
    subresource: &str,
) -> bool {
    if pattern == "*" {
        return true;
    }
    let (base, sub) = pattern.split_once('/').unwrap_or((pattern, ""));
    if sub != subresource && sub != "*" {
        return false;
    }
    base == resource || (!group.is_empty() && base == format!("{resource}.{group}"))
}

/// Parses a resource request; `None` for anything else (discovery,
/// `/version`, `/healthz`).
pub(crate) fn parse(method: &Method, path: &str, query: Option<&str>) -> Option<RequestInfo> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => ((*group).to_owned(), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        _ => (None, rest),
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, ""),
        [resource, name] => (*resource, Some((*name).to_owned()), ""),
        [resource, name, sub] => (*resource, Some((*name).to_owned()), *sub),
        _ => return None,
    };
    let has = |pairs: [&str; 2]| query.is_some_and(|q| q.split('&').any(|p| pairs.contains(&p)));
    let watching = has(["watch=true", "watch=1"]);
    let initial_events = watching && has(["sendInitialEvents=true", "sendInitialEvents=1"]);
    let verb = match (method.as_str(), name.is_some()) {
        ("GET", _) if watching => Verb::Watch,
        ("GET", true) => Verb::Get,
        ("GET", false) => Verb::List,
        ("POST", _) => Verb::Create,
        ("PUT", _) => Verb::Update,
        ("PATCH", _) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    };
    Some(RequestInfo {
        verb,
        group,
        resource: resource.to_owned(),
        subresource: subresource.to_owned(),
        namespace,
        name,
        initial_events,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_streaming_list_is_a_watch_with_initial_events() {
        let get = Method::GET;
        let path = "/api/v1/namespaces/a/pods";
        let streaming = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        let info = parse(&get, path, Some(streaming)).unwrap();
        assert_eq!((info.verb, info.initial_events), (Verb::Watch, true));
        let info = parse(&get, path, Some("watch=true&resourceVersion=5")).unwrap();
        assert_eq!((info.verb, info.initial_events), (Verb::Watch, false));
        let info = parse(&get, path, Some("sendInitialEvents=true")).unwrap();
        assert_eq!((info.verb, info.initial_events), (Verb::List, false));
    }

    #[test]
    fn parses_core_group_and_custom_resources() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/a/pods",
                None,
                Verb::List,
                "pods",
                None,
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods",
                Some("watch=true&resourceVersion=5"),
                Verb::Watch,
                "pods",
                None,
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods/p",
                None,
                Verb::Get,
                "pods",
                Some("p"),
            ),
            (
                "PATCH",
                "/api/v1/namespaces/a/pods/p/status",
                None,
                Verb::Patch,
                "pods/status",
                Some("p"),
            ),
            (
                "PUT",
                "/apis/demo.concord.dev/v1/namespaces/a/widgets/w",
                None,
                Verb::Update,
                "widgets.demo.concord.dev",
                Some("w"),
            ),
            (
                "POST",
                "/api/v1/namespaces/a/configmaps",
                None,
                Verb::Create,
                "configmaps",
                None,
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/configmaps",
                None,
                Verb::DeleteCollection,
                "configmaps",
                None,
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a",
                None,
                Verb::Delete,
                "namespaces",
                Some("a"),
            ),
        ];
        for (method, path, query, verb, resource, name) in cases {
            let info = parse(&method.parse().unwrap(), path, query).unwrap();
            assert_eq!(info.verb, verb, "{method} {path}");
            assert!(info.resource_is(resource), "{path} is {resource}");
            assert_eq!(info.name.as_deref(), name, "{path}");
        }
    }

    #[test]
    fn resource_does_not_cover_its_subresources() {
        let info = parse(&Method::PATCH, "/api/v1/namespaces/a/pods/p/status", None).unwrap();
        assert!(!info.resource_is("pods"));
        assert!(info.resource_is("pods/status"));
        assert!(info.resource_is("pods/*"));
        assert!(info.resource_is("*"));
    }

    #[test]
    fn ignores_non_resource_paths() {
        assert!(parse(&Method::GET, "/version", None).is_none());
        assert!(parse(&Method::GET, "/apis", None).is_none());
    }
}
