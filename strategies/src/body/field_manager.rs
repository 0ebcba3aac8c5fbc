//! Field-manager names for server-side apply, one per intent.

use crate::Intent;

/// The API server's limit on field-manager names.
const MAX_LEN: usize = 128;

/// The field manager that owns `intent`'s entry under `base`:
/// `<base>/finalizer/<name>`, `<base>/label/<key>`,
/// `<base>/annotation/<key>`, `<base>/condition/<type>` or
/// `<base>/status/<field,field>`. Names too long for the API
/// server use a stable 64-bit FNV-1a hash of the entry instead.
pub(crate) fn manager_for(base: &str, intent: &Intent) -> String {
    let (kind, entry) = match intent {
        Intent::AddFinalizer(name) | Intent::RemoveFinalizer(name) => ("finalizer", name.as_str()),
        Intent::SetLabel { key, .. } | Intent::RemoveLabel(key) => ("label", key.as_str()),
        Intent::SetAnnotation { key, .. } | Intent::RemoveAnnotation(key) => {
            ("annotation", key.as_str())
        }
        Intent::SetCondition(condition) => ("condition", condition.type_.as_str()),
        Intent::MergeStatus(fragment) => {
            // Keyed by the fields the fragment sets, so that fragments
            // setting different fields do not release each other's.
            let mut keys: Vec<&str> = fragment
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            keys.sort_unstable();
            return named(base, "status", &keys.join(","));
        }
        _ => return format!("{}/other", truncate(base)),
    };
    named(base, kind, entry)
}

fn named(base: &str, kind: &str, entry: &str) -> String {
    let plain = format!("{base}/{kind}/{entry}");
    if plain.len() <= MAX_LEN && !plain.chars().any(char::is_control) {
        plain
    } else {
        format!("{}/{kind}/{:016x}", truncate(base), fnv1a(entry))
    }
}

fn truncate(base: &str) -> &str {
    let mut end = base.len().min(MAX_LEN - 40);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    &base[..end]
}

/// FNV-1a, 64 bit: stable across Rust versions, unlike `DefaultHasher`.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_finalizer_gets_its_own_manager() {
        let a = manager_for("op", &Intent::add_finalizer("example.com/a"));
        let b = manager_for("op", &Intent::add_finalizer("example.com/b"));
        assert_eq!(a, "op/finalizer/example.com/a");
        assert_ne!(a, b);
        assert_eq!(
            a,
            manager_for("op", &Intent::remove_finalizer("example.com/a"))
        );
    }

    #[test]
    fn long_names_are_hashed_within_the_limit() {
        let long = "x".repeat(200);
        let m = manager_for("op", &Intent::set_label(long.clone(), "v"));
        assert!(m.len() <= MAX_LEN);
        assert_eq!(m, manager_for("op", &Intent::RemoveLabel(long)));
    }

    #[test]
    fn status_fragments_setting_different_fields_get_different_managers() {
        let phase = manager_for(
            "op",
            &Intent::MergeStatus(serde_json::json!({"phase": "A"})),
        );
        let other = manager_for(
            "op",
            &Intent::MergeStatus(serde_json::json!({"observedGeneration": 1})),
        );
        assert_eq!(phase, "op/status/phase");
        assert_ne!(phase, other);
    }

    #[test]
    fn fnv1a_matches_reference_vector() {
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
