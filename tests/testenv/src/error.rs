use std::path::PathBuf;

/// What went wrong while preparing or using the test control plane.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `go build` of the control plane failed or could not be run.
    #[error("building the control plane in {dir} failed: {message}")]
    BuildFailed {
        /// The Go module that was built.
        dir: PathBuf,
        /// What `go` printed, or why it could not be started.
        message: String,
    },
    /// The control plane process exited or timed out before it was ready.
    #[error("the control plane did not start: {message}")]
    StartFailed {
        /// The reason, with the tail of the control plane's log when there is one.
        message: String,
    },
    /// An I/O operation on a file or process failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig could not be read or turned into a client configuration.
    #[error("kubeconfig {path} is unusable: {message}")]
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// Why it is unusable.
        message: String,
    },
    /// A request to the API server failed.
    #[error("{context}")]
    Api {
        /// What was being done.
        context: String,
        /// The error the client returned.
        #[source]
        source: kube::Error,
    },
    /// Something did not reach the expected state in time.
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long the wait lasted.
        seconds: u64,
    },
    /// The shared control plane failed to start earlier in this process.
    #[error("the shared test control plane is unavailable: {0}")]
    SharedUnavailable(String),
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn api(context: impl Into<String>, source: kube::Error) -> Self {
        Error::Api {
            context: context.into(),
            source,
        }
    }
}
