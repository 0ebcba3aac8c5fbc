//! Reads one module's items: the names it defines, the `use` declarations it
//! holds and, in source order, every path its code names.

use std::collections::BTreeMap;

use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{
    Attribute, Block, Expr, Item, ItemExternCrate, ItemMod, ItemUse, Macro, Path, Token, UseTree,
};

/// What a `use` binds in its module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bind {
    /// `use a::b;` or `use a::b as name;` binds `name`.
    Name(String),
    /// `use a::Trait as _;` binds nothing but still imports.
    Hidden,
    /// `use a::*;` brings every name of `a`.
    Glob,
}

/// One flattened `use` (a `use a::{b, c}` gives two).
#[derive(Debug, Clone)]
pub(crate) struct UseEntry {
    /// The path's segments: `super::b` gives `["super", "b"]`; for a glob,
    /// the path of the module it names.
    pub(crate) path: Vec<String>,
    /// What it binds.
    pub(crate) bind: Bind,
    /// Whether the path starts with `::` or comes from `extern crate`: it
    /// names another crate.
    pub(crate) external: bool,
    /// Whether it sits in a block (a function body) rather than at module
    /// level: its name is then not visible from other modules.
    pub(crate) local: bool,
}

impl UseEntry {
    /// The path as written, `super::session::Session` or `super::*`.
    pub(crate) fn shown(&self) -> String {
        let path = self.path.join("::");
        if self.bind == Bind::Glob {
            format!("{path}::*")
        } else {
            path
        }
    }
}

/// Something a module's code names, in source order.
#[derive(Debug, Clone)]
pub(crate) enum Ref {
    /// The module's `use` entry at this index.
    Use(usize),
    /// A path in code (a type, an expression, a pattern, a bound or a macro
    /// invocation's name), as its segments.
    Code(Vec<String>),
}

/// What [`read_items`] finds in one module's items.
#[derive(Debug, Default)]
pub(crate) struct Contents {
    /// The names of the items defined at module level, each with whether it
    /// is a `#[macro_export]` macro (which lives at the crate root instead).
    pub(crate) defs: BTreeMap<String, bool>,
    /// Every `use`, at module level or in a block.
    pub(crate) uses: Vec<UseEntry>,
    /// What the code names, in source order.
    pub(crate) refs: Vec<Ref>,
}

/// Reads a module's items. Nested `mod` items are skipped: they are modules
/// of their own. Attributes are skipped; a macro invocation's body is read
/// when it parses as comma-separated expressions (`assert_eq!(a, b)`,
/// `vec![x]`) and skipped otherwise.
pub(crate) fn read_items(items: &[Item]) -> Contents {
    let mut collector = Collector {
        contents: Contents::default(),
        depth: 0,
    };
    for item in items {
        if let Some((name, exported)) = defined_name(item) {
            collector.contents.defs.insert(name, exported);
        }
        collector.visit_item(item);
    }
    collector.contents
}

/// The name a module-level item defines, and whether it is a
/// `#[macro_export]` macro.
fn defined_name(item: &Item) -> Option<(String, bool)> {
    let ident = match item {
        Item::Const(item) => &item.ident,
        Item::Enum(item) => &item.ident,
        Item::Fn(item) => &item.sig.ident,
        Item::Static(item) => &item.ident,
        Item::Struct(item) => &item.ident,
        Item::Trait(item) => &item.ident,
        Item::TraitAlias(item) => &item.ident,
        Item::Type(item) => &item.ident,
        Item::Union(item) => &item.ident,
        Item::Macro(item) => {
            let exported = item
                .attrs
                .iter()
                .any(|attr| attr.path().is_ident("macro_export"));
            return item
                .ident
                .as_ref()
                .map(|ident| (ident.to_string(), exported));
        }
        _ => return None,
    };
    Some((ident.to_string(), false))
}

/// The `#[path = "..."]` of a `mod` item, if it has one.
pub(crate) fn path_attribute(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| match &attr.meta {
        syn::Meta::NameValue(pair) if pair.path.is_ident("path") => match &pair.value {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(path),
                ..
            }) => Some(path.value()),
            _ => None,
        },
        _ => None,
    })
}

/// The visitor behind [`read_items`].
struct Collector {
    contents: Contents,
    /// How many blocks deep the visitor is: 0 at module level.
    depth: usize,
}

impl Collector {
    /// Records the `use` entries of one use tree under `prefix`.
    fn flatten(&mut self, tree: &UseTree, prefix: &mut Vec<String>, external: bool) {
        let push = |collector: &mut Self, path: Vec<String>, bind: Bind| {
            let local = collector.depth > 0;
            collector
                .contents
                .refs
                .push(Ref::Use(collector.contents.uses.len()));
            collector.contents.uses.push(UseEntry {
                path,
                bind,
                external,
                local,
            });
        };
        match tree {
            UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.flatten(&path.tree, prefix, external);
                prefix.pop();
            }
            UseTree::Name(name) if name.ident == "self" => {
                let bind = prefix
                    .last()
                    .map_or(Bind::Hidden, |last| Bind::Name(last.clone()));
                push(self, prefix.clone(), bind);
            }
            UseTree::Name(name) => {
                let path = [prefix.as_slice(), &[name.ident.to_string()]].concat();
                push(self, path, Bind::Name(name.ident.to_string()));
            }
            UseTree::Rename(rename) => {
                let mut path = prefix.clone();
                if rename.ident != "self" {
                    path.push(rename.ident.to_string());
                }
                let bind = if rename.rename == "_" {
                    Bind::Hidden
                } else {
                    Bind::Name(rename.rename.to_string())
                };
                push(self, path, bind);
            }
            UseTree::Glob(_) => push(self, prefix.clone(), Bind::Glob),
            UseTree::Group(group) => {
                for tree in &group.items {
                    self.flatten(tree, prefix, external);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, _: &'ast ItemMod) {}

    fn visit_attribute(&mut self, _: &'ast Attribute) {}

    fn visit_block(&mut self, block: &'ast Block) {
        self.depth += 1;
        visit::visit_block(self, block);
        self.depth -= 1;
    }

    fn visit_item_use(&mut self, item: &'ast ItemUse) {
        self.flatten(&item.tree, &mut Vec::new(), item.leading_colon.is_some());
    }

    fn visit_item_extern_crate(&mut self, item: &'ast ItemExternCrate) {
        let name = item
            .rename
            .as_ref()
            .map_or(&item.ident, |(_, rename)| rename)
            .to_string();
        let local = self.depth > 0;
        self.contents.uses.push(UseEntry {
            path: vec![item.ident.to_string()],
            bind: Bind::Name(name),
            external: true,
            local,
        });
    }

    fn visit_path(&mut self, path: &'ast Path) {
        if path.leading_colon.is_none() {
            let segments = path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            self.contents.refs.push(Ref::Code(segments));
        }
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast Macro) {
        self.visit_path(&mac.path);
        if let Ok(exprs) = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) {
            for expr in &exprs {
                self.visit_expr(expr);
            }
        }
    }
}
