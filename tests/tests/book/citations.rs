//! Every test and file the book cites exists: a backquoted path ending in
//! `.rs`, `.sh` or `.yaml` names a file of the repository, and a
//! backquoted `snake_case` name of four words or more (the book's way of
//! citing a test) names a `fn` (or a public field) of the repository's
//! Rust sources. Metric
//! names (`concord_…`), absolute paths and the files of a scaffolded
//! project (`src/`, `deploy/`, `config/`, `tests/operator.rs`: the
//! scaffold test makes and checks those) are not citations.
//!
//! Every `cargo` command line of the book (and of the README and the
//! getting-started script) names packages, test targets, examples and
//! binaries the workspace has, and a test name filter after `--test X`
//! matches a test of `X`: no published command runs zero tests.
//!
//! ```text
//! cargo test -p concord-tests --test book citations::
//! ```

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

/// The targets of the workspace a `cargo` command line can name: packages,
/// test targets, examples and binaries, read from every member's
/// `Cargo.toml` and the files cargo discovers by itself.
#[derive(Default)]
struct Targets {
    packages: BTreeSet<String>,
    tests: BTreeSet<String>,
    examples: BTreeSet<String>,
    bins: BTreeSet<String>,
    /// The text of each test target's file, to check a name filter.
    test_sources: Vec<(String, String)>,
}

fn rs_stems(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter_map(|path| {
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            if path.extension().is_some_and(|e| e == "rs") {
                Some((stem, path))
            } else if path.join("main.rs").exists() {
                Some((stem, path.join("main.rs")))
            } else {
                None
            }
        })
        .collect()
}

/// The files of the test target whose root is `root`: the root and every
/// file of its module tree, each `mod name;` found where rustc finds it.
fn crate_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    module_files(root, root.parent().unwrap(), &mut out);
    out
}

/// `file` and the files of the modules it declares out of line, which live
/// in `dir` unless a `#[path]` (relative to `file`'s folder) names one.
fn module_files(file: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    out.push(file.to_path_buf());
    let mut named = None;
    for line in text.lines().map(str::trim) {
        if let Some(path) = line
            .strip_prefix("#[path = \"")
            .and_then(|rest| rest.strip_suffix("\"]"))
        {
            named = Some(file.parent().unwrap().join(path));
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let declared = line
            .split_once("mod ")
            .filter(|(visibility, _)| visibility.is_empty() || visibility.starts_with("pub"))
            .and_then(|(_, rest)| rest.strip_suffix(';'))
            .filter(|name| name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        if let Some(name) = declared {
            let flat = dir.join(format!("{name}.rs"));
            let (child, child_dir) = match named.take() {
                // A `#[path]` file keeps its own modules beside it, as a
                // `mod.rs` does.
                Some(path) => {
                    let folder = path.parent().unwrap().to_path_buf();
                    (path, folder)
                }
                None if flat.exists() => (flat, dir.join(name)),
                None => (dir.join(name).join("mod.rs"), dir.join(name)),
            };
            module_files(&child, &child_dir, out);
        }
        named = None;
    }
}

/// The text of every file of the test target whose root is `root`.
fn crate_source(root: &Path) -> String {
    crate_files(root)
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

fn workspace_targets(root: &Path) -> Targets {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("the workspace lists its members");
    let mut targets = Targets::default();
    for member in members.split('"').skip(1).step_by(2) {
        let dir = root.join(member);
        let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let mut section = "";
        // Each `[[test]]` section's name and, if it has one, path.
        let mut declared_tests: Vec<(String, Option<String>)> = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
                if section == "[[test]]" {
                    declared_tests.push((String::new(), None));
                }
                continue;
            }
            if section == "[[test]]"
                && let Some(path) = line
                    .strip_prefix("path = \"")
                    .and_then(|rest| rest.strip_suffix('"'))
                && let Some(test) = declared_tests.last_mut()
            {
                test.1 = Some(path.to_owned());
                continue;
            }
            let Some(name) = line
                .strip_prefix("name = \"")
                .and_then(|rest| rest.strip_suffix('"'))
            else {
                continue;
            };
            match section {
                "[package]" => {
                    targets.packages.insert(name.to_owned());
                    if dir.join("src/main.rs").exists() {
                        targets.bins.insert(name.to_owned());
                    }
                }
                "[[example]]" => {
                    targets.examples.insert(name.to_owned());
                }
                "[[bin]]" => {
                    targets.bins.insert(name.to_owned());
                }
                "[[test]]" => {
                    if let Some(test) = declared_tests.last_mut() {
                        test.0 = name.to_owned();
                    }
                }
                _ => {}
            }
        }
        for (stem, _) in rs_stems(&dir.join("examples")) {
            targets.examples.insert(stem);
        }
        for (stem, _) in rs_stems(&dir.join("src/bin")) {
            targets.bins.insert(stem);
        }
        // A target of several files (`tests/<name>/main.rs` and its
        // modules): every file of its module tree, and no other binary's
        // file that shares its folder.
        for (stem, path) in rs_stems(&dir.join("tests")) {
            targets.tests.insert(stem.clone());
            targets.test_sources.push((stem, crate_source(&path)));
        }
        // A declared target (`[[test]]`), at its `path` when it has one.
        for (name, path) in declared_tests {
            if let Some(path) = path {
                targets
                    .test_sources
                    .push((name.clone(), crate_source(&dir.join(path))));
            }
            targets.tests.insert(name);
        }
    }
    targets
}

/// Every `cargo …` command line of the book, a line continued with `\`
/// joined to the next, from code blocks and backquoted spans alike.
fn cargo_commands(text: &str) -> Vec<String> {
    let mut joined = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(start) = line.strip_suffix('\\') {
            pending.push_str(start);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        joined.push(std::mem::take(&mut pending));
    }
    let mut commands = Vec::new();
    for line in joined {
        for piece in line.split('`') {
            let mut rest = piece;
            while let Some(at) = rest.find("cargo ") {
                let command = &rest[at..];
                let end = command
                    .find(['#', ';', '|', '&', ')'])
                    .unwrap_or(command.len());
                let words: Vec<&str> = command[..end].split_whitespace().collect();
                commands.push(words.join(" "));
                rest = &command["cargo ".len()..];
            }
        }
    }
    commands
}

/// What is wrong with one command line: a package, test target, example
/// or binary the workspace does not have, or a test filter that matches no
/// test of the named target (a command that would run zero tests).
fn command_problems(command: &str, targets: &Targets) -> Vec<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    // Only the words before `--`: after it come the program's own.
    let ours = words.iter().position(|w| *w == "--").unwrap_or(words.len());
    let mut problems = Vec::new();
    let mut test_target = None;
    let mut i = 0;
    while i < ours {
        let (flag, value) = match words[i].split_once('=') {
            Some((flag, value)) => (flag, Some(value)),
            None => (words[i], words.get(i + 1).copied()),
        };
        let known = match flag {
            "-p" | "--package" => Some(&targets.packages),
            "--test" => Some(&targets.tests),
            "--example" => Some(&targets.examples),
            "--bin" => Some(&targets.bins),
            _ => None,
        };
        if let (Some(known), Some(value)) = (known, value) {
            let plain = value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if plain && !known.contains(value) {
                problems.push(format!("{flag} {value} does not exist"));
            }
            if flag == "--test" {
                test_target = Some(value);
            }
            if !words[i].contains('=') {
                i += 1;
            }
        }
        i += 1;
    }
    // `cargo test … --test X FILTER`: the filter must match a test of X.
    if words.get(1) == Some(&"test")
        && let Some(target) = test_target
    {
        const TAKES_VALUE: &[&str] = &[
            "-p",
            "--package",
            "--test",
            "--example",
            "--bin",
            "--features",
            "-F",
            "-j",
            "--jobs",
            "--target",
            "--target-dir",
            "--manifest-path",
            "--profile",
            "--color",
            "--config",
            "-Z",
        ];
        let mut filters = Vec::new();
        let mut j = 2;
        while j < ours {
            let word = words[j];
            if word.starts_with('-') {
                if TAKES_VALUE.contains(&word) {
                    j += 1;
                }
            } else {
                filters.push(word);
            }
            j += 1;
        }
        for filter in filters {
            let found = targets
                .test_sources
                .iter()
                .filter(|(stem, _)| stem == target)
                .flat_map(|(_, source)| {
                    // A filter matches a test's path: its modules and name.
                    source
                        .split("fn ")
                        .skip(1)
                        .chain(source.split("mod ").skip(1))
                        .map(|rest| {
                            rest.chars()
                                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                .collect::<String>()
                        })
                        .collect::<Vec<_>>()
                })
                .any(|name| name.contains(filter));
            // `module::` or `module::test`: each part names a module or test.
            let found = found
                || (filter.contains("::")
                    && filter
                        .split("::")
                        .filter(|part| !part.is_empty())
                        .all(|part| {
                            targets
                                .test_sources
                                .iter()
                                .filter(|(stem, _)| stem == target)
                                .any(|(_, source)| {
                                    source.contains(&format!("mod {part}"))
                                        || source.contains(&format!("fn {part}"))
                                })
                        }));
            if !found {
                problems.push(format!("no test of --test {target} matches `{filter}`"));
            }
        }
    }
    problems
}

#[test]
fn every_cargo_command_of_the_book_names_existing_targets() {
    let root = workspace();
    let targets = workspace_targets(&root);
    assert!(targets.tests.contains("book"), "{:?}", targets.tests);
    assert!(
        targets.examples.contains("race-bench"),
        "{:?}",
        targets.examples
    );
    let mut pages = Vec::new();
    files(&root.join("book/src"), &[".md", ".sh"], &mut pages);
    files(&root.join("tests/tests/scaffold"), &[".sh"], &mut pages);
    pages.push(root.join("README.md"));
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for command in cargo_commands(&text) {
            checked += 1;
            for problem in command_problems(&command, &targets) {
                problems.push(format!("{name}: `{command}`: {problem}"));
            }
        }
    }
    assert!(checked > 30, "the book has cargo commands ({checked})");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_test_target_is_the_files_of_its_module_tree() {
    let tests = workspace().join("tests/tests");
    let holds = |files: &[PathBuf], path: &str| files.iter().any(|f| f.ends_with(path));
    // A folder's binary: its modules, those modules' `crate::` imports
    // included (`chaos.rs` uses `crate::support`), and nothing else.
    let sharding = crate_files(&tests.join("sharding/main.rs"));
    assert!(holds(&sharding, "sharding/rings.rs"), "{sharding:?}");
    assert!(holds(&sharding, "sharding/chaos.rs"), "{sharding:?}");
    assert!(holds(&sharding, "sharding/support/mod.rs"), "{sharding:?}");
    assert!(!holds(&sharding, "reliability/chaos.rs"), "{sharding:?}");
    // A `#[path]` module, a module's module (`exact_values/ledger.rs`) and a
    // `mod.rs`'s module (`support/gizmo.rs`).
    let controller = crate_files(&tests.join("controller/main.rs"));
    assert!(
        holds(&controller, "strategies/exact_support/mod.rs"),
        "{controller:?}"
    );
    let strategies = crate_files(&tests.join("strategies/main.rs"));
    assert!(
        holds(&strategies, "strategies/exact_values/ledger.rs"),
        "{strategies:?}"
    );
    let observability = crate_files(&tests.join("observability/main.rs"));
    assert!(
        holds(&observability, "webhooks/support/gizmo.rs"),
        "{observability:?}"
    );
}

#[test]
fn a_command_naming_a_missing_target_or_an_empty_filter_is_told() {
    let targets = Targets {
        packages: ["concord-tests".to_owned()].into(),
        tests: ["strategies_stress".to_owned()].into(),
        examples: ["race-bench".to_owned()].into(),
        bins: BTreeSet::new(),
        test_sources: vec![(
            "strategies_stress".to_owned(),
            "//! The stress tests print labels.\nmod stress {\nasync fn stress_eight_writers() {}\n}"
                .to_owned(),
        )],
    };
    let ok = "cargo test -p concord-tests --test strategies_stress stress_eight -- --nocapture";
    assert!(command_problems(ok, &targets).is_empty());
    let module = "cargo test -p concord-tests --test strategies_stress stress::stress_eight";
    assert!(command_problems(module, &targets).is_empty());
    let wrong_module = "cargo test -p concord-tests --test strategies_stress apply::";
    assert_eq!(
        command_problems(wrong_module, &targets),
        ["no test of --test strategies_stress matches `apply::`"]
    );
    let moved = "cargo test -p concord-tests --test strategies stress -- --nocapture";
    let filtered = "cargo test -p concord-tests --test strategies_stress labels";
    assert_eq!(
        command_problems(filtered, &targets),
        ["no test of --test strategies_stress matches `labels`"]
    );
    assert_eq!(
        command_problems(moved, &targets),
        [
            "--test strategies does not exist",
            "no test of --test strategies matches `stress`"
        ]
    );
    let empty = "cargo test -p concord-tests --test strategies_stress no_such_test";
    assert_eq!(
        command_problems(empty, &targets),
        ["no test of --test strategies_stress matches `no_such_test`"]
    );
    let example = "cargo run --release --example race_bench -- --pods 10";
    assert_eq!(
        command_problems(example, &targets),
        ["--example race_bench does not exist"]
    );
    assert_eq!(
        cargo_commands(
            "run `cargo test --test a \\\n  b` then\n```\ncargo run --example x # note\n```"
        ),
        ["cargo test --test a b", "cargo run --example x"]
    );
}
