//! The troubleshooting page is keyed by the messages the programs print:
//! searching the page for a message's words finds its row.
//!
//! The messages are read from the sources of every published crate
//! (framework, `cargo-concord`, strategies, featuregates, testenv), by one
//! rule: every `#[error("…")]` of a public error type, before the file's
//! `#[cfg(test)]` part, is a message; its static text is what lies between
//! its `{…}` placeholders. The page must have one line that holds every
//! piece of that static text, in order, and that names the error's
//! variant (or struct) in backticks; a `#[error(transparent)]` variant
//! prints its inner error's message, so only its name must be there. The
//! two errors whose `Display` is written by hand, `ConfigError` and
//! `Warning`, are rendered from values the public API returns.
//!
//! ```text
//! cargo test -p concord-tests --test book troubleshooting::
//! ```

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use concord::featuregates::FeatureSpec;
use concord::{ManagerArgs, featuregates::FeatureRegistry};
use concord_tests::workspace;

/// The sources of the published crates.
const SOURCES: &[&str] = &[
    "framework/src",
    "framework/cargo-concord/src",
    "strategies/src",
    "featuregates/src",
    "tests/testenv/src",
];

fn page() -> Result<String> {
    let path = workspace().join("book/src/troubleshooting.md");
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// One `#[error]` message.
#[derive(Debug)]
struct Message {
    file: PathBuf,
    /// The variant or struct it belongs to.
    name: String,
    /// The format string; `None` for `transparent`.
    format: Option<String>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The string literal at the start of `text` (after `"`), decoded, and
/// the rest after its closing quote.
fn literal(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &text[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                '\n' => {
                    // A line continuation: the next line's indentation goes.
                    let rest = &text[i + 2..];
                    let skip = rest.len() - rest.trim_start().len();
                    for _ in 0..rest[..skip].chars().count() {
                        chars.next();
                    }
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

/// The name of the item an attribute belongs to, from `after` (the text
/// right after the attribute's message): the first line past the
/// attribute's `)]` that is not an attribute, a comment or blank.
fn item_name(after: &str) -> Option<String> {
    let close = after.find(")]")?;
    for line in after[close + 2..].lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("#[") || line.starts_with("//") {
            continue;
        }
        let line = line
            .trim_start_matches("pub ")
            .trim_start_matches("struct ")
            .trim_start_matches("enum ");
        let name: String = line
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        return (!name.is_empty()).then_some(name);
    }
    None
}

/// Whether the error at `offset` of `text` is public: the struct it is
/// on is `pub`, or the enum declared last before it is.
fn is_public(text: &str, offset: usize, name: &str) -> bool {
    let declaration = |line: &str| {
        let line = line.trim();
        ["enum ", "struct "]
            .iter()
            .any(|kw| line.starts_with(kw) || line.contains(&format!(" {kw}")))
            && !line.starts_with("//")
    };
    if text[offset..]
        .lines()
        .find(|l| declaration(l))
        .is_some_and(|l| l.contains(&format!("struct {name}")))
    {
        return text[offset..]
            .lines()
            .find(|l| declaration(l))
            .is_some_and(|l| l.trim().starts_with("pub struct"));
    }
    text[..offset]
        .lines()
        .rev()
        .find(|l| declaration(l))
        .is_some_and(|l| l.trim().starts_with("pub enum"))
}

fn messages() -> Result<Vec<Message>> {
    let mut files = Vec::new();
    for dir in SOURCES {
        rust_files(&workspace().join(dir), &mut files)?;
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let full = std::fs::read_to_string(&file)?;
        let text = full.split("#[cfg(test)]").next().unwrap_or_default();
        let mut from = 0;
        while let Some(at) = text[from..].find("#[error(") {
            let start = from + at;
            let body = text[start + "#[error(".len()..].trim_start();
            let (format, after) = match body.strip_prefix("transparent") {
                Some(after) => (None, after),
                None => {
                    let quoted = body.strip_prefix('"').with_context(|| {
                        format!("{}: #[error] without a string", file.display())
                    })?;
                    let (format, after) = literal(quoted)
                        .with_context(|| format!("{}: unterminated message", file.display()))?;
                    (Some(format), after)
                }
            };
            let name = item_name(after)
                .with_context(|| format!("{}: #[error] on nothing", file.display()))?;
            if is_public(text, start, &name) {
                found.push(Message {
                    file: file.clone(),
                    name,
                    format,
                });
            }
            from = start + 1;
        }
    }
    Ok(found)
}

/// The static pieces of `format`, between its placeholders.
fn pieces(format: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in format.chars() {
        match (c, depth) {
            ('{', _) => {
                depth += 1;
                out.push(std::mem::take(&mut current));
            }
            ('}', d) if d > 0 => depth -= 1,
            (c, 0) => current.push(c),
            _ => {}
        }
    }
    out.push(current);
    out.into_iter()
        .flat_map(|p| {
            p.split('\n')
                .map(|s| s.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether `line` holds every piece, in order.
fn holds_in_order(line: &str, pieces: &[String]) -> bool {
    let mut rest = line;
    for piece in pieces {
        match rest.find(piece.as_str()) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    true
}

#[test]
fn every_error_message_of_every_published_crate_is_on_the_page() -> Result<()> {
    let page = page()?;
    let found = messages()?;
    // The rule finds the errors it should: a sample of each crate's.
    for name in [
        "ConflictRetriesExhausted",
        "Client",
        "AddFinalizer",
        "UnknownGate",
        "DuplicateGate",
        "BuildFailed",
        "InvalidSchedule",
        "NotAProject",
        "Certificate",
        "UnknownStrategy",
    ] {
        assert!(
            found.iter().any(|m| m.name == name),
            "the extraction missed {name}: {found:#?}"
        );
    }
    let mut missing = Vec::new();
    for message in &found {
        let name = format!("`{}`", message.name);
        let ok = match &message.format {
            None => page.contains(&name),
            Some(format) => {
                let pieces = pieces(format);
                page.lines()
                    .any(|line| line.contains(&name) && holds_in_order(line, &pieces))
            }
        };
        if !ok {
            missing.push(format!(
                "{} ({}): {}",
                message.name,
                message
                    .file
                    .strip_prefix(workspace())
                    .unwrap_or(&message.file)
                    .display(),
                message.format.as_deref().unwrap_or("transparent")
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {} messages are not on book/src/troubleshooting.md (one line naming the variant in backticks, with the message's static text in order):\n{}",
        missing.len(),
        found.len(),
        missing.join("\n")
    );
    Ok(())
}

#[test]
fn the_hand_written_messages_are_on_the_page_as_rendered() -> Result<()> {
    let page = page()?;
    // `ConfigError`: what the loader returns for an unknown gate.
    let err = ManagerArgs::new()
        .with_feature_gates("NoSuchGate=true")
        .load_config(FeatureRegistry::new())
        .err()
        .context("an unknown gate is refused")?;
    let rendered = err.to_string();
    let first = rendered.lines().next().unwrap_or_default();
    let head = first
        .split(|c: char| c.is_ascii_digit())
        .next()
        .unwrap_or_default();
    assert!(
        head.starts_with("invalid concord configuration, ") && page.contains(head.trim()),
        "{head:?} (of {rendered:?}) is on the page"
    );
    assert!(
        page.contains("unknown feature gate `"),
        "its problem line is on the page: {rendered}"
    );

    // `Warning`: what setting a deprecated gate reports.
    let mut registry = FeatureRegistry::new();
    registry.register(FeatureSpec::deprecated("OldWrites"))?;
    let config = ManagerArgs::new()
        .with_feature_gates("OldWrites=false")
        .load_config(registry)?;
    assert!(
        !config.warnings().is_empty(),
        "setting a deprecated gate warns"
    );
    for warning in config.warnings() {
        let text = warning.to_string();
        let tail = text.rsplit(';').next().unwrap_or_default().trim();
        assert!(
            text.starts_with("setting ") && page.contains(tail),
            "{text:?} is on the page"
        );
    }
    Ok(())
}

#[test]
fn the_page_never_offers_explain_for_a_configuration_it_cannot_load() -> Result<()> {
    // `--explain` loads the same configuration and fails the same way.
    let page = page()?;
    let offers: Vec<&str> = page
        .lines()
        .filter(|line| line.contains("`Config`") && line.contains("--explain"))
        .collect();
    assert!(offers.is_empty(), "{offers:#?}");
    Ok(())
}
