use std::fmt;

/// The maturity of a feature gate, as in Kubernetes.
///
/// | stage | default | may be locked |
/// | --- | --- | --- |
/// | Alpha | off | no |
/// | Beta | on (off allowed) | yes |
/// | GA | on | always locked to on |
/// | Deprecated | any | yes |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Stage {
    /// Experimental, off by default, may change or vanish.
    Alpha,
    /// Well tested, usually on by default.
    Beta,
    /// Generally available: always on; the gate is kept only so that old
    /// configuration still loads, and will be removed.
    #[allow(clippy::upper_case_acronyms)]
    GA,
    /// On its way out; setting it warns.
    Deprecated,
}

impl Stage {
    /// The spelling used in reports and the book.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::Alpha => "Alpha",
            Stage::Beta => "Beta",
            Stage::GA => "GA",
            Stage::Deprecated => "Deprecated",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of a gate's history: the release in which it entered a stage.
///
/// ```
/// use concord_featuregates::{Stage, StageChange};
/// const HISTORY: &[StageChange] = &[StageChange::new(Stage::Alpha, "0.1"), StageChange::new(Stage::Beta, "0.2")];
/// assert_eq!(HISTORY[1].version, "0.2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StageChange {
    /// The stage entered.
    pub stage: Stage,
    /// The release that entered it, e.g. `0.2`.
    pub version: &'static str,
}

impl StageChange {
    /// A history line.
    pub const fn new(stage: Stage, version: &'static str) -> Self {
        StageChange { stage, version }
    }
}
