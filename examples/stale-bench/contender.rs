//! The controllers the benchmark compares.

/// One of the controllers compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Contender {
    /// concord with read-your-own-writes on (the default).
    Concord,
    /// concord with `.with_read_your_writes(false)`.
    ConcordUngated,
    /// The Go peer on controller-runtime v0.25, written the ordinary way.
    ControllerRuntime,
}

impl Contender {
    /// The name on the command line and in the tables.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Contender::Concord => "concord",
            Contender::ConcordUngated => "concord-ungated",
            Contender::ControllerRuntime => "controller-runtime",
        }
    }
}
