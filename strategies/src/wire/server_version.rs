//! Whether a typed object of Kubernetes' own API groups holds every field
//! the API server stores: only when the server is not newer than the
//! Kubernetes version the compiled `k8s-openapi` types describe.
//!
//! A `PUT` built from a typed built-in object from an older `k8s-openapi`
//! would drop the fields the server added since. The server's version is
//! learnt once per writer (one `GET /version`), and anything short of a
//! clear "not newer" — an error, a version that does not parse, another
//! major version — counts as newer: the object is read raw first.

use std::sync::Arc;

use tokio::sync::OnceCell;

/// The minor version of Kubernetes 1.x the compiled `k8s-openapi` types
/// describe (its `v1_*` feature).
pub(crate) fn compiled_minor() -> u32 {
    use k8s_openapi::k8s_match;
    k8s_match!((), {
        k8s_if_1_33!(() => 33),
        k8s_if_1_34!(() => 34),
        k8s_if_1_35!(() => 35),
        k8s_if_1_36!(() => 36),
        k8s_if_1_37!(() => 37),
    })
}

/// Whether a server reporting `major`.`minor` (as `/version` spells them:
/// `"1"`, `"37"` or `"37+"`) is not newer than Kubernetes 1.`compiled`.
pub(crate) fn not_newer(major: &str, minor: &str, compiled: u32) -> bool {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    major == "1" && digits.parse::<u32>().is_ok_and(|minor| minor <= compiled)
}

/// The answer, learnt on first use and shared by a writer's clones.
#[derive(Clone, Debug, Default)]
pub(crate) struct TypedBuiltinsComplete(Arc<OnceCell<bool>>);

impl TypedBuiltinsComplete {
    /// Whether typed built-in objects are complete on `client`'s server.
    pub(crate) async fn get(&self, client: &kube::Client) -> bool {
        *self
            .0
            .get_or_init(|| async {
                match client.apiserver_version().await {
                    Ok(info) => {
                        let complete = not_newer(&info.major, &info.minor, compiled_minor());
                        if !complete {
                            tracing::info!(
                                server = %info.git_version,
                                compiled = compiled_minor(),
                                "API server newer than k8s-openapi: typed built-in objects are read raw before a PUT"
                            );
                        }
                        complete
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the API server's version is unknown: typed built-in objects are read raw before a PUT");
                        false
                    }
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_not_newer_than_the_compiled_types_counts() {
        assert!(not_newer("1", "37", 37));
        assert!(not_newer("1", "36", 37));
        assert!(not_newer("1", "37+", 37), "a provider's suffix");
        assert!(!not_newer("1", "38", 37));
        assert!(!not_newer("1", "38+", 37));
        assert!(!not_newer("2", "0", 37), "another major");
        assert!(!not_newer("1", "", 37), "no minor");
        assert!(!not_newer("1", "x", 37));
    }

    #[test]
    fn the_compiled_version_is_the_enabled_feature() {
        // The workspace enables k8s-openapi's `v1_37`.
        assert_eq!(compiled_minor(), 37);
    }
}
