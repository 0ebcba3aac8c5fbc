//! `cargo concord` end to end: the "Getting started" session of the book
//! (`scaffold/getting-started.sh`), every line of it run in order in a
//! temporary directory — `init` (with `--concord-path` at this checkout),
//! two `create api`, `cargo run -- --dev` until the sample Frigate is
//! Ready, the generated `cargo test` on the embedded control plane,
//! `generate` and `explain` — and `kubectl apply -k deploy/` checked as a
//! server-side dry-run of every manifest on the real API server.
//!
//! The scaffold builds into this workspace's target directory with this
//! workspace's `Cargo.lock`, so no dependency is rebuilt.
//!
//! ```text
//! cargo test -p concord-tests --test scaffold -- --nocapture
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use concord_testenv::TestEnv;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde::Deserialize;
use serde_json::Value;

const SESSION: &str = include_str!("scaffold/getting-started.sh");

/// The workspace root: this package is `tests/`.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The target directory this workspace builds into, shared with the
/// scaffold so its dependencies are not rebuilt.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

fn run(command: &mut Command, what: &str) -> Result<Output> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {what}"))?;
    ensure!(
        output.status.success(),
        "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output)
}

/// Builds `cargo-concord` and returns its path.
fn cargo_concord() -> Result<PathBuf> {
    run(
        Command::new(cargo())
            .args(["build", "--quiet", "-p", "cargo-concord", "--manifest-path"])
            .arg(workspace().join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", target_dir()),
        "cargo build -p cargo-concord",
    )?;
    Ok(target_dir().join("debug/cargo-concord"))
}

/// Every file of `dir` (but `target/`) and its content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(root, &path, out);
                }
            } else {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.insert(path.strip_prefix(root).unwrap().to_path_buf(), text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The state of a session: where it is and what it has seen.
struct Session {
    concord: PathBuf,
    cwd: PathBuf,
    init_at: Option<Instant>,
    first_test_after: Option<Duration>,
    scaffolded: Vec<PathBuf>,
}

impl Session {
    fn cargo_concord(&mut self, args: &[&str]) -> Result<String> {
        let mut command = Command::new(&self.concord);
        command.arg("concord").args(args).current_dir(&self.cwd);
        if args.first() == Some(&"init") {
            // The book's command names the published crates; this
            // checkout stands in for them.
            command.arg("--concord-path").arg(workspace());
            self.init_at = Some(Instant::now());
        }
        command.env("CARGO_TARGET_DIR", target_dir());
        let output = run(&mut command, &format!("cargo concord {}", args.join(" ")))?;
        if args.first() == Some(&"init") {
            let project = self.cwd.join(args[1]);
            self.scaffolded = snapshot(&project).into_keys().collect();
            // Same versions as this workspace: nothing is rebuilt.
            std::fs::copy(workspace().join("Cargo.lock"), project.join("Cargo.lock"))?;
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn project_cargo(&self, args: &[&str]) -> Command {
        let mut command = Command::new(cargo());
        command
            .args(args)
            .current_dir(&self.cwd)
            .env("CARGO_TARGET_DIR", target_dir());
        command
    }

    /// `cargo test` in the project: every generated test passes.
    fn cargo_test(&mut self) -> Result<()> {
        let output = run(
            &mut self.project_cargo(&["test"]),
            "cargo test (generated project)",
        )?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        ensure!(
            stdout.contains("every_sample_becomes_ready_and_is_cleaned_up ... ok"),
            "the generated test ran and passed:\n{stdout}"
        );
        if self.first_test_after.is_none() {
            self.first_test_after = self.init_at.map(|t| t.elapsed());
        }
        Ok(())
    }

    /// `cargo run -- --dev` until every sample reports Ready, then SIGTERM.
    fn cargo_run_dev(&self) -> Result<Vec<String>> {
        let mut expected = Vec::new();
        for entry in std::fs::read_dir(self.cwd.join("config/samples"))? {
            let text = std::fs::read_to_string(entry?.path())?;
            let object: Value = serde_yaml::from_str(&text)?;
            expected.push(format!(
                "{} default/{} is Ready",
                object["kind"].as_str().unwrap(),
                object["metadata"]["name"].as_str().unwrap()
            ));
        }
        ensure!(!expected.is_empty(), "the session has samples to run");
        let mut child = self
            .project_cargo(&["run", "--quiet", "--", "--dev"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut seen = Vec::new();
        let result = loop {
            if expected
                .iter()
                .all(|e| seen.iter().any(|l: &String| l.contains(e)))
            {
                break Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => seen.push(line),
                Err(_) => {
                    break Err(anyhow::anyhow!(
                        "cargo run -- --dev: expected {expected:?}, saw {seen:#?}"
                    ));
                }
            }
        };
        // As Kubernetes stops a pod: SIGTERM, then the operator shuts down
        // and its embedded control plane with it.
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        let status = child.wait()?;
        result?;
        ensure!(
            status.success(),
            "cargo run -- --dev exits cleanly on SIGTERM ({status})"
        );
        Ok(seen)
    }
}

#[tokio::test]
async fn the_getting_started_session_runs_end_to_end() -> Result<()> {
    let env = TestEnv::shared()?;
    let tmp = tempfile::tempdir()?;
    let mut session = Session {
        concord: cargo_concord()?,
        cwd: tmp.path().to_path_buf(),
        init_at: None,
        first_test_after: None,
        scaffolded: Vec::new(),
    };
    let mut explained = String::new();
    let mut dev_output = Vec::new();
    for line in SESSION.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        println!("$ {line}");
        let step = Instant::now();
        match words.as_slice() {
            ["cd", dir] => session.cwd = session.cwd.join(dir),
            ["cargo", "concord", "explain"] => explained = session.cargo_concord(&words[2..])?,
            ["cargo", "concord", args @ ..] => {
                print!("{}", session.cargo_concord(args)?);
            }
            ["cargo", "run", "--", "--dev"] => dev_output = session.cargo_run_dev()?,
            ["cargo", "test"] => session.cargo_test()?,
            ["docker", "build", ..] => {
                // No container runtime here: the Dockerfile is checked to
                // build this project's binary.
                let dockerfile = std::fs::read_to_string(session.cwd.join("Dockerfile"))?;
                ensure!(dockerfile.contains("cargo build --release --locked --bin demo"));
            }
            ["kubectl", "apply", "-k", "deploy/"] => {
                dry_run_deploy(env, &session.cwd.join("deploy")).await?;
            }
            _ => bail!("getting-started.sh has a command this test does not run: {line}"),
        }
        println!("  ({:.1?})", step.elapsed());
    }
    let project = session.cwd.clone();

    // `cargo run -- --dev` reconciled the sample Frigate.
    assert!(
        dev_output
            .iter()
            .any(|l| l.contains("Frigate default/frigate-sample is Ready")),
        "{dev_output:#?}"
    );
    // `explain` printed the strategy table of config/concord.yaml.
    assert!(explained.contains("strict"), "{explained}");

    // Running generate or create api again changes nothing.
    let before = snapshot(&project);
    let again = session.cargo_concord(&["generate"])?;
    assert!(again.contains("nothing to change"), "{again}");
    let again = session.cargo_concord(&[
        "create",
        "api",
        "--group",
        "ships",
        "--version",
        "v1",
        "--kind",
        "Frigate",
    ])?;
    assert!(again.contains("nothing to change"), "{again}");
    assert_eq!(before, snapshot(&project), "a second run changed files");

    // The generated manifests say what the code says.
    let crds = std::fs::read_to_string(project.join("deploy/crds.yaml"))?;
    for name in ["frigates.ships.example.com", "dockyards.ports.example.com"] {
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
    let grants = |doc: &Value, resource: &str| -> Vec<String> {
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
    };
    assert_eq!(rbac[0]["kind"], "Role");
    assert!(
        grants(&rbac[0], "frigates").contains(&"patch".to_owned()),
        "{:#?}",
        rbac[0]
    );
    assert!(grants(&rbac[0], "frigates/status").contains(&"patch".to_owned()));
    assert_eq!(rbac[1]["kind"], "ClusterRole");
    assert!(
        grants(&rbac[1], "dockyards").contains(&"watch".to_owned()),
        "{:#?}",
        rbac[1]
    );

    // The book shows the generated kind: keep its copy equal to what this
    // session compiled and ran.
    let book = workspace().join("book/src/getting-started/frigate.rs");
    let generated = std::fs::read_to_string(project.join("src/frigate.rs"))?;
    if std::env::var_os("CONCORD_BLESS").is_some() {
        std::fs::create_dir_all(book.parent().unwrap())?;
        std::fs::write(&book, &generated)?;
    }
    assert_eq!(
        std::fs::read_to_string(&book).unwrap_or_default(),
        generated,
        "{} is stale: CONCORD_BLESS=1 cargo test -p concord-tests --test scaffold",
        book.display()
    );

    println!("\nfiles `cargo concord init` wrote:");
    for file in &session.scaffolded {
        println!("  {}", file.display());
    }
    let all = snapshot(&project);
    println!("files after two `create api` and `generate`:");
    for file in all.keys().filter(|f| !session.scaffolded.contains(f)) {
        println!("  {}", file.display());
    }
    if let Some(elapsed) = session.first_test_after {
        println!("init -> first passing generated test: {elapsed:.1?}");
    }
    Ok(())
}

/// `kubectl apply -k deploy/`, as a server-side dry-run of every object of
/// every file the kustomization lists; namespaced objects go to a fresh
/// namespace (a dry-run does not create the manifests' own).
async fn dry_run_deploy(env: &TestEnv, deploy: &Path) -> Result<()> {
    let client = env.client()?;
    let ns = env.namespace().await?;
    let params = PatchParams::apply("concord-scaffold-test")
        .force()
        .dry_run();
    let kustomization: Value =
        serde_yaml::from_str(&std::fs::read_to_string(deploy.join("kustomization.yaml"))?)?;
    let mut kinds = Vec::new();
    for file in kustomization["resources"].as_array().context("resources")? {
        let file = file.as_str().context("file name")?;
        let text = std::fs::read_to_string(deploy.join(file)).with_context(|| file.to_owned())?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let mut object = Value::deserialize(document)?;
            if object.is_null() {
                continue;
            }
            let (resource, namespaced) = resource_of(&object)?;
            if namespaced {
                object["metadata"]["namespace"] = ns.name().into();
            }
            if let Some(subjects) = object.get_mut("subjects").and_then(Value::as_array_mut) {
                for subject in subjects {
                    subject["namespace"] = ns.name().into();
                }
            }
            let name = object["metadata"]["name"]
                .as_str()
                .context("name")?
                .to_owned();
            let api: Api<DynamicObject> = if namespaced {
                Api::namespaced_with(client.clone(), ns.name(), &resource)
            } else {
                Api::all_with(client.clone(), &resource)
            };
            api.patch(&name, &params, &Patch::Apply(&object))
                .await
                .with_context(|| {
                    format!(
                        "deploy/{file}: server-side dry-run of {} {name}",
                        resource.kind
                    )
                })?;
            kinds.push(resource.kind);
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
    ] {
        assert!(
            kinds.iter().any(|k| k == kind),
            "deploy/ has a {kind}: {kinds:?}"
        );
    }
    Ok(())
}

/// Where `object` lives in the API, and whether it is namespaced.
fn resource_of(object: &Value) -> Result<(ApiResource, bool)> {
    let api_version = object["apiVersion"].as_str().context("apiVersion")?;
    let kind = object["kind"].as_str().context("kind")?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (plural, namespaced) = match kind {
        "Namespace" => ("namespaces", false),
        "CustomResourceDefinition" => ("customresourcedefinitions", false),
        "ClusterRole" => ("clusterroles", false),
        "ClusterRoleBinding" => ("clusterrolebindings", false),
        "ServiceAccount" => ("serviceaccounts", true),
        "Role" => ("roles", true),
        "RoleBinding" => ("rolebindings", true),
        "ConfigMap" => ("configmaps", true),
        "Deployment" => ("deployments", true),
        other => bail!("no plural known for kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Ok((ApiResource::from_gvk_with_plural(&gvk, plural), namespaced))
}
