/// What went wrong with a fault proxy or the operator it supervises.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FaultError {
    /// The schedule has mistakes; every one is listed.
    #[error("fault schedule {schedule} is invalid: {}", problems.join("; "))]
    InvalidSchedule {
        /// The schedule, printed back.
        schedule: String,
        /// Every mistake found.
        problems: Vec<String>,
    },
    /// The proxy could not listen on loopback.
    #[error("the fault proxy cannot listen on 127.0.0.1")]
    Bind(#[source] std::io::Error),
    /// The client to the real API server could not be built.
    #[error("the fault proxy cannot reach the API server")]
    Upstream(#[source] kube::Error),
    /// The operator's traffic did not stop within the limit.
    #[error("the operator did not go quiet for {quiet_ms} ms within {limit_s} s")]
    NotQuiet {
        /// The quiet period awaited.
        quiet_ms: u128,
        /// How long the wait lasted.
        limit_s: u64,
    },
    /// The supervised operator's thread panicked.
    #[error("the supervised operator panicked: {0}")]
    OperatorPanicked(String),
}
