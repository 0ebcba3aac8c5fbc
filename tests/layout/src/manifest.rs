//! Finds the crate roots of the workspace from its manifests.
//!
//! The manifests are read with a minimal line-based reader: it knows section
//! headers, quoted strings, comments, the workspace's `members` array and the
//! `path` key of `[lib]`, `[[bin]]`, `[[example]]`, `[[test]]` and
//! `[[bench]]` sections, which is all this crate needs.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::LayoutError;
use crate::paths::{normalize, relative};

/// Every crate root of the workspace at `root`, as normalized absolute (or
/// `root`-based) paths, sorted. Skips `target/`, `templates/` folders and
/// `build.rs`.
pub(crate) fn crate_roots(root: &Path) -> Result<Vec<PathBuf>, LayoutError> {
    let manifest = root.join("Cargo.toml");
    let text = read(root, &manifest)?;
    let members = members(&text).ok_or_else(|| LayoutError::Manifest {
        path: relative(root, &manifest),
        message: "no `members = [...]` list under [workspace]".to_owned(),
    })?;
    let mut dirs = BTreeSet::new();
    if sections(&text).any(|section| section == "package") {
        dirs.insert(root.to_path_buf());
    }
    for member in members {
        match member.strip_suffix("/*") {
            Some(parent) => dirs.extend(
                subdirs(&root.join(parent))
                    .into_iter()
                    .filter(|dir| dir.join("Cargo.toml").is_file()),
            ),
            None => {
                dirs.insert(normalize(&root.join(member)));
            }
        }
    }
    let mut roots = BTreeSet::new();
    for dir in dirs {
        let text = read(root, &dir.join("Cargo.toml"))?;
        roots.extend(member_roots(&dir, &text));
    }
    Ok(roots
        .into_iter()
        .filter(|path| !skipped(root, path))
        .collect())
}

/// The crate roots of one member: cargo's conventional places plus the
/// `path` of each target section of its manifest.
fn member_roots(dir: &Path, manifest: &str) -> Vec<PathBuf> {
    let mut roots = vec![dir.join("src/lib.rs"), dir.join("src/main.rs")];
    for folder in ["src/bin", "tests", "examples", "benches"] {
        for entry in entries(&dir.join(folder)) {
            if entry.is_dir() {
                roots.push(entry.join("main.rs"));
            } else if entry.extension().is_some_and(|ext| ext == "rs") {
                roots.push(entry);
            }
        }
    }
    roots.extend(
        target_paths(manifest)
            .into_iter()
            .map(|path| dir.join(path)),
    );
    roots
        .into_iter()
        .map(|path| normalize(&path))
        .filter(|path| path.is_file())
        .collect()
}

/// Whether a crate root is left out: anything under `target/` or a
/// `templates/` folder (scaffold templates, not compiled here), and `build.rs`.
fn skipped(root: &Path, path: &Path) -> bool {
    let inside = relative(root, path);
    inside
        .components()
        .any(|part| part.as_os_str() == "target" || part.as_os_str() == "templates")
        || path.file_name().is_some_and(|name| name == "build.rs")
}

/// The strings of the `members` array under `[workspace]`.
fn members(manifest: &str) -> Option<Vec<String>> {
    let mut section = String::new();
    let mut collecting: Option<String> = None;
    for line in manifest.lines().map(strip_comment) {
        if let Some(array) = collecting.as_mut() {
            array.push_str(line);
        } else if let Some(name) = header(line) {
            section = name;
            continue;
        } else if section == "workspace" && key(line) == Some("members") {
            let (_, value) = line.split_once('=')?;
            collecting = Some(value.to_owned());
        }
        if let Some(array) = collecting.as_ref().filter(|array| array.contains(']')) {
            return Some(strings(array));
        }
    }
    None
}

/// The `path` values of the target sections (`[lib]`, `[[bin]]`, ...).
fn target_paths(manifest: &str) -> Vec<String> {
    let targets = ["lib", "bin", "example", "test", "bench"];
    let mut section = String::new();
    let mut paths = Vec::new();
    for line in manifest.lines().map(strip_comment) {
        if let Some(name) = header(line) {
            section = name;
        } else if targets.contains(&section.as_str()) && key(line) == Some("path") {
            paths.extend(strings(line).into_iter().take(1));
        }
    }
    paths
}

/// The section names of a manifest, in order.
fn sections(manifest: &str) -> impl Iterator<Item = String> + '_ {
    manifest.lines().map(strip_comment).filter_map(header)
}

/// `[name]` or `[[name]]` gives `name`.
fn header(line: &str) -> Option<String> {
    let line = line.trim();
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let inner = inner
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(inner);
    Some(inner.trim().to_owned())
}

/// The bare key of a `key = value` line.
fn key(line: &str) -> Option<&str> {
    line.split_once('=').map(|(key, _)| key.trim())
}

/// The contents of every quoted string in `text` (basic or literal).
fn strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            out.push(chars.by_ref().take_while(|&d| d != c).collect());
        }
    }
    out
}

/// `line` without a trailing `#` comment (a `#` inside a string is kept).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (at, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..at],
            (None, '"' | '\'') => quote = Some(c),
            (Some(open), _) if c == open => quote = None,
            _ => {}
        }
    }
    line
}

/// The files and folders directly inside `dir`, sorted; none when it is not
/// a readable folder.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    out.sort();
    out
}

/// The folders directly inside `dir`, sorted.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    entries(dir)
        .into_iter()
        .filter(|path| path.is_dir())
        .collect()
}

/// The text of `path`, or an error naming it relative to `root`.
fn read(root: &Path, path: &Path) -> Result<String, LayoutError> {
    fs::read_to_string(path).map_err(|source| LayoutError::Read {
        path: relative(root, path),
        source,
    })
}
