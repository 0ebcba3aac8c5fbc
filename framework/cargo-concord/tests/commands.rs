//! `cargo concord init` and `create api` on temporary directories: what
//! they write, what they refuse, and that a second run changes nothing.
//! No build and no cluster: `tests/tests/scaffold/project.rs` builds and runs a
//! scaffold against the real control plane.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_cargo-concord");

/// Runs `cargo concord ARGS` in `dir`, as cargo runs the subcommand.
fn concord(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("concord")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = std::fs::read_to_string(&path).unwrap();
                out.insert(path.strip_prefix(dir).unwrap().to_path_buf(), text);
            }
        }
    }
    out
}

fn init(tmp: &Path) -> PathBuf {
    let output = concord(tmp, &["init", "demo"]);
    assert!(output.status.success(), "{}", stderr(&output));
    tmp.join("demo")
}

const FRIGATE: &[&str] = &[
    "create",
    "api",
    "--group",
    "ships",
    "--version",
    "v1",
    "--kind",
    "Frigate",
];

/// The checkout this test binary was built from (the repository root).
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

#[test]
fn init_depends_on_the_checkout_it_was_built_from_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let output = concord(tmp.path(), &["init", "demo"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let root = checkout();
    assert!(
        stdout(&output).contains(&format!(
            "depending on the concord checkout at {}",
            root.display()
        )),
        "{}",
        stdout(&output)
    );
    let project = tmp.path().join("demo");
    let files = snapshot(&project);
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "PROJECT",
        "src/main.rs",
        "src/dev.rs",
        "tests/operator.rs",
        "config/concord.yaml",
        "deploy/kustomization.yaml",
        "deploy/deployment.yaml",
        "deploy/rbac.yaml",
        "Dockerfile",
        "README.md",
    ] {
        assert!(files.contains_key(Path::new(file)), "init wrote {file}");
    }
    let manifest = &files[Path::new("Cargo.toml")];
    let framework = root.join("framework");
    assert!(
        manifest.contains(&format!(
            "kube-concord = {{ path = {:?} }}",
            framework.display().to_string()
        )),
        "{manifest}"
    );
    // The project starts from the versions concord is tested with.
    assert_eq!(
        files[Path::new("Cargo.lock")],
        std::fs::read_to_string(root.join("Cargo.lock")).unwrap()
    );
    // The image build brings the checkout in where Cargo.toml names it.
    let dockerfile = &files[Path::new("Dockerfile")];
    assert!(
        dockerfile.contains(&format!("COPY --from=concord . {}\n", root.display())),
        "{dockerfile}"
    );
    assert!(dockerfile.contains(&format!(
        "docker build --build-context concord={}",
        root.display()
    )));
    // The Helm chart's templates are the only files with `{{`.
    assert!(
        !files.iter().any(
            |(path, text)| !path.starts_with("deploy/chart/demo/templates") && text.contains("{{")
        ),
        "no placeholder is left"
    );
    for file in [
        "deploy/chart/demo/Chart.yaml",
        "deploy/chart/demo/values.yaml",
        "deploy/chart/demo/templates/deployment.yaml",
        "deploy/service.yaml",
        "deploy/servicemonitor.yaml",
    ] {
        assert!(files.contains_key(Path::new(file)), "init wrote {file}");
    }
    // Nothing but the project: the staging directory is gone.
    let entries: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(entries.len(), 1);
}

#[test]
fn init_depends_on_the_registry_or_git_when_told() {
    let tmp = tempfile::tempdir().unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let output = concord(tmp.path(), &["init", "demo", "--concord-version", version]);
    assert!(output.status.success(), "{}", stderr(&output));
    let files = snapshot(&tmp.path().join("demo"));
    let manifest = &files[Path::new("Cargo.toml")];
    assert!(
        manifest.contains(&format!("kube-concord = \"{version}\"")),
        "{manifest}"
    );
    assert!(!files.contains_key(Path::new("Cargo.lock")));
    assert!(!files[Path::new("Dockerfile")].contains("--from=concord"));

    let url = "https://github.com/concord-rs/concord";
    let output = concord(tmp.path(), &["init", "gitdemo", "--concord-git", url]);
    assert!(output.status.success(), "{}", stderr(&output));
    let manifest = std::fs::read_to_string(tmp.path().join("gitdemo/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!("kube-concord-testenv = {{ git = \"{url}\" }}")),
        "{manifest}"
    );

    // One source at a time.
    let output = concord(
        tmp.path(),
        &[
            "init",
            "both",
            "--concord-git",
            url,
            "--concord-version",
            version,
        ],
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("--concord-version"),
        "{}",
        stderr(&output)
    );
    assert!(!tmp.path().join("both").exists());
}

#[test]
fn bad_input_is_one_error_naming_the_argument_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let project = init(tmp.path());
    std::fs::create_dir(tmp.path().join("outside")).unwrap();
    let create = |group: &str, kind: &str| {
        vec![
            "create".to_owned(),
            "api".into(),
            "--group".into(),
            group.into(),
            "--version".into(),
            "v1".into(),
            "--kind".into(),
            kind.into(),
        ]
    };
    let cases: Vec<(PathBuf, Vec<String>, &str)> = vec![
        (
            project.clone(),
            create("ships", "frigate"),
            "invalid --kind \"frigate\"",
        ),
        (
            project.clone(),
            create("ships", "Dock_Yard"),
            "invalid --kind \"Dock_Yard\"",
        ),
        (
            project.clone(),
            create("ships.fleet", "Frigate"),
            "invalid --group \"ships.fleet\"",
        ),
        (
            project.clone(),
            create("Ships", "Frigate"),
            "invalid --group \"Ships\"",
        ),
        (
            tmp.path().to_path_buf(),
            vec!["init".into(), "demo".into()],
            "already exists: choose another name or --dir",
        ),
        (
            tmp.path().join("outside"),
            create("ships", "Frigate"),
            "not a project made by `cargo concord init` (no PROJECT file); run `cargo concord init` first or pass --project-dir",
        ),
    ];
    for (dir, args, expected) in cases {
        let before = snapshot(tmp.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = concord(&dir, &args);
        assert!(!output.status.success(), "{args:?} is refused");
        let message = stderr(&output);
        assert_eq!(message.lines().count(), 1, "{args:?}: one line\n{message}");
        assert!(
            message.starts_with("error: ") && message.contains(expected),
            "{args:?}: {message}"
        );
        assert_eq!(before, snapshot(tmp.path()), "{args:?} changed nothing");
    }
}

#[test]
fn the_book_shows_the_kind_create_api_writes() {
    // The book's "Getting started" includes the Frigate of its session;
    // tests/tests/scaffold/project.rs builds and runs the same template.
    let tmp = tempfile::tempdir().unwrap();
    let project = init(tmp.path());
    let output = concord(&project, FRIGATE);
    assert!(output.status.success(), "{}", stderr(&output));
    let generated = std::fs::read_to_string(project.join("src/frigate.rs")).unwrap();
    let book =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../book/src/getting-started/frigate.rs");
    if std::env::var_os("CONCORD_BLESS").is_some() {
        std::fs::write(&book, &generated).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&book).unwrap_or_default(),
        generated,
        "{} is stale: CONCORD_BLESS=1 cargo test -p cargo-concord --test commands",
        book.display()
    );
}

#[test]
fn init_refuses_bad_names_and_existing_directories_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for (args, flag) in [
        (&["init", "Demo"][..], "NAME"),
        (&["init", "demo_op"][..], "NAME"),
        (&["init", "demo", "--domain", "Example.com"][..], "--domain"),
        (
            &["init", "demo", "--concord-path", "/nonexistent"][..],
            "--concord-path",
        ),
    ] {
        let output = concord(tmp.path(), args);
        assert!(!output.status.success(), "{args:?} is refused");
        assert!(
            stderr(&output).contains(flag),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            std::fs::read_dir(tmp.path()).unwrap().count(),
            0,
            "{args:?} wrote nothing"
        );
    }
    std::fs::create_dir(tmp.path().join("demo")).unwrap();
    let output = concord(tmp.path(), &["init", "demo"]);
    assert!(
        stderr(&output).contains("already exists"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_dir(tmp.path().join("demo")).unwrap().count(),
        0
    );
}

#[test]
fn create_api_twice_changes_nothing_and_a_second_kind_adds_a_second_controller() {
    let tmp = tempfile::tempdir().unwrap();
    let project = init(tmp.path());
    let first = concord(&project, FRIGATE);
    assert!(first.status.success(), "{}", stderr(&first));
    let once = snapshot(&project);
    assert!(once.contains_key(Path::new("src/frigate.rs")));
    assert!(once.contains_key(Path::new(
        "config/samples/ships.example.com_v1_frigate.yaml"
    )));

    let second = concord(&project, FRIGATE);
    assert!(
        stdout(&second).contains("nothing to change"),
        "{}",
        stdout(&second)
    );
    assert_eq!(once, snapshot(&project), "a second run changes nothing");

    let dock = concord(
        &project,
        &[
            "create",
            "api",
            "--group",
            "ports",
            "--version",
            "v1alpha1",
            "--kind",
            "DockYard",
            "--cluster-scoped",
        ],
    );
    assert!(dock.status.success(), "{}", stderr(&dock));
    let main = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    for line in [
        "mod frigate;",
        "mod dock_yard;",
        "frigate::add_controller(manager, namespace)?;",
        "dock_yard::add_controller(manager, namespace)?;",
        ".watches::<frigate::Frigate>()",
        ".watches::<dock_yard::DockYard>()",
    ] {
        assert_eq!(
            main.matches(line).count(),
            1,
            "{line} once in main.rs:\n{main}"
        );
    }
    // The cluster-scoped kind's RBAC goes to the ClusterRole.
    let cluster = &main[main.find("fn cluster_permissions").unwrap()..];
    assert!(cluster[..cluster.find("\n}").unwrap()].contains("dock_yard::DockYard"));
    let module = std::fs::read_to_string(project.join("src/dock_yard.rs")).unwrap();
    assert!(
        !module.contains("namespaced,"),
        "DockYard is cluster-scoped"
    );
    assert!(module.contains("group = \"ports.example.com\""));
}

#[test]
fn create_api_refuses_bad_input_and_conflicts_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let project = init(tmp.path());
    assert!(concord(&project, FRIGATE).status.success());
    let before = snapshot(&project);
    for (args, expected) in [
        (
            ["--group", "Ships", "--version", "v1", "--kind", "Frigate"],
            "--group",
        ),
        (
            ["--group", "ships", "--version", "1", "--kind", "Frigate"],
            "--version",
        ),
        (
            [
                "--group",
                "ships",
                "--version",
                "v1beta",
                "--kind",
                "Frigate",
            ],
            "--version",
        ),
        (
            ["--group", "ships", "--version", "v1", "--kind", "frigate"],
            "--kind",
        ),
        (
            ["--group", "ships", "--version", "v1", "--kind", "Type"],
            "reserved",
        ),
        (
            ["--group", "ships", "--version", "v2", "--kind", "Frigate"],
            "already exists",
        ),
    ] {
        let mut all = vec!["create", "api"];
        all.extend(args);
        let output = concord(&project, &all);
        assert!(!output.status.success(), "{args:?} is refused");
        assert!(
            stderr(&output).contains(expected),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    assert_eq!(before, snapshot(&project), "nothing was written");
}

#[test]
fn create_api_refuses_a_project_not_made_by_init_or_without_markers() {
    let tmp = tempfile::tempdir().unwrap();
    let output = concord(tmp.path(), FRIGATE);
    assert!(
        stderr(&output).contains("not a project made by `cargo concord init`"),
        "{}",
        stderr(&output)
    );

    let project = init(tmp.path());
    let main = project.join("src/main.rs");
    let text = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, text.replace("// +concord:scaffold:controllers", "")).unwrap();
    let before = snapshot(&project);
    let output = concord(&project, FRIGATE);
    assert!(
        stderr(&output).contains("+concord:scaffold:controllers"),
        "{}",
        stderr(&output)
    );
    assert!(
        stderr(&output).contains("src/main.rs"),
        "{}",
        stderr(&output)
    );
    assert_eq!(before, snapshot(&project), "nothing half-written");
}

#[test]
fn cargo_run_and_cargo_subcommand_invocations_are_both_accepted() {
    for args in [&["--version"][..], &["concord", "--version"][..]] {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert!(output.status.success(), "{args:?}");
        assert!(stdout(&output).contains(env!("CARGO_PKG_VERSION")));
    }
}
