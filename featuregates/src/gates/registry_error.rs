/// Why a [`FeatureSpec`](crate::FeatureSpec) could not be registered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Another gate already has this name (compared without case, so that
    /// environment variables stay unambiguous).
    #[error("feature gate `{name}` is already registered")]
    DuplicateGate {
        /// The name registered twice.
        name: &'static str,
    },
    /// The name is empty, reserved (`AllAlpha`, `AllBeta`) or not an
    /// upper-camel-case ASCII identifier.
    #[error(
        "invalid feature gate name `{name}` (expected an UpperCamelCase ASCII name other than AllAlpha and AllBeta)"
    )]
    InvalidGateName {
        /// The rejected name.
        name: &'static str,
    },
    /// The spec contradicts its stage, e.g. an Alpha gate on by default.
    #[error("inconsistent spec for feature gate `{name}`: {reason}")]
    InconsistentSpec {
        /// The gate.
        name: &'static str,
        /// What is inconsistent.
        reason: &'static str,
    },
}
