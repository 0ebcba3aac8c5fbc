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
