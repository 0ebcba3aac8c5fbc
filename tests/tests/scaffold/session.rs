//! The scaffold test's session environment: an empty `HOME` that keeps
//! this machine's toolchains, caches and target directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root: this package is `tests/`.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
}

/// The target directory this workspace builds into, shared with the
/// session so that its dependencies are not rebuilt.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// `name` from the environment, else `fallback` under this user's home.
fn kept(name: &str, fallback: &str) -> Option<OsString> {
    std::env::var_os(name).or_else(|| {
        std::env::var_os("HOME").map(|home| Path::new(&home).join(fallback).into_os_string())
    })
}

/// Where concord's test environment caches the control plane it built
/// (as `concord_testenv` finds it).
fn controlplane_cache() -> Option<OsString> {
    if let Some(dir) = std::env::var_os("CONCORD_CONTROLPLANE_CACHE") {
        return Some(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(base.join("concord").into_os_string())
}

/// What `go env NAME` says in this process's environment.
fn go_env(name: &str) -> Option<OsString> {
    let output = Command::new("go").args(["env", name]).output().ok()?;
    let value = String::from_utf8(output.stdout).ok()?;
    let value = value.trim();
    (output.status.success() && !value.is_empty()).then(|| value.into())
}

/// A command in the session's environment: `HOME` is `home`, the
/// toolchains and caches are this machine's, nothing else is inherited.
pub(crate) fn fresh(program: &str, home: &Path, install_root: &Path) -> Command {
    let mut command = Command::new(program);
    command.env_clear();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![install_root.join("bin")];
    dirs.extend(std::env::split_paths(&path));
    command.env("PATH", std::env::join_paths(dirs).unwrap());
    command.env("HOME", home);
    command.env("CARGO_INSTALL_ROOT", install_root);
    command.env("CARGO_TARGET_DIR", target_dir());
    for (name, value) in [
        ("CARGO_HOME", kept("CARGO_HOME", ".cargo")),
        ("RUSTUP_HOME", kept("RUSTUP_HOME", ".rustup")),
        ("RUSTUP_TOOLCHAIN", std::env::var_os("RUSTUP_TOOLCHAIN")),
        ("GOPATH", go_env("GOPATH")),
        ("GOCACHE", go_env("GOCACHE")),
        ("GOMODCACHE", go_env("GOMODCACHE")),
        ("GOTOOLCHAIN", std::env::var_os("GOTOOLCHAIN")),
        ("GOPROXY", std::env::var_os("GOPROXY")),
        ("TMPDIR", std::env::var_os("TMPDIR")),
        ("CONCORD_CONTROLPLANE_CACHE", controlplane_cache()),
    ] {
        if let Some(value) = value {
            command.env(name, value);
        }
    }
    command
}
