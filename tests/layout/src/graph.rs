//! The file import graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which file imports which, over every Rust source file of the workspace's
/// crates. Paths are relative to the workspace root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    /// Every file of every crate's module tree.
    files: BTreeSet<PathBuf>,
    /// For each importing file, each file it imports with the first path
    /// (in source order) that made the edge.
    edges: BTreeMap<PathBuf, BTreeMap<PathBuf, String>>,
}

impl Graph {
    /// Adds `file` to the graph.
    pub(crate) fn add_file(&mut self, file: PathBuf) {
        self.files.insert(file);
    }

    /// Records that `from` imports `to` through `path`, unless an earlier
    /// path already made that edge.
    pub(crate) fn add_edge(&mut self, from: &Path, to: &Path, path: String) {
        self.edges
            .entry(from.to_path_buf())
            .or_default()
            .entry(to.to_path_buf())
            .or_insert(path);
    }

    /// Every file of every crate's module tree, sorted.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(PathBuf::as_path)
    }

    /// Every edge `(from, to)`: `from` imports `to`. Sorted.
    pub fn edges(&self) -> impl Iterator<Item = (&Path, &Path)> {
        self.edges
            .iter()
            .flat_map(|(from, tos)| tos.keys().map(move |to| (from.as_path(), to.as_path())))
    }

    /// How many edges the graph has.
    pub fn import_count(&self) -> usize {
        self.edges.values().map(BTreeMap::len).sum()
    }

    /// The files `file` imports, each with the first path that made the edge.
    pub fn imports(&self, file: &Path) -> Vec<(&Path, &str)> {
        self.edges
            .get(file)
            .into_iter()
            .flatten()
            .map(|(to, path)| (to.as_path(), path.as_str()))
            .collect()
    }

    /// The files that import `file`, each with the first path that made the
    /// edge.
    pub fn importers(&self, file: &Path) -> Vec<(&Path, &str)> {
        self.edges
            .iter()
            .filter_map(|(from, tos)| tos.get(file).map(|path| (from.as_path(), path.as_str())))
            .collect()
    }

    /// The first path in `from` that makes it import `to`, if it does.
    pub fn via(&self, from: &Path, to: &Path) -> Option<&str> {
        self.edges.get(from)?.get(to).map(String::as_str)
    }

    /// Every pair of files that import each other, each pair once with the
    /// smaller path first, sorted.
    pub fn mutual_pairs(&self) -> Vec<(PathBuf, PathBuf)> {
        self.edges()
            .filter(|(from, to)| from < to && self.via(to, from).is_some())
            .map(|(from, to)| (from.to_path_buf(), to.to_path_buf()))
            .collect()
    }
}
