//! The layout rule on the real workspace: no two files import each other.
//! `cargo run -p concord-layout` prints any pair with the path that made
//! each import, and `-- --edges FILE` what one file imports and who
//! imports it.

use std::fmt::Write as _;
use std::path::Path;

use concord_layout::import_graph;

#[test]
fn no_two_files_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let graph = import_graph(&root).expect("the workspace's import graph");
    let pairs = graph.mutual_pairs();
    let mut listing = String::new();
    for (a, b) in &pairs {
        let there = graph.via(a, b).unwrap_or_default();
        let back = graph.via(b, a).unwrap_or_default();
        let _ = writeln!(
            listing,
            "  {} <-> {}  ({there} / {back})",
            a.display(),
            b.display()
        );
    }
    assert!(
        pairs.is_empty(),
        "{} pairs of files import each other:\n{listing}",
        pairs.len()
    );
}

/// The strategies crate's layers, from the top down (its crate docs and the
/// book's Internals page name them): a file imports files of its own layer
/// or of layers below, never above. The crate root's files sit outside
/// the folders: `writer.rs` above every layer, the shared words
/// (`error.rs`, `outcome.rs`, `object_key.rs`) below every layer. Unit
/// tests kept in a file of their own (`*_tests.rs`) may reach up.
#[test]
fn the_strategies_layers_import_only_downward() {
    const LAYERS: [&str; 8] = [
        "top", "strategy", "runner", "target", "body", "model", "wire", "words",
    ];
    fn layer(file: &Path) -> Option<usize> {
        let inside = file.strip_prefix("strategies/src").ok()?;
        let name = match inside.components().next()?.as_os_str().to_str()? {
            "lib.rs" | "mock.rs" => return None,
            "writer.rs" => "top",
            "error.rs" | "outcome.rs" | "object_key.rs" => "words",
            folder => folder,
        };
        LAYERS.iter().position(|l| *l == name)
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let graph = import_graph(&root).expect("the workspace's import graph");
    let mut upward = String::new();
    let mut seen = 0;
    for (from, to) in graph.edges() {
        let (Some(a), Some(b)) = (layer(from), layer(to)) else {
            continue;
        };
        seen += 1;
        let in_tests = from.to_string_lossy().ends_with("_tests.rs");
        if b < a && !in_tests {
            let via = graph.via(from, to).unwrap_or_default();
            let _ = writeln!(
                upward,
                "  {} ({}) -> {} ({})  via {via}",
                from.display(),
                LAYERS[a],
                to.display(),
                LAYERS[b]
            );
        }
    }
    assert!(
        seen > 100,
        "only {seen} imports inside the strategies crate"
    );
    assert!(upward.is_empty(), "imports that go up a layer:\n{upward}");
}
