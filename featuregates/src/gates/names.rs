//! Gate names: the two pseudo-gates, and how names compare.

/// The pseudo-gate that sets every unlocked Alpha gate not named explicitly.
pub const ALL_ALPHA: &str = "AllAlpha";
/// The pseudo-gate that sets every unlocked Beta gate not named explicitly.
pub const ALL_BETA: &str = "AllBeta";

pub(crate) fn is_pseudo_gate(name: &str) -> bool {
    name == ALL_ALPHA || name == ALL_BETA
}

/// A gate name folded for comparison: ASCII lower case, underscores dropped.
pub(crate) fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_')
        .map(|c| c.to_ascii_lowercase())
        .collect()
}
