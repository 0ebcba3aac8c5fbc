//! The other install path the book's "Getting started" names:
//! `cargo install --debug --git URL cargo-concord`, here from this checkout's own
//! repository as a `file://` URL (the committed `HEAD`, as a clone would
//! get it). The installed tool must find the checkout cargo built it in
//! (under `$CARGO_HOME/git/checkouts`) and make projects that depend on it,
//! as an install from a local clone does.
//!
//! The install is a debug build of the framework and its dependencies
//! in a target directory of its own, as a user's `cargo install` does
//! (minutes on two cores): it runs with
//! `CONCORD_TEST_GIT_INSTALL=1`, which `.ci/run` sets; without it the test
//! says so and checks nothing.
//!
//! ```text
//! CONCORD_TEST_GIT_INSTALL=1 cargo test -p concord-tests --test scaffold git_install:: -- --nocapture
//! ```

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, ensure};

use crate::session::{fresh, workspace};

const GIT_INSTALL: &str = "CONCORD_TEST_GIT_INSTALL";

fn run(mut command: Command, what: &str) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("running {what}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    ensure!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    Ok(format!("{stdout}{stderr}"))
}

#[test]
fn cargo_install_git_makes_projects_that_depend_on_its_checkout() -> Result<()> {
    if std::env::var_os(GIT_INSTALL).is_none_or(|v| v != "1") {
        println!("the `cargo install --git` check runs with {GIT_INSTALL}=1 (as .ci/run sets it)");
        return Ok(());
    }
    let repo = workspace();
    let head = run(
        {
            let mut git = Command::new("git");
            git.args(["rev-parse", "HEAD"]).current_dir(&repo);
            git
        },
        "git rev-parse HEAD",
    )?;
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    let (home, install_root, work) = (root.join("home"), root.join("install"), root.join("work"));
    for dir in [&home, &install_root, &work] {
        std::fs::create_dir(dir)?;
    }

    let url = format!("file://{}", repo.display());
    let mut install = fresh("cargo", &home, &install_root);
    // A target directory of its own, as `cargo install` makes one: in the
    // workspace's, cargo hashes the git checkout's crates as it hashes this
    // checkout's (by their path inside the workspace), finds the ones built
    // from this checkout fresh, and links a binary that remembers this
    // checkout instead of its own.
    install
        .env_remove("CARGO_TARGET_DIR")
        .args([
            "install",
            "--locked",
            "--debug",
            "--git",
            &url,
            "cargo-concord",
        ])
        .arg("--target-dir")
        .arg(root.join("install-target"))
        .current_dir(&work);
    let log = run(install, "cargo install --git")?;
    ensure!(
        install_root.join("bin/cargo-concord").is_file(),
        "no cargo-concord installed:\n{log}"
    );

    let mut init = fresh("cargo", &home, &install_root);
    init.args(["concord", "init", "git-demo", "--domain", "git.test"])
        .current_dir(&work);
    let said = run(init, "cargo concord init")?;
    let manifest = std::fs::read_to_string(work.join("git-demo/Cargo.toml"))?;
    let framework = manifest
        .lines()
        .find(|l| l.starts_with("concord") || l.starts_with("kube-concord "))
        .context("the project's Cargo.toml names concord")?;
    let path = framework
        .split('"')
        .nth(1)
        .context("concord is a path dependency")?;
    let checkout = Path::new(path)
        .parent()
        .context("the framework directory of a checkout")?;
    ensure!(
        checkout.components().any(|c| c.as_os_str() == "checkouts"),
        "the project depends on cargo's git checkout, not elsewhere: {framework}"
    );
    ensure!(
        !checkout.starts_with(&repo),
        "the installed tool must not fall back to the repository it was fetched from: {framework}"
    );
    ensure!(
        Path::new(path).join("Cargo.toml").is_file(),
        "{path} holds the framework crate"
    );
    ensure!(
        said.contains(&format!("the concord checkout at {}", checkout.display())),
        "init says which checkout it depends on:\n{said}"
    );
    // The checkout is the commit that was installed.
    let git_dir = checkout.join(".git");
    if git_dir.exists() {
        let checked_out = run(
            {
                let mut git = Command::new("git");
                git.args(["rev-parse", "HEAD"]).current_dir(checkout);
                git
            },
            "git rev-parse HEAD in the checkout",
        )?;
        assert_eq!(checked_out.trim(), head.trim());
    } else {
        ensure!(
            checkout.display().to_string().contains(&head.trim()[..7]),
            "cargo names its checkout by the commit: {}",
            checkout.display()
        );
    }
    Ok(())
}
