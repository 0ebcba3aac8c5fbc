//! The names configuration is read under: the environment variables, the
//! top-level keys of a configuration file, and dotted key paths.

/// The environment variable holding a `--feature-gates` style list.
pub const ENV_FEATURE_GATES: &str = "CONCORD_FEATURE_GATES";
/// The prefix of per-gate environment variables: `CONCORD_GATE_<NAME>`,
/// where `<NAME>` matches a gate name ignoring case and underscores
/// (`CONCORD_GATE_REMOVE_FINALIZERS_WITH_STRICT_PATCH`).
pub const ENV_GATE_PREFIX: &str = "CONCORD_GATE_";

pub(crate) const FEATURE_GATES_KEY: &str = "featureGates";
pub(crate) const STRATEGIES_KEY: &str = "strategies";

/// A dotted key path; segments that contain dots or slashes (resource
/// forms) are quoted so the path stays unambiguous.
pub(crate) fn join_key(path: &[&str]) -> String {
    let quoted: Vec<String> = path
        .iter()
        .map(|segment| match segment.contains(['.', '/']) {
            true => format!("\"{segment}\""),
            false => (*segment).to_owned(),
        })
        .collect();
    quoted.join(".")
}
