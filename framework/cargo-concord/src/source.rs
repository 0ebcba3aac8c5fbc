//! Where a new project gets concord from: a checkout, a git repository or
//! the crate registry — by default the checkout this `cargo-concord` was
//! built from, when it is still there, else the registry.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::cli::InitArgs;

/// The concord a new project depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConcordSource {
    /// A local checkout (`--concord-path`, or the one `cargo-concord` was
    /// installed from): path dependencies, and the checkout's `Cargo.lock`
    /// as the project's first lock file.
    Checkout(PathBuf),
    /// A git repository (`--concord-git`): git dependencies.
    Git(String),
    /// The crate registry at this version (`--concord-version`, or the
    /// version of this `cargo-concord` when it was not built from a
    /// checkout).
    Registry(String),
}

/// The checkout this binary was compiled from: `cargo install --path
/// framework/cargo-concord` and `cargo install --git URL` both build in
/// one, which stays where it was.
const BUILT_FROM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

impl ConcordSource {
    /// The source `args` ask for: an explicit flag, else the checkout this
    /// binary was built from while it still holds concord, else the
    /// registry at this binary's version.
    ///
    /// # Errors
    ///
    /// [`Error::NotAConcordCheckout`] when `--concord-path` is not one;
    /// [`Error::CheckoutGone`] when nothing is named and the checkout this
    /// binary was built from no longer exists;
    /// [`Error::InvalidName`] for an empty `--concord-git` or a
    /// `--concord-version` that is not a version.
    pub(crate) fn of(args: &InitArgs) -> Result<Self, Error> {
        if let Some(path) = &args.concord_path {
            return checkout(path)
                .map(ConcordSource::Checkout)
                .ok_or_else(|| Error::NotAConcordCheckout(path.clone()));
        }
        if let Some(url) = &args.concord_git {
            if url.trim().is_empty() {
                return Err(Error::InvalidName {
                    what: "--concord-git",
                    value: url.clone(),
                    rule: "a git URL, e.g. https://github.com/concord-rs/concord".into(),
                });
            }
            return Ok(ConcordSource::Git(url.clone()));
        }
        if let Some(version) = &args.concord_version {
            let numbers: Vec<&str> = version.split('.').collect();
            if numbers.len() != 3 || !numbers.iter().all(|n| n.parse::<u64>().is_ok()) {
                return Err(Error::InvalidName {
                    what: "--concord-version",
                    value: version.clone(),
                    rule: "a version of the published crates: MAJOR.MINOR.PATCH".into(),
                });
            }
            return Ok(ConcordSource::Registry(version.clone()));
        }
        remembered(Path::new(BUILT_FROM))
    }

    /// The `[dependencies]` lines naming concord and its test environment.
    pub(crate) fn dependencies(&self) -> String {
        let line = |package: &str, source: String| format!("{package} = {source}");
        let (framework, testenv) = match self {
            ConcordSource::Checkout(root) => (
                format!(
                    "{{ path = {:?} }}",
                    root.join("framework").display().to_string()
                ),
                format!(
                    "{{ path = {:?} }}",
                    root.join("tests/testenv").display().to_string()
                ),
            ),
            ConcordSource::Git(url) => (
                format!("{{ git = {url:?} }}"),
                format!("{{ git = {url:?} }}"),
            ),
            ConcordSource::Registry(version) => (format!("{version:?}"), format!("{version:?}")),
        };
        format!(
            "{}\n{}",
            line("kube-concord", framework),
            line("kube-concord-testenv", testenv)
        )
    }

    /// The lock file a new project starts from: a checkout's, so that the
    /// project builds with the versions concord was tested with (and, in a
    /// shared target directory, without rebuilding them).
    pub(crate) fn lock_file(&self) -> Result<Option<String>, Error> {
        let ConcordSource::Checkout(root) = self else {
            return Ok(None);
        };
        let path = root.join("Cargo.lock");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("reading", &path)(e)),
        }
    }

    /// Says where concord comes from, for the message `init` prints.
    pub(crate) fn describe(&self) -> String {
        match self {
            ConcordSource::Checkout(root) => format!("the concord checkout at {}", root.display()),
            ConcordSource::Git(url) => format!("concord from git {url}"),
            ConcordSource::Registry(version) => format!("kube-concord {version} from crates.io"),
        }
    }
}

/// The checkout `built_from`, while it exists. Without it, falling back to
/// the registry would make a project that may not build: ask for the
/// source instead.
fn remembered(built_from: &Path) -> Result<ConcordSource, Error> {
    checkout(built_from)
        .map(ConcordSource::Checkout)
        .ok_or_else(|| Error::CheckoutGone(built_from.to_path_buf()))
}

/// `path`, canonical, when it holds concord's framework and test
/// environment.
fn checkout(path: &Path) -> Option<PathBuf> {
    let root = path.canonicalize().ok()?;
    let manifest = std::fs::read_to_string(root.join("framework/Cargo.toml")).ok()?;
    let testenv = root.join("tests/testenv/Cargo.toml");
    (manifest.contains("name = \"kube-concord\"") && testenv.is_file()).then_some(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_binary_was_built_from_a_checkout() {
        // Tests build in the repository, so the default is path dependencies on it.
        assert!(checkout(Path::new(BUILT_FROM)).is_some());
        assert!(checkout(Path::new("/nonexistent")).is_none());
    }

    #[test]
    fn a_removed_checkout_is_an_error_not_the_registry() {
        let gone = Path::new("/nonexistent/concord");
        match remembered(gone) {
            Err(Error::CheckoutGone(path)) => assert_eq!(path, gone),
            other => panic!("expected CheckoutGone, got {other:?}"),
        }
        assert!(matches!(
            remembered(Path::new(BUILT_FROM)),
            Ok(ConcordSource::Checkout(_))
        ));
    }

    #[test]
    fn each_source_names_both_crates() {
        let git = ConcordSource::Git("https://example.com/concord".into()).dependencies();
        assert_eq!(
            git,
            "kube-concord = { git = \"https://example.com/concord\" }\nkube-concord-testenv = { git = \"https://example.com/concord\" }"
        );
        let registry = ConcordSource::Registry("0.1.0".into()).dependencies();
        assert_eq!(
            registry,
            "kube-concord = \"0.1.0\"\nkube-concord-testenv = \"0.1.0\""
        );
    }
}
