use std::path::PathBuf;

/// Why a `cargo concord` command failed. Nothing is written when a
/// command fails before its first write; see each command for what a
/// failure while writing leaves behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A name given on the command line breaks the rule it must follow.
    #[error("invalid {what} {value:?}: {rule}")]
    InvalidName {
        /// The flag or argument (`--group`, `NAME`, …).
        what: &'static str,
        /// The value given.
        value: String,
        /// The rule it breaks.
        rule: String,
    },
    /// `init` would overwrite something.
    #[error("{0} already exists: choose another name or --dir")]
    AlreadyExists(PathBuf),
    /// The directory has no `PROJECT` file written by `cargo concord init`.
    #[error(
        "{0} is not a project made by `cargo concord init` (no PROJECT file); run `cargo concord init` first or pass --project-dir"
    )]
    NotAProject(PathBuf),
    /// The `PROJECT` file cannot be understood.
    #[error("{path} is not a valid PROJECT file: {message}")]
    BadProject {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A kind already exists with different settings.
    #[error("kind {kind} already exists with {existing}; refusing to change it to {requested}")]
    KindConflict {
        /// The kind.
        kind: String,
        /// What the project has.
        existing: String,
        /// What was asked for.
        requested: String,
    },
    /// A scaffold marker is missing from a file `create api` edits.
    #[error(
        "{file} has no `{marker}` marker line; restore it (cargo concord inserts registrations above it)"
    )]
    MissingMarker {
        /// The file.
        file: PathBuf,
        /// The marker.
        marker: String,
    },
    /// `--concord-path` does not point at a concord checkout.
    #[error("--concord-path {0}: not a concord checkout (no framework/Cargo.toml of kube-concord)")]
    NotAConcordCheckout(PathBuf),
    /// No source was named and the checkout this binary was built from is
    /// gone: the project would depend on crates the registry may not have.
    #[error(
        "the concord checkout cargo-concord was installed from ({0}) is gone: name the source \
         with --concord-path DIR, --concord-git URL or --concord-version VERSION"
    )]
    CheckoutGone(PathBuf),
    /// Reading or writing a file failed.
    #[error("{action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The project's own binary (run by `generate` and `explain`) failed.
    #[error("`{command}` failed in {dir}:\n{stderr}")]
    ProjectBinary {
        /// The command line.
        command: String,
        /// The project directory.
        dir: PathBuf,
        /// What it printed on standard error.
        stderr: String,
    },
    /// What the project's binary printed is not the YAML expected.
    #[error("`{command}` printed something that is not valid YAML")]
    BadOutput {
        /// The command line.
        command: String,
        /// The parse error.
        #[source]
        source: serde_yaml::Error,
    },
    /// A manifest the project's binary printed is not a Kubernetes object.
    #[error("`{source_name}` printed a manifest that is not a Kubernetes object: {message}")]
    BadManifest {
        /// The command that printed it.
        source_name: String,
        /// What is wrong with it.
        message: String,
    },
    /// Serialising a manifest failed.
    #[error("serialising {what} failed")]
    Serialize {
        /// The manifest.
        what: &'static str,
        /// The error.
        #[source]
        source: serde_yaml::Error,
    },
    /// Resolving concord's default configuration failed.
    #[error("resolving the default strategy table failed")]
    Config(#[source] concord::Error),
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    }
}
