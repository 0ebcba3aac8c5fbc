//! Loads the module tree of each crate: which file holds each module and
//! what each module defines, imports and names.
//!
//! Follows `mod name;` to `name.rs` or `name/mod.rs` (children of a non-mod.rs
//! file `a.rs` live in `a/`), honours `#[path = "..."]`, and keeps inline
//! `mod name { ... }` blocks in their file. Every module is loaded whatever
//! its `#[cfg]`; a declared module whose file does not exist is skipped.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use syn::Item;

use crate::collect::{Ref, UseEntry, path_attribute, read_items};
use crate::error::LayoutError;
use crate::paths::{normalize, relative};

/// Index of a module in [`Table::modules`].
pub(crate) type ModId = usize;
/// Index of a file in [`Table::files`].
pub(crate) type FileId = usize;

/// One module of one crate (a file included by two crates gives two).
#[derive(Debug)]
pub(crate) struct Module {
    /// The file that holds it.
    pub(crate) file: FileId,
    /// The module that declares it; `None` for a crate root.
    pub(crate) parent: Option<ModId>,
    /// The root module of its crate.
    pub(crate) krate: ModId,
    /// Its child modules by name.
    pub(crate) children: BTreeMap<String, ModId>,
    /// The items it defines, by name, with the file that defines each (its
    /// own file, except for `#[macro_export]` macros at a crate root).
    pub(crate) defs: BTreeMap<String, FileId>,
    /// Its `use` entries.
    pub(crate) uses: Vec<UseEntry>,
    /// What its code names, in source order.
    pub(crate) refs: Vec<Ref>,
}

/// Every file and module of the workspace's crates.
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// The files, as normalized paths.
    pub(crate) files: Vec<PathBuf>,
    /// The modules of all crates.
    pub(crate) modules: Vec<Module>,
}

/// Where a module's items sit, for finding its children's files.
struct Place {
    /// The file that holds the module.
    file: FileId,
    /// The folder of that file.
    file_dir: PathBuf,
    /// The folder where `mod child;` looks for `child.rs` and `child/mod.rs`.
    children_dir: PathBuf,
    /// Whether the module is an inline `mod name { ... }` block.
    inline: bool,
}

/// Loads the module trees of the crates whose roots are `crate_roots`;
/// `root` is the workspace root errors name files relative to.
pub(crate) fn load(root: &Path, crate_roots: &[PathBuf]) -> Result<Table, LayoutError> {
    let mut loader = Loader {
        root: root.to_path_buf(),
        table: Table::default(),
        parsed: HashMap::new(),
    };
    for crate_root in crate_roots {
        loader.load_crate(crate_root)?;
    }
    Ok(loader.table)
}

/// Builds the [`Table`], parsing each file once.
struct Loader {
    /// The workspace root, to name files in errors.
    root: PathBuf,
    /// What has been loaded so far.
    table: Table,
    /// Each file parsed so far, with its id.
    parsed: HashMap<PathBuf, (FileId, Rc<syn::File>)>,
}

impl Loader {
    /// Loads one crate from its root file.
    fn load_crate(&mut self, path: &Path) -> Result<(), LayoutError> {
        let (file, syntax) = self.parse(path)?;
        let krate = self.new_module(file, None, None);
        let dir = parent_dir(path);
        let place = Place {
            file,
            file_dir: dir.clone(),
            children_dir: dir,
            inline: false,
        };
        self.fill(krate, &syntax.items, &place, &mut vec![path.to_path_buf()])
    }

    /// Records what module `id` holds, then loads its child modules.
    /// `ancestors` are the files of the modules above, to stop a `#[path]`
    /// loop.
    fn fill(
        &mut self,
        id: ModId,
        items: &[Item],
        place: &Place,
        ancestors: &mut Vec<PathBuf>,
    ) -> Result<(), LayoutError> {
        let contents = read_items(items);
        let krate = self.table.modules[id].krate;
        for (name, exported) in contents.defs {
            let owner = if exported { krate } else { id };
            self.table.modules[owner]
                .defs
                .entry(name)
                .or_insert(place.file);
        }
        let module = &mut self.table.modules[id];
        module.uses = contents.uses;
        module.refs = contents.refs;
        for item in items {
            let Item::Mod(declared) = item else { continue };
            let name = declared.ident.to_string();
            let path_attr = path_attribute(&declared.attrs);
            // A `#[path]` is relative to the file's folder, or inside an
            // inline module to that module's folder.
            let base = if place.inline {
                &place.children_dir
            } else {
                &place.file_dir
            };
            if let Some((_, inner)) = &declared.content {
                let children_dir = match &path_attr {
                    Some(path) => normalize(&base.join(path)),
                    None => place.children_dir.join(&name),
                };
                let child = self.new_module(place.file, Some(id), Some(&name));
                let inline = Place {
                    file: place.file,
                    file_dir: place.file_dir.clone(),
                    children_dir,
                    inline: true,
                };
                self.fill(child, inner, &inline, ancestors)?;
                continue;
            }
            let Some((path, mod_rs)) =
                child_file(base, &place.children_dir, &name, path_attr.as_deref())
            else {
                continue;
            };
            if ancestors.contains(&path) {
                continue;
            }
            let (file, syntax) = self.parse(&path)?;
            let child = self.new_module(file, Some(id), Some(&name));
            let file_dir = parent_dir(&path);
            let children_dir = match path.file_stem() {
                Some(stem) if !mod_rs => file_dir.join(stem),
                _ => file_dir.clone(),
            };
            ancestors.push(path);
            self.fill(
                child,
                &syntax.items,
                &Place {
                    file,
                    file_dir,
                    children_dir,
                    inline: false,
                },
                ancestors,
            )?;
            ancestors.pop();
        }
        Ok(())
    }

    /// A new empty module in `file`, registered as `name` under `parent`.
    fn new_module(&mut self, file: FileId, parent: Option<ModId>, name: Option<&str>) -> ModId {
        let id = self.table.modules.len();
        let krate = parent.map_or(id, |parent| self.table.modules[parent].krate);
        let module = Module {
            file,
            parent,
            krate,
            children: BTreeMap::new(),
            defs: BTreeMap::new(),
            uses: Vec::new(),
            refs: Vec::new(),
        };
        self.table.modules.push(module);
        if let (Some(parent), Some(name)) = (parent, name) {
            self.table.modules[parent]
                .children
                .insert(name.to_owned(), id);
        }
        id
    }

    /// The id and syntax tree of the file at `path`, parsed once.
    fn parse(&mut self, path: &Path) -> Result<(FileId, Rc<syn::File>), LayoutError> {
        if let Some((id, syntax)) = self.parsed.get(path) {
            return Ok((*id, Rc::clone(syntax)));
        }
        let shown = relative(&self.root, path);
        let text = fs::read_to_string(path).map_err(|source| LayoutError::Read {
            path: shown.clone(),
            source,
        })?;
        let syntax = Rc::new(syn::parse_file(&text).map_err(|source| LayoutError::Parse {
            path: shown,
            source,
        })?);
        let id = self.table.files.len();
        self.table.files.push(path.to_path_buf());
        self.parsed
            .insert(path.to_path_buf(), (id, Rc::clone(&syntax)));
        Ok((id, syntax))
    }
}

/// The file of `mod name;` and whether it is a mod.rs-like file (whose
/// children live next to it): the `#[path]` file relative to `base` (always
/// mod.rs-like, as rustc treats it), else `name.rs` or `name/mod.rs` in
/// `children_dir`. `None` when there is no such file.
fn child_file(
    base: &Path,
    children_dir: &Path,
    name: &str,
    path_attr: Option<&str>,
) -> Option<(PathBuf, bool)> {
    let candidates = match path_attr {
        Some(path) => vec![(base.join(path), true)],
        None => vec![
            (children_dir.join(format!("{name}.rs")), false),
            (children_dir.join(name).join("mod.rs"), true),
        ],
    };
    candidates
        .into_iter()
        .map(|(path, mod_rs)| (normalize(&path), mod_rs))
        .find(|(path, _)| path.is_file())
}

/// The folder of `path`.
fn parent_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}
