//! Checks one rule of the workspace's layout: **no two Rust source files
//! import each other**.
//!
//! [`import_graph`] finds every crate of the workspace (each member's
//! `src/lib.rs`, `src/main.rs`, binaries, tests, examples and benches), walks
//! each crate's module tree from its root, and records which file names an
//! item defined in which other file. [`Graph::mutual_pairs`] then lists the
//! pairs of files that import each other.
//!
//! A file *imports* another when its code (a `use`, or a path in a type, an
//! expression, a pattern or a trait bound) names an item defined in that
//! other file. Re-exports are followed to the file that defines the item; a
//! glob `use module::*` imports the file that holds `module`; `mod x;` is not
//! an import; paths into other crates are ignored (cargo already forbids
//! cycles between crates).

mod collect;
mod error;
mod graph;
mod manifest;
mod modules;
mod paths;
mod resolve;

use std::path::Path;

pub use error::LayoutError;
pub use graph::Graph;

/// Builds the file import graph of the Cargo workspace rooted at
/// `workspace_root` (the directory of the workspace's `Cargo.toml`).
///
/// Paths in the graph are relative to `workspace_root`. Fails when a manifest
/// or a source file cannot be read, or when a source file does not parse;
/// the error names the file.
pub fn import_graph(workspace_root: &Path) -> Result<Graph, LayoutError> {
    let root = paths::normalize(workspace_root);
    let crate_roots = manifest::crate_roots(&root)?;
    let table = modules::load(&root, &crate_roots)?;
    Ok(resolve::graph(&table, &root))
}
