//! What can stop the import graph from being built.

use std::io;
use std::path::PathBuf;

/// Why the import graph of a workspace could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// A manifest or a source file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file, relative to the workspace root when it is inside it.
        path: PathBuf,
        /// What the file system said.
        source: io::Error,
    },
    /// A Rust source file does not parse.
    #[error("cannot parse {}: {source}", path.display())]
    Parse {
        /// The file, relative to the workspace root when it is inside it.
        path: PathBuf,
        /// What the parser said.
        source: syn::Error,
    },
    /// The workspace's `Cargo.toml` has no `members` list this crate can read.
    #[error("{}: {message}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}
