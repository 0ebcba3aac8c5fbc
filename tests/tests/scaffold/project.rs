//! The book's "Getting started" chapter, run as a reader runs it: the
//! script the chapter shows (`scaffold/getting-started.sh`, included in
//! the book line for line) is run by `bash`, from a directory outside the
//! checkout, with an empty `HOME`, under names unlike the book's — a
//! namespaced `Lighthouse` and a cluster-scoped two-word `TideGauge` in the
//! project `harbor-watch` of domain `tides.test`. It installs
//! `cargo-concord` from this checkout, `init`s, `create api`s twice, runs
//! `cargo run -- --dev` until both samples are Ready and then presses
//! Ctrl-C (SIGINT to the script's process group, as a terminal does),
//! runs the project's `cargo test`, and `generate`s twice. Then the
//! project's `deploy/` is checked as `kubectl apply -k deploy/` would send
//! it (a server-side dry-run on the real API server). With
//! `CONCORD_TEST_DOCKERFILE_BUILD=1` (as `.ci/run` sets it), its release
//! binary is also built the way its `Dockerfile` builds it: a release
//! build of every dependency, too long for the everyday suite.
//!
//! What the session keeps of this machine: the toolchains (`CARGO_HOME`,
//! `RUSTUP_HOME`, `RUSTUP_TOOLCHAIN`, Go's `GOPATH`, `GOCACHE` and
//! `GOMODCACHE`, `PATH`), the control plane's build cache
//! (`CONCORD_CONTROLPLANE_CACHE`) and this workspace's target directory
//! (`CARGO_TARGET_DIR`), so that nothing already built is built again.
//! `cargo install` installs into a temporary `CARGO_INSTALL_ROOT`, first
//! on the `PATH`. Every other variable is cleared.
//!
//! ```text
//! cargo test -p concord-tests --test scaffold -- --nocapture
//! ```

use concord_tests::dry_run_manifest;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use concord_testenv::TestEnv;
use serde::Deserialize;
use serde_json::Value;

use crate::session::{fresh, target_dir, workspace};

/// The script the book includes.
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/scaffold/getting-started.sh"
);

/// The session's names: none of them is the book's.
const NAMES: &[(&str, &str)] = &[
    ("OPERATOR", "harbor-watch"),
    ("DOMAIN", "tides.test"),
    ("GROUP", "beacons"),
    ("VERSION", "v2"),
    ("KIND", "Lighthouse"),
    ("SECOND_GROUP", "charts"),
    ("SECOND_VERSION", "v1beta1"),
    ("SECOND_KIND", "TideGauge"),
];

/// What `cargo run -- --dev` prints once each sample is reconciled.
const READY: &[&str] = &[
    "--dev: Lighthouse default/lighthouse-sample is Ready",
    "--dev: TideGauge tidegauge-sample is Ready",
];

/// Set to `1`, the test also builds the project as its `Dockerfile` does.
const DOCKERFILE_BUILD: &str = "CONCORD_TEST_DOCKERFILE_BUILD";

/// How long the whole session may take: a cold machine builds the
/// control plane and every dependency twice (debug and release).
const SESSION_LIMIT: Duration = Duration::from_secs(60 * 60);

/// Sends `signal` to every process of the group `child` leads.
fn signal_group(child: &Child, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{}", child.id())])
        .status();
}

/// Everything the session printed, and how long it took.
struct Transcript {
    lines: Vec<String>,
    took: Duration,
}

impl Transcript {
    fn has(&self, text: &str) -> bool {
        self.lines.iter().any(|l| l.contains(text))
    }
}

/// Runs the script in `dir` with the session's names; presses Ctrl-C
/// once `cargo run -- --dev` reported every sample Ready.
fn run_session(dir: &Path, home: &Path, install_root: &Path) -> Result<Transcript> {
    let started = Instant::now();
    let mut command = fresh("bash", home, install_root);
    command
        .arg(SCRIPT)
        .current_dir(dir)
        .env("CONCORD", workspace())
        .envs(NAMES.iter().copied())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().context("running bash getting-started.sh")?;
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines: Vec<String> = Vec::new();
    let mut interrupted = false;
    let outcome = loop {
        let left = SESSION_LIMIT.saturating_sub(started.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                println!("| {line}");
                lines.push(line);
                if !interrupted && READY.iter().all(|r| lines.iter().any(|l| l.contains(r))) {
                    // The reader has seen both samples Ready: Ctrl-C.
                    signal_group(&child, "-INT");
                    interrupted = true;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break Ok(()),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                break Err(anyhow::anyhow!(
                    "the session did not end within {SESSION_LIMIT:?}"
                ));
            }
        }
    };
    if outcome.is_err() {
        signal_group(&child, "-KILL");
    }
    let status = child.wait()?;
    outcome?;
    ensure!(interrupted, "cargo run -- --dev never reported {READY:?}");
    ensure!(status.success(), "getting-started.sh failed ({status})");
    Ok(Transcript {
        lines,
        took: started.elapsed(),
    })
}

#[tokio::test]
async fn the_getting_started_script_runs_as_the_book_shows_it() -> Result<()> {
    let env = TestEnv::shared()?;
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    ensure!(
        !root.starts_with(workspace()),
        "{} is outside the checkout",
        root.display()
    );
    let (home, install_root, work) = (root.join("home"), root.join("install"), root.join("work"));
    for dir in [&home, &install_root, &work] {
        std::fs::create_dir(dir)?;
    }

    let transcript = run_session(&work, &home, &install_root)?;
    let project = work.join("harbor-watch");

    // The installed tool chose this checkout without being told.
    assert!(
        transcript.has(&format!(
            "depending on the concord checkout at {}",
            workspace().display()
        )),
        "init depends on the checkout it was installed from"
    );
    assert!(install_root.join("bin/cargo-concord").is_file());
    // Both kinds were reconciled by `cargo run -- --dev`, and the
    // generated test passed.
    assert!(transcript.has("every_sample_becomes_ready_and_is_cleaned_up ... ok"));
    // A sample of another kind is created beside them, not waited for.
    assert!(
        transcript.has("--dev: created ConfigMap default/fleet-settings"),
        "the ConfigMap sample was seeded"
    );
    assert!(!transcript.has("ConfigMap default/fleet-settings is Ready"));
    // The first `generate` wrote deploy/, the second changed nothing.
    let second = transcript
        .lines
        .iter()
        .position(|l| l == "generate: nothing to change")
        .context("the second generate reports nothing to change")?;
    assert!(
        transcript.lines[..second]
            .iter()
            .any(|l| l == "generate: wrote deploy/crds.yaml"),
        "the first generate wrote deploy/crds.yaml"
    );
    assert!(
        !transcript.lines[second..]
            .iter()
            .any(|l| l.starts_with("generate: wrote")),
        "a second generate changes nothing"
    );
    // `explain` printed the strategy table of config/concord.yaml, whose
    // default is the book's recommendation for what the reconcilers write.
    assert!(transcript.has("guarded"));

    // The generated manifests say what the code says.
    let crds = std::fs::read_to_string(project.join("deploy/crds.yaml"))?;
    for name in [
        "lighthouses.beacons.tides.test",
        "tidegauges.charts.tides.test",
    ] {
        assert!(
            crds.contains(&format!("name: {name}")),
            "crds.yaml has {name}"
        );
    }
    let rbac: Vec<Value> = serde_yaml::Deserializer::from_str(&std::fs::read_to_string(
        project.join("deploy/rbac.yaml"),
    )?)
    .map(Value::deserialize)
    .collect::<Result<_, _>>()?;
    assert_eq!(rbac[0]["kind"], "Role");
    assert!(grants(&rbac[0], "lighthouses").contains(&"patch".to_owned()));
    assert!(grants(&rbac[0], "lighthouses/status").contains(&"patch".to_owned()));
    assert_eq!(rbac[1]["kind"], "ClusterRole");
    assert!(grants(&rbac[1], "tidegauges").contains(&"watch".to_owned()));

    operator_help_matches_the_book()?;
    dry_run_deploy(env, &project.join("deploy")).await?;
    if std::env::var_os(DOCKERFILE_BUILD).is_some_and(|v| v == "1") {
        let built = Instant::now();
        build_as_the_dockerfile_does(&project, &home, &install_root)?;
        println!(
            "session {:.1?}, release build as the Dockerfile does {:.1?}",
            transcript.took,
            built.elapsed()
        );
    } else {
        println!(
            "session {:.1?}; the release build as the Dockerfile does runs with {DOCKERFILE_BUILD}=1",
            transcript.took
        );
    }
    Ok(())
}

/// The book's "Operator flags and environment" shows the `--help` of the
/// book's `demo`: the help of the operator this session built, under the
/// book's name. `CONCORD_BLESS=1` rewrites the page's copy.
fn operator_help_matches_the_book() -> Result<()> {
    let binary = target_dir().join("debug/harbor-watch");
    let output = Command::new(&binary).arg("--help").output()?;
    ensure!(output.status.success(), "{} --help", binary.display());
    let help = String::from_utf8(output.stdout)?.replace("harbor-watch", "demo");
    let page = workspace().join("book/src/operator-flags/help.txt");
    if std::env::var_os("CONCORD_BLESS").is_some() {
        std::fs::write(&page, &help)?;
    }
    ensure!(
        std::fs::read_to_string(&page).unwrap_or_default() == help,
        "{} is stale: CONCORD_BLESS=1 cargo test -p concord-tests --test scaffold",
        page.display()
    );
    Ok(())
}

/// The verbs `doc` (a Role or ClusterRole) grants on `resource`.
fn grants(doc: &Value, resource: &str) -> Vec<String> {
    doc["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            r["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x == resource)
        })
        .flat_map(|r| {
            r["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
        })
        .collect()
}

/// `docker build` without a container engine: the build context (the
/// project less what `.dockerignore` excludes) copied to a directory of
/// its own, the named context `concord` where the `Dockerfile` copies it
/// (this checkout, already there), and the `Dockerfile`'s own `cargo build`
/// line run in it — with `--offline` added, as this machine has no
/// network, and the shared target directory.
fn build_as_the_dockerfile_does(project: &Path, home: &Path, install_root: &Path) -> Result<()> {
    let dockerfile = std::fs::read_to_string(project.join("Dockerfile"))?;
    let copy = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("COPY --from=concord . "))
        .context("the Dockerfile copies the concord checkout in")?;
    ensure!(
        Path::new(copy.trim()) == workspace(),
        "the Dockerfile puts the checkout where Cargo.toml expects it: {copy}"
    );
    let build = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("RUN "))
        .context("the Dockerfile has a RUN line")?;
    let words: Vec<&str> = build.split_whitespace().collect();
    ensure!(
        words.starts_with(&["cargo", "build", "--release", "--locked"]),
        "{build}"
    );
    let ignored: Vec<String> = std::fs::read_to_string(project.join(".dockerignore"))?
        .lines()
        .map(|l| l.trim().trim_matches('/').to_owned())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let context = project.with_file_name("docker-context");
    copy_tree(project, &context, &ignored)?;
    let mut command = fresh(words[0], home, install_root);
    command
        .args(&words[1..])
        .arg("--offline")
        .current_dir(&context);
    let output = command.output()?;
    ensure!(
        output.status.success(),
        "{build} --offline failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let binary = target_dir().join("release/harbor-watch");
    ensure!(binary.is_file(), "{} was built", binary.display());
    Ok(())
}

/// Copies `from` to `to`, leaving out the top-level entries of `ignored`.
fn copy_tree(from: &Path, to: &Path, ignored: &[String]) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if ignored.contains(&name) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(&name), &[])?;
        } else {
            std::fs::copy(&path, to.join(&name))?;
        }
    }
    Ok(())
}

/// `kubectl apply -k deploy/`, as a server-side dry-run of every object of
/// every file the kustomization lists; namespaced objects go to a fresh
/// namespace (a dry-run does not create the manifests' own).
async fn dry_run_deploy(env: &TestEnv, deploy: &Path) -> Result<()> {
    let client = env.client()?;
    let ns = env.namespace().await?;
    let kustomization: Value =
        serde_yaml::from_str(&std::fs::read_to_string(deploy.join("kustomization.yaml"))?)?;
    let mut kinds = Vec::new();
    for file in kustomization["resources"].as_array().context("resources")? {
        let file = file.as_str().context("file name")?;
        let text = std::fs::read_to_string(deploy.join(file)).with_context(|| file.to_owned())?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let object = Value::deserialize(document)?;
            if object.is_null() {
                continue;
            }
            let sent = dry_run_manifest(&client, ns.name(), "concord-scaffold-test", object)
                .await
                .with_context(|| format!("deploy/{file}"))?;
            kinds.push(sent.kind);
        }
    }
    for kind in [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Service",
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "deploy/ has a {kind}: {kinds:?}"
        );
    }
    Ok(())
}
