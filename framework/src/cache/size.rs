//! One shared cache's labels and size, as the registry reports them to
//! the `concord_cache_*` collector (`sizes.rs`).

/// `type_name` without module paths: `ConfigMap`,
/// `PartialObjectMeta<ConfigMap>`, `PodPhase`.
pub(crate) fn short_type_name(type_name: &str) -> String {
    let mut out = String::with_capacity(type_name.len());
    let mut word = String::new();
    let mut chars = type_name.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            word.clear();
        } else if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            out.push_str(&word);
            word.clear();
            out.push(c);
        }
    }
    out.push_str(&word);
    out
}

/// One cache's labels and size.
pub(crate) struct Size {
    pub(crate) resource: String,
    pub(crate) namespaces: String,
    pub(crate) type_name: String,
    pub(crate) selector: String,
    pub(crate) objects: usize,
    pub(crate) json_bytes: u64,
    /// A compact cache's decoded copies, and the seconds spent decoding.
    pub(crate) decoding: (u64, f64),
}

impl Size {
    /// The labels of both gauges.
    pub(super) fn labels(&self) -> [(&'static str, &str); 4] {
        [
            ("resource", self.resource.as_str()),
            ("namespace", self.namespaces.as_str()),
            ("type", self.type_name.as_str()),
            ("selector", self.selector.as_str()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn type_names_lose_their_paths() {
        assert_eq!(
            short_type_name("k8s_openapi::v1_37::api::core::v1::config_map::ConfigMap"),
            "ConfigMap"
        );
        assert_eq!(
            short_type_name(
                "kube_core::metadata::PartialObjectMeta<k8s_openapi::api::core::v1::Pod>"
            ),
            "PartialObjectMeta<Pod>"
        );
        assert_eq!(short_type_name("PodPhase"), "PodPhase");
    }
}
