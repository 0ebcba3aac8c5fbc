//! Resolves what each module names to the file that defines it, and builds
//! the [`Graph`] from that.
//!
//! A path starts at `crate`, `self`, `super`, or a name of the module's
//! namespace (a child module, an item, a `use`d name, a name a glob `use`
//! brings); any other first segment names another crate or the prelude and
//! is ignored. Each further segment is looked up in the module reached so
//! far, following `use` re-exports and globs to the defining file. Once an
//! item is reached the rest (variants, associated items) is ignored. A
//! segment that does not resolve leaves the path at the deepest module
//! reached.

use std::path::Path;

use crate::collect::{Bind, Ref};
use crate::graph::Graph;
use crate::modules::{FileId, ModId, Table};
use crate::paths::relative;

/// Where a path leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A module.
    Module(ModId),
    /// An item defined in this file.
    Item(FileId),
    /// Not fully resolved: this module is the deepest reached.
    Partial(ModId),
    /// Another crate, the prelude, or a local name.
    External,
}

/// The import graph of the modules in `table`, with paths relative to `root`.
pub(crate) fn graph(table: &Table, root: &Path) -> Graph {
    let mut graph = Graph::default();
    let files: Vec<_> = table
        .files
        .iter()
        .map(|file| relative(root, file))
        .collect();
    for file in &files {
        graph.add_file(file.clone());
    }
    let mut resolver = Resolver {
        table,
        in_progress: Vec::new(),
    };
    for (id, module) in table.modules.iter().enumerate() {
        for reference in &module.refs {
            let (target, shown) = match reference {
                Ref::Use(index) => {
                    let entry = &module.uses[*index];
                    if entry.external {
                        continue;
                    }
                    let target = match resolver.path(id, &entry.path) {
                        // A glob imports the file that holds the module it
                        // names; `use a::module;` alone imports nothing: the
                        // paths through it do.
                        Target::Module(named) if entry.bind == Bind::Glob => {
                            table.modules[named].file
                        }
                        Target::Item(file) => file,
                        Target::Partial(deepest) => table.modules[deepest].file,
                        Target::Module(_) | Target::External => continue,
                    };
                    (target, entry.shown())
                }
                Ref::Code(segments) => match resolver.path(id, segments) {
                    Target::Item(file) => (file, segments.join("::")),
                    Target::Partial(deepest) => (table.modules[deepest].file, segments.join("::")),
                    // A path in code that ends at a module is a local
                    // variable or a visibility (`pub(in crate::a)`).
                    Target::Module(_) | Target::External => continue,
                },
            };
            if target != module.file {
                graph.add_edge(&files[module.file], &files[target], shown);
            }
        }
    }
    graph
}

/// Resolves paths over a [`Table`].
struct Resolver<'t> {
    table: &'t Table,
    /// The `(module, name)` lookups under way, to stop `use` and glob loops.
    in_progress: Vec<(ModId, String)>,
}

impl Resolver<'_> {
    /// Where `segments`, written in module `from`, lead.
    fn path(&mut self, from: ModId, segments: &[String]) -> Target {
        let Some((first, rest)) = segments.split_first() else {
            return Target::External;
        };
        let mut target = match first.as_str() {
            "crate" => Target::Module(self.table.modules[from].krate),
            "self" => Target::Module(from),
            "super" => match self.table.modules[from].parent {
                Some(parent) => Target::Module(parent),
                None => return Target::External,
            },
            name => match self.lookup(from, name, true) {
                Some(target) => target,
                None => return Target::External,
            },
        };
        for segment in rest {
            let Target::Module(module) = target else {
                break;
            };
            target = match segment.as_str() {
                "self" => target,
                "super" => self.table.modules[module]
                    .parent
                    .map_or(Target::Partial(module), Target::Module),
                name => self
                    .lookup(module, name, false)
                    .unwrap_or(Target::Partial(module)),
            };
        }
        target
    }

    /// What `name` means in module `module`: a child module, an item it
    /// defines, a name it `use`s, or a name one of its globs brings. With
    /// `local`, `use`s in function bodies count too (a path written in the
    /// module sees them; one written elsewhere does not).
    fn lookup(&mut self, module: ModId, name: &str, local: bool) -> Option<Target> {
        let table = self.table;
        let found = &table.modules[module];
        if let Some(&child) = found.children.get(name) {
            return Some(Target::Module(child));
        }
        if let Some(&file) = found.defs.get(name) {
            return Some(Target::Item(file));
        }
        let key = (module, name.to_owned());
        if self.in_progress.contains(&key) {
            return None;
        }
        self.in_progress.push(key);
        let visible = found.uses.iter().filter(|entry| local || !entry.local);
        let named = visible
            .clone()
            .find(|entry| entry.bind == Bind::Name(name.to_owned()));
        let target = match named {
            Some(entry) if entry.external => Some(Target::External),
            Some(entry) => Some(self.path(module, &entry.path)),
            None => visible
                .filter(|entry| entry.bind == Bind::Glob && !entry.external)
                .find_map(|entry| match self.path(module, &entry.path) {
                    Target::Module(glob) => self.lookup(glob, name, false),
                    _ => None,
                }),
        };
        self.in_progress.pop();
        target
    }
}
