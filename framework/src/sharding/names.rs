//! The names membership Leases and their labels carry.

use super::ring::member_id;

/// Label on every membership Lease: the ring it belongs to.
pub(crate) const RING_LABEL: &str = "shard.concord.dev/ring";
/// Label on a membership Lease of ring version 1: the manager's name
/// (read only, to refuse sharing a ring with such a replica).
pub(crate) const V1_MANAGER_LABEL: &str = "shard.concord.dev/manager";
/// Label on every membership Lease: the member id.
pub(crate) const MEMBER_LABEL: &str = "shard.concord.dev/member";
/// Annotation on every membership Lease: the view it acknowledged.
pub(crate) const ACKED_ANNOTATION: &str = "shard.concord.dev/acked";
/// Annotation on every membership Lease: the
/// [`RingConfig`](super::config::RingConfig) of its replica.
pub(crate) const CONFIG_ANNOTATION: &str = "shard.concord.dev/config";

/// The membership Lease name of `member` under `prefix` (the ring's).
pub(crate) fn lease_name(prefix: &str, member: &str) -> String {
    format!("{prefix}-{member}")
}

/// `name` made a valid label value and Lease name prefix: lowercase
/// letters, digits and `-`, at most 40 characters.
pub(crate) fn sanitize(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "concord".into()
    } else {
        trimmed.to_owned()
    }
}

/// The member id of the replica whose identity is `identity`.
pub(crate) fn id_of(identity: &str) -> String {
    member_id(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manager_names_become_valid_lease_names() {
        assert_eq!(sanitize("Argo_Cleanup"), "argo-cleanup");
        assert_eq!(sanitize("__"), "concord");
        assert!(sanitize(&"x".repeat(100)).len() <= 40);
        assert_eq!(lease_name("a-1234abcd", "0123"), "a-1234abcd-0123");
    }
}
