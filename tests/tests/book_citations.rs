//! Every test and file the book cites exists: a backquoted path ending in
//! `.rs`, `.sh` or `.yaml` names a file of the repository, and a
//! backquoted `snake_case` name of four words or more (the book's way of
//! citing a test) names a `fn` (or a public field) of the repository's
//! Rust sources. Metric
//! names (`concord_…`), absolute paths and the files of a scaffolded
//! project (`src/`, `deploy/`, `config/`, `tests/operator.rs`: the
//! scaffold test makes and checks those) are not citations.
//!
//! ```text
//! cargo test -p concord-tests --test book_citations
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use concord_tests::workspace;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every file under `dir` with one of `extensions`, but build output.
fn files(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["target", ".git", "book"].contains(&name.as_str()) || dir.ends_with("book") {
                files(&path, extensions, out);
            }
        } else if extensions.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// The backquoted spans of a Markdown text, outside fenced code blocks.
fn spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(inside), Some(_)) = (parts.next(), parts.next()) {
            out.push(inside.to_owned());
        }
    }
    out
}

/// Where the files of a project made by `cargo concord init` live.
const PROJECT_FILES: &[&str] = &["src/", "deploy/", "config/", "tests/operator.rs"];

fn is_test_name(span: &str) -> bool {
    !span.starts_with("concord_")
        && span.split('_').count() >= 4
        && span
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[test]
fn every_test_and_file_the_book_cites_exists() {
    let root = workspace();
    let mut pages = Vec::new();
    files(&root.join("book/src"), &[".md"], &mut pages);
    assert!(pages.len() > 10, "the book has pages: {pages:?}");
    let mut sources = Vec::new();
    files(&root, &[".rs"], &mut sources);
    let functions: BTreeSet<String> = sources
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            // A `fn`, or a field (the book cites a report's fields too).
            text.split("fn ")
                .skip(1)
                .chain(text.split("pub ").skip(1))
                .map(|rest| {
                    rest.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        })
        .collect();

    let mut missing = Vec::new();
    let mut cited = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for span in spans(&text) {
            let path = span.split_whitespace().next().unwrap_or_default();
            let looks_like_file = [".rs", ".sh", ".yaml"].iter().any(|e| path.ends_with(e))
                && path.contains('/')
                && !path.contains('<')
                && !path.contains('*')
                && !path.starts_with('/')
                && !PROJECT_FILES.iter().any(|p| path.starts_with(p));
            if looks_like_file {
                cited += 1;
                let candidates = [
                    root.join(path),
                    root.join("tests").join(path),
                    root.join("tests/tests").join(path),
                ];
                if !candidates.iter().any(|c| c.exists()) {
                    missing.push(format!("{name}: file `{path}`"));
                }
            } else if is_test_name(&span) {
                cited += 1;
                if !functions.contains(&span) {
                    missing.push(format!("{name}: test `{span}`"));
                }
            }
        }
    }
    assert!(cited > 20, "the book cites tests and files ({cited})");
    assert!(
        missing.is_empty(),
        "cited but missing:\n{}",
        missing.join("\n")
    );
}

#[test]
fn test_names_are_told_from_other_words() {
    assert!(is_test_name("one_leader_reconciles_and_takes_over"));
    assert!(!is_test_name("remove_finalizer"));
    assert!(!is_test_name("Error::Conflict"));
    assert_eq!(spans("a `b` c `d_e`\n```\n`x`\n```\n"), ["b", "d_e"]);
}
