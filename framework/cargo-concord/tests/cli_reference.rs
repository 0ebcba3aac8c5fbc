//! The book's CLI reference (`book/src/cli.md`) shows the help of every
//! command from `book/src/cli/*.txt`; this test keeps those files equal to
//! what the binary prints. After changing a flag, regenerate them:
//!
//! ```text
//! CONCORD_BLESS=1 cargo test -p cargo-concord --test cli_reference
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

const PAGES: &[(&str, &[&str])] = &[
    ("cargo-concord.txt", &["--help"]),
    ("init.txt", &["init", "--help"]),
    ("create-api.txt", &["create", "api", "--help"]),
    ("generate.txt", &["generate", "--help"]),
    ("explain.txt", &["explain", "--help"]),
];

#[test]
fn the_cli_reference_matches_the_help() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../book/src/cli");
    let bless = std::env::var_os("CONCORD_BLESS").is_some();
    let mut stale = Vec::new();
    for (file, args) in PAGES {
        let output = Command::new(env!("CARGO_BIN_EXE_cargo-concord"))
            .arg("concord")
            .args(*args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}");
        let help = String::from_utf8(output.stdout).unwrap();
        let path = dir.join(file);
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &help).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(help.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale CLI reference {stale:?}: run CONCORD_BLESS=1 cargo test -p cargo-concord --test cli_reference"
    );
}
