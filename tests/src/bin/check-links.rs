//! Checks the links of the built book (`mdbook build book`, with the API
//! reference copied under `book/book/api/`), without the network: every
//! relative `href` and `src` of every HTML page names a file that exists
//! (and, on a book page, an `id` that exists), no book page links to
//! docs.rs, and no page at all links to docs.rs for one of this
//! workspace's crates, which are not published.
//!
//! In the API reference, only links to pages (`….html`, a directory) are
//! followed: the documentation of a dependency's blanket impls (shown on
//! every type) carries that crate's intra-doc links unresolved, as text
//! like `Self::fg()`, because `--no-deps` does not build its pages; this
//! workspace's own intra-doc links are checked by `RUSTDOCFLAGS="-D
//! warnings" cargo doc`. Source views (`api/src/`) are code, not links;
//! rustdoc's lists of implementors in other crates (`trait.impl/`,
//! `type.impl/`) are loaded by script when they exist. mdBook's `404.html`
//! links from the site's root, wherever the book is served.
//!
//! ```text
//! cargo run -p concord-tests --bin check-links -- book/book
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

/// docs.rs pages of this workspace's crates: none exists.
const UNPUBLISHED: &[&str] = &["docs.rs/kube-concord", "docs.rs/cargo-concord"];

fn main() -> ExitCode {
    let Some(root) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: check-links BUILT_BOOK_DIR");
        return ExitCode::FAILURE;
    };
    match check(&root) {
        Ok((pages, problems)) if problems.is_empty() => {
            println!(
                "check-links: {pages} pages under {}, no dead link",
                root.display()
            );
            ExitCode::SUCCESS
        }
        Ok((_, problems)) => {
            for problem in &problems {
                eprintln!("{problem}");
            }
            eprintln!("check-links: {} problems", problems.len());
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("check-links: {}: {error}", root.display());
            ExitCode::FAILURE
        }
    }
}

/// The number of HTML pages under `root`, and every problem found.
fn check(root: &Path) -> std::io::Result<(usize, Vec<String>)> {
    let mut pages = BTreeMap::new();
    collect(root, root, &mut pages)?;
    if !pages.contains_key(Path::new("index.html")) {
        return Err(std::io::Error::other("no index.html: is the book built?"));
    }
    let ids: BTreeMap<&Path, BTreeSet<&str>> = pages
        .iter()
        .map(|(path, text)| (path.as_path(), attributes(text, "id").collect()))
        .collect();
    let mut problems = Vec::new();
    for (page, text) in &pages {
        let book_page = !page.starts_with("api");
        if page.starts_with("api/src") || page == Path::new("404.html") {
            continue;
        }
        for link in attributes(text, "href").chain(attributes(text, "src")) {
            if link.contains("docs.rs")
                && (book_page || UNPUBLISHED.iter().any(|u| link.contains(u)))
            {
                problems.push(format!("{}: links to docs.rs: {link}", page.display()));
                continue;
            }
            if link.contains("://")
                || link.starts_with("mailto:")
                || link.starts_with("javascript:")
            {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
            let file = file.split('?').next().unwrap_or_default();
            let names_a_page = file.is_empty() || file.ends_with(".html") || file.ends_with('/');
            let optional = file.contains("trait.impl/") || file.contains("type.impl/");
            if !book_page && ((!names_a_page && !file.contains('.')) || optional) {
                continue;
            }
            let target = if file.is_empty() {
                Some(page.clone())
            } else {
                resolve(page, file)
            };
            let Some(mut target) = target else {
                problems.push(format!("{}: link leaves the book: {link}", page.display()));
                continue;
            };
            if root.join(&target).is_dir() {
                target = target.join("index.html");
            }
            if !root.join(&target).exists() {
                problems.push(format!("{}: dead link: {link}", page.display()));
                continue;
            }
            // rustdoc's own anchors (`#method.x`, line ranges of source
            // pages) are made by script; the book's are ids.
            let checks_fragment = book_page && !fragment.is_empty() && !target.starts_with("api");
            if checks_fragment
                && !ids
                    .get(target.as_path())
                    .is_some_and(|ids| ids.contains(fragment))
            {
                problems.push(format!(
                    "{}: no #{fragment} in {}",
                    page.display(),
                    target.display()
                ));
            }
        }
    }
    Ok((pages.len(), problems))
}

/// Every `.html` file under `dir`, by path relative to `root`.
fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "html") {
            let text = std::fs::read_to_string(&path)?;
            let relative = path.strip_prefix(root).map_err(std::io::Error::other)?;
            out.insert(relative.to_path_buf(), text);
        }
    }
    Ok(())
}

/// The values of `name="…"` attributes in `html`.
fn attributes<'a>(html: &'a str, name: &str) -> impl Iterator<Item = &'a str> + 'a {
    let needle = format!(" {name}=\"");
    let starts: Vec<usize> = html
        .match_indices(&needle)
        .map(|(at, _)| at + needle.len())
        .collect();
    starts.into_iter().filter_map(move |start| {
        let rest = &html[start..];
        rest.find('"').map(|end| &rest[..end])
    })
}

/// `link` relative to `page`, both relative to the book's root; `None`
/// when it climbs out of the book.
fn resolve(page: &Path, link: &str) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = page
        .parent()
        .map(|p| p.iter().collect())
        .unwrap_or_default();
    for component in Path::new(link).components() {
        match component {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(pages: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in pages {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn dead_links_missing_anchors_and_docs_rs_are_reported() {
        let dir = book(&[
            (
                "index.html",
                r#"<a href="guide.html#run">x</a> <a href="gone.html">y</a> <a href="https://docs.rs/kube/latest">z</a>"#,
            ),
            (
                "guide.html",
                r#"<h2 id="install">i</h2> <a href="index.html#nowhere">b</a>"#,
            ),
            (
                "api/concord/index.html",
                r#"<a href="https://docs.rs/serde/1">ok</a> <a href="https://docs.rs/kube-concord/0.1.0">bad</a> <a href="../../guide.html">up</a>"#,
            ),
        ]);
        let (pages, problems) = check(dir.path()).unwrap();
        assert_eq!(pages, 3);
        assert_eq!(
            problems,
            [
                "api/concord/index.html: links to docs.rs: https://docs.rs/kube-concord/0.1.0",
                "guide.html: no #nowhere in index.html",
                "index.html: no #run in guide.html",
                "index.html: dead link: gone.html",
                "index.html: links to docs.rs: https://docs.rs/kube/latest",
            ]
        );
    }

    #[test]
    fn a_book_with_good_links_has_no_problem() {
        let dir = book(&[
            (
                "index.html",
                r##"<a href="sub/">s</a> <a href="#top">t</a> <b id="top"></b>"##,
            ),
            (
                "sub/index.html",
                r#"<img src="../index.html"> <a href="https://example.com">e</a>"#,
            ),
        ]);
        assert_eq!(check(dir.path()).unwrap(), (2, Vec::<String>::new()));
    }

    #[test]
    fn links_out_of_the_book_are_reported() {
        assert_eq!(resolve(Path::new("a/b.html"), "../../x.html"), None);
        assert_eq!(
            resolve(Path::new("a/b.html"), "../c/./d.html"),
            Some(PathBuf::from("c/d.html"))
        );
    }
}
