//! Edits at scaffold markers: `// +concord:scaffold:NAME` lines in the
//! project's `src/main.rs`, above which `create api` inserts
//! registrations. An insertion already present is not repeated, so
//! running a command twice changes nothing.

use std::path::Path;

use crate::Error;

/// The marker comment of `name`.
pub(crate) fn marker(name: &str) -> String {
    format!("// +concord:scaffold:{name}")
}

/// Inserts `lines` above the marker `name` of `text`, indented like the
/// marker, skipping those already present (compared trimmed).
///
/// # Errors
///
/// [`Error::MissingMarker`] naming `file` when the marker is not there.
pub(crate) fn insert(
    text: &str,
    file: &Path,
    name: &str,
    lines: &[String],
) -> Result<String, Error> {
    let marker = marker(name);
    let Some(at) = text.lines().position(|l| l.trim() == marker) else {
        return Err(Error::MissingMarker {
            file: file.to_path_buf(),
            marker,
        });
    };
    let existing: Vec<&str> = text.lines().collect();
    let indent: String = existing[at]
        .chars()
        .take_while(|c| c.is_whitespace())
        .collect();
    let missing: Vec<String> = lines
        .iter()
        .filter(|line| !existing.iter().any(|l| l.trim() == line.trim()))
        .map(|line| format!("{indent}{line}"))
        .collect();
    if missing.is_empty() {
        return Ok(text.to_owned());
    }
    let mut out: Vec<String> = existing[..at].iter().map(|l| (*l).to_owned()).collect();
    out.extend(missing);
    out.extend(existing[at..].iter().map(|l| (*l).to_owned()));
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "fn f() {\n    // +concord:scaffold:controllers\n}\n";

    #[test]
    fn insertion_is_indented_and_idempotent() {
        let file = Path::new("src/main.rs");
        let line = vec!["a::add(m);".to_owned()];
        let once = insert(TEXT, file, "controllers", &line).unwrap();
        assert_eq!(
            once,
            "fn f() {\n    a::add(m);\n    // +concord:scaffold:controllers\n}\n"
        );
        assert_eq!(insert(&once, file, "controllers", &line).unwrap(), once);
        let twice = insert(&once, file, "controllers", &["b::add(m);".to_owned()]).unwrap();
        assert!(twice.contains("    a::add(m);\n    b::add(m);\n    // +concord"));
    }

    #[test]
    fn a_missing_marker_is_an_error_naming_the_file() {
        let error = insert("fn f() {}\n", Path::new("src/main.rs"), "crds", &[]).unwrap_err();
        assert!(error.to_string().contains("src/main.rs"), "{error}");
        assert!(
            error.to_string().contains("+concord:scaffold:crds"),
            "{error}"
        );
    }
}
