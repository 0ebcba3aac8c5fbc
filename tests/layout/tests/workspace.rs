//! The layout rule on the real workspace.
//!
//! The pairs of files that still import each other are listed in
//! `tests/layout/pairs-left.txt`, one `a <-> b` per line: the work left.
//! A pair that is not listed fails the test (no new circle lands), and so
//! does a listed pair that is gone (the list only shrinks: delete its line
//! in the commit that untangles it). Print today's pairs, with the path
//! that made each import, with `cargo run -p concord-layout`.

use std::collections::BTreeSet;
use std::path::Path;

use concord_layout::import_graph;

#[test]
fn no_two_files_import_each_other_beyond_the_listed_ones() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = import_graph(&crate_dir.join("../..")).expect("the workspace's import graph");
    let found: BTreeSet<String> = graph
        .mutual_pairs()
        .iter()
        .map(|(a, b)| format!("{} <-> {}", a.display(), b.display()))
        .collect();
    let listed_text =
        std::fs::read_to_string(crate_dir.join("pairs-left.txt")).expect("pairs-left.txt");
    let listed: BTreeSet<String> = listed_text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let new: Vec<_> = found.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&found).collect();
    assert!(
        new.is_empty(),
        "files that import each other, not listed in pairs-left.txt (`cargo run -p concord-layout` shows the paths): {new:#?}"
    );
    assert!(
        gone.is_empty(),
        "pairs-left.txt lists pairs that no longer import each other: delete their lines {gone:#?}"
    );
}
