//! The import graph of tiny synthetic workspaces written to a temp folder.

// `allow-expect-in-tests` covers `#[test]` functions, not the helper.
#![allow(clippy::expect_used)]

use std::fs;
use std::path::Path;

use concord_layout::{Graph, LayoutError, import_graph};

/// Writes a one-member workspace (member `a`) holding `files` (paths
/// relative to the member) and builds its graph.
fn graph_of(files: &[(&str, &str)]) -> Result<Graph, LayoutError> {
    let root = tempfile::tempdir().expect("temp dir");
    let manifests = [
        (
            "Cargo.toml",
            "[workspace]\nmembers = [\n  \"a\", # the only member\n]\n",
        ),
        (
            "a/Cargo.toml",
            "[package]\nname = \"a\"\n\n[[bin]]\nname = \"tool\"\npath = \"tool/start.rs\"\n",
        ),
    ];
    for (path, text) in manifests
        .iter()
        .copied()
        .chain(files.iter().map(|&(path, text)| (path, text)))
    {
        let path = if path == "Cargo.toml" || path.starts_with("a/") {
            root.path().join(path)
        } else {
            root.path().join("a").join(path)
        };
        fs::create_dir_all(path.parent().expect("a parent folder")).expect("create folders");
        fs::write(&path, text).expect("write file");
    }
    import_graph(root.path())
}

/// Whether `from` imports `to`, both relative to the member `a`.
fn imports(graph: &Graph, from: &str, to: &str) -> bool {
    graph
        .via(&Path::new("a").join(from), &Path::new("a").join(to))
        .is_some()
}

#[test]
fn a_reexport_through_mod_rs_resolves_to_the_defining_file() {
    let graph = graph_of(&[
        ("src/lib.rs", "mod m;\nmod user;\n"),
        (
            "src/m/mod.rs",
            "mod inner;\nmod sibling;\npub use inner::X;\n",
        ),
        ("src/m/inner.rs", "pub struct X;\n"),
        ("src/m/sibling.rs", "pub fn f() -> super::X { super::X }\n"),
        ("src/user.rs", "use crate::m::X;\npub fn g(_: X) {}\n"),
    ])
    .expect("graph");
    assert!(imports(&graph, "src/user.rs", "src/m/inner.rs"));
    assert!(!imports(&graph, "src/user.rs", "src/m/mod.rs"));
    assert!(imports(&graph, "src/m/sibling.rs", "src/m/inner.rs"));
    assert!(!imports(&graph, "src/m/sibling.rs", "src/m/mod.rs"));
    assert!(imports(&graph, "src/m/mod.rs", "src/m/inner.rs"));
    assert_eq!(
        graph.via(Path::new("a/src/user.rs"), Path::new("a/src/m/inner.rs")),
        Some("crate::m::X")
    );
    assert!(graph.mutual_pairs().is_empty());
}

#[test]
fn a_real_two_cycle_is_found_with_the_paths_that_make_it() {
    let graph = graph_of(&[
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\npub fn make() -> Option<crate::a::A> { None }\n",
        ),
        ("src/c.rs", "use crate::a::A;\n"),
    ])
    .expect("graph");
    let pair = (
        Path::new("a/src/a.rs").to_path_buf(),
        Path::new("a/src/b.rs").to_path_buf(),
    );
    assert_eq!(graph.mutual_pairs(), vec![pair]);
    assert_eq!(
        graph.via(Path::new("a/src/a.rs"), Path::new("a/src/b.rs")),
        Some("crate::b::B")
    );
    assert_eq!(
        graph.via(Path::new("a/src/b.rs"), Path::new("a/src/a.rs")),
        Some("crate::a::A")
    );
    assert_eq!(graph.importers(Path::new("a/src/a.rs")).len(), 2);
}

#[test]
fn a_glob_of_super_from_a_child_test_file_is_not_a_cycle() {
    let graph = graph_of(&[
        ("src/lib.rs", "mod a;\n"),
        ("src/a.rs", "pub fn f() {}\n#[cfg(test)]\nmod tests;\n"),
        (
            "src/a/tests.rs",
            "use super::*;\n#[test]\nfn t() { f(); }\n",
        ),
    ])
    .expect("graph");
    assert_eq!(
        graph.via(Path::new("a/src/a/tests.rs"), Path::new("a/src/a.rs")),
        Some("super::*")
    );
    assert!(!imports(&graph, "src/a.rs", "src/a/tests.rs"));
    assert!(graph.mutual_pairs().is_empty());
}

#[test]
fn a_glob_imports_the_module_file_not_what_it_reexports() {
    let graph = graph_of(&[
        ("src/lib.rs", "mod m;\nmod user;\n"),
        ("src/m/mod.rs", "mod inner;\npub use inner::X;\n"),
        ("src/m/inner.rs", "pub struct X;\n"),
        ("src/user.rs", "use crate::m::*;\n"),
    ])
    .expect("graph");
    assert!(imports(&graph, "src/user.rs", "src/m/mod.rs"));
    assert!(!imports(&graph, "src/user.rs", "src/m/inner.rs"));
}

#[test]
fn an_inline_mod_tests_is_the_same_file() {
    let graph = graph_of(&[
        ("src/lib.rs", "mod a;\n"),
        (
            "src/a.rs",
            "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { f(); }\n}\n",
        ),
    ])
    .expect("graph");
    assert_eq!(graph.files().count(), 2);
    assert_eq!(graph.import_count(), 0);
}

#[test]
fn a_path_attribute_is_honoured() {
    let graph = graph_of(&[
        ("src/lib.rs", "mod a;\n"),
        (
            "src/a.rs",
            "#[path = \"a_helpers.rs\"]\nmod helpers;\nuse helpers::H;\n",
        ),
        ("src/a_helpers.rs", "mod deeper;\npub struct H;\n"),
        (
            "src/deeper.rs",
            "pub fn d() -> crate::a::helpers::H { crate::a::helpers::H }\n",
        ),
    ])
    .expect("graph");
    assert!(imports(&graph, "src/a.rs", "src/a_helpers.rs"));
    // A `#[path]` file is mod.rs-like: its children sit next to it.
    assert!(imports(&graph, "src/deeper.rs", "src/a_helpers.rs"));
}

#[test]
fn code_paths_count_and_an_unresolved_path_stops_at_the_deepest_module() {
    let graph = graph_of(&[
        (
            "src/main.rs",
            "mod a;\nmod b;\nfn main() { let _ = a::generated::made(); }\n",
        ),
        ("src/a.rs", "pub mod generated;\n"),
        ("src/a/generated.rs", "// items made by a macro\n"),
        (
            "src/b.rs",
            "fn g() -> usize { std::mem::size_of::<crate::a::generated::Made>() }\n",
        ),
    ])
    .expect("graph");
    assert!(imports(&graph, "src/main.rs", "src/a/generated.rs"));
    assert!(imports(&graph, "src/b.rs", "src/a/generated.rs"));
    assert!(!imports(&graph, "src/main.rs", "src/a.rs"));
}

#[test]
fn manifest_targets_are_crate_roots_and_other_crates_are_ignored() {
    let graph = graph_of(&[
        ("src/lib.rs", "pub struct Shared;\n"),
        (
            "tool/start.rs",
            "mod parts;\nuse a::Shared;\nfn main() { parts::run(); }\n",
        ),
        ("tool/parts.rs", "pub fn run() {}\n"),
    ])
    .expect("graph");
    assert!(imports(&graph, "tool/start.rs", "tool/parts.rs"));
    assert!(!imports(&graph, "tool/start.rs", "src/lib.rs"));
}

#[test]
fn a_file_that_does_not_parse_is_named() {
    let error = graph_of(&[("src/lib.rs", "mod broken;\n"), ("src/broken.rs", "fn (\n")])
        .expect_err("a parse error");
    assert!(error.to_string().contains("a/src/broken.rs"), "{error}");
}
