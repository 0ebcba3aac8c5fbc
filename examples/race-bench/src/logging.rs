//! Log lines of the benchmark binaries.

/// Sends log lines to stderr (stdout holds the results), filtered by
/// `$RUST_LOG`, else warnings and errors only.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}
