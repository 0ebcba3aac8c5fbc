//! A first run cannot touch a real cluster by accident: the benchmarks,
//! run as a user runs them (their own executables, built here), refuse a
//! kubeconfig whose server is not on this machine unless
//! `--yes-create-pods-in` names its context, and never follow
//! `$KUBECONFIG`: they say they ignore it and run on the embedded control
//! plane.
//!
//! The remote server is a TEST-NET-style address nobody answers on
//! (`10.255.255.1`): a program that tried to reach it would hang on its
//! connection timeout, which the deadline below turns into a failure.
//!
//! ```text
//! cargo test -p concord-tests --test examples first_run::
//! ```

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use concord_tests::{workspace, workspace_program};

const REMOTE: &str = "https://10.255.255.1:6443";
const CONTEXT: &str = "far-away";

fn race_bench() -> anyhow::Result<PathBuf> {
    workspace_program("race-bench", true)
}

fn memory_bench() -> anyhow::Result<PathBuf> {
    workspace_program("memory-bench", false)
}

/// A kubeconfig for a cluster at `REMOTE`, current context `CONTEXT`.
fn remote_kubeconfig(dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("remote.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: remote
  cluster:
    server: {REMOTE}
    insecure-skip-tls-verify: true
users:
- name: someone
  user:
    token: not-a-real-token
contexts:
- name: {CONTEXT}
  context:
    cluster: remote
    user: someone
current-context: {CONTEXT}
"
        ),
    )?;
    Ok(path)
}

/// What a finished process printed.
struct Outcome {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `command` with `$KUBECONFIG` set to `kubeconfig` (else unset) to
/// its end, failing when it takes longer than `limit`.
fn run(
    mut command: Command,
    kubeconfig: Option<&Path>,
    limit: Duration,
) -> anyhow::Result<Outcome> {
    match kubeconfig {
        Some(path) => command.env("KUBECONFIG", path),
        None => command.env_remove("KUBECONFIG"),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the benchmark")?;
    let mut stdout = child.stdout.take().context("stdout")?;
    let mut stderr = child.stderr.take().context("stderr")?;
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "still running after {limit:?}: stderr {}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok(Outcome {
        success: status.success(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

/// The message of `stderr` that begins with `start`, with each value put
/// back as the placeholder the troubleshooting page shows, is on that page
/// (line breaks aside): a user who searches the page for what was printed
/// finds it.
fn assert_on_troubleshooting_page(
    stderr: &str,
    start: &str,
    values: &[(&str, &str)],
) -> anyhow::Result<()> {
    let line = stderr
        .lines()
        .find_map(|l| l.find(start).map(|at| &l[at..]))
        .with_context(|| format!("no {start:?} in stderr:\n{stderr}"))?;
    let mut message = line.trim_end().to_owned();
    for (value, placeholder) in values {
        message = message.replace(value, placeholder);
    }
    let path = workspace().join("book/src/troubleshooting.md");
    let page =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    anyhow::ensure!(
        flat(&page).contains(&flat(&message)),
        "{} does not show the message as printed: {message:?}",
        path.display()
    );
    Ok(())
}

/// `outcome` is the refusal of `REMOTE`, naming its context and the flag.
fn assert_refused(name: &str, outcome: &Outcome, kubeconfig: &Path) -> anyhow::Result<()> {
    assert!(
        !outcome.success,
        "{name} ran on {REMOTE}: {}",
        outcome.stderr
    );
    let expected = [
        format!("refusing to create pods on {REMOTE}"),
        format!(
            " (context \"{CONTEXT}\" of kubeconfig {}): it is not a loopback address; nothing was created. To run there, pass --yes-create-pods-in \"{CONTEXT}\"",
            kubeconfig.display()
        ),
    ];
    for part in expected {
        assert!(
            outcome.stderr.contains(&part),
            "{name}: expected {part:?} in stderr:\n{}",
            outcome.stderr
        );
    }
    let path = kubeconfig.display().to_string();
    assert_on_troubleshooting_page(
        &outcome.stderr,
        "refusing to create pods on",
        &[
            // The server as the client parsed it: with a trailing slash.
            (&format!("{REMOTE}/"), "{server}"),
            (REMOTE, "{server}"),
            (&path, "{path}"),
            (CONTEXT, "{context}"),
        ],
    )
}

#[test]
fn the_benchmarks_refuse_a_remote_kubeconfig_without_consent_before_any_request()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = remote_kubeconfig(dir.path())?;
    let out = dir.path().join("race-out");

    let mut race = Command::new(race_bench()?);
    race.args(["--pods", "2", "--rounds", "1", "--strategies", "lax"])
        .arg("--out")
        .arg(&out)
        .arg("--kubeconfig")
        .arg(&kubeconfig);
    let outcome = run(race, None, Duration::from_secs(30))?;
    assert_refused("race-bench", &outcome, &kubeconfig)?;
    assert!(
        !out.join("results.json").exists(),
        "a refused run writes no results"
    );

    let json = dir.path().join("memory.json");
    let mut memory = Command::new(memory_bench()?);
    memory
        .args(["--pods", "2", "--rounds", "1", "--warmup", "0"])
        .arg("--json")
        .arg(&json)
        .arg("--kubeconfig")
        .arg(&kubeconfig);
    let outcome = run(memory, None, Duration::from_secs(30))?;
    assert_refused("memory-bench", &outcome, &kubeconfig)?;
    assert!(!json.exists(), "a refused run writes no report");
    Ok(())
}

#[test]
fn consent_naming_another_context_is_refused_too() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = remote_kubeconfig(dir.path())?;
    let mut race = Command::new(race_bench()?);
    race.args(["--pods", "2", "--rounds", "1", "--strategies", "lax"])
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--yes-create-pods-in", "kind-local"]);
    let outcome = run(race, None, Duration::from_secs(30))?;
    assert!(!outcome.success, "{}", outcome.stderr);
    let expected = format!(
        "--yes-create-pods-in \"kind-local\" does not name the current context \"{CONTEXT}\" of kubeconfig {} (server {REMOTE}",
        kubeconfig.display()
    );
    assert!(
        outcome.stderr.contains(&expected) && outcome.stderr.contains("nothing was created"),
        "expected {expected:?} in stderr:\n{}",
        outcome.stderr
    );
    let path = kubeconfig.display().to_string();
    assert_on_troubleshooting_page(
        &outcome.stderr,
        "--yes-create-pods-in",
        &[
            (&format!("{REMOTE}/"), "{server}"),
            (REMOTE, "{server}"),
            (&path, "{path}"),
            ("kind-local", "{name}"),
            (CONTEXT, "{context}"),
        ],
    )?;
    Ok(())
}

#[test]
fn with_kubeconfig_set_and_no_flag_the_benchmark_says_it_ignores_it_and_runs_embedded()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let kubeconfig = remote_kubeconfig(dir.path())?;
    let out = dir.path().join("out");
    // The embedded control plane must be built before the deadline starts.
    concord_testenv::TestEnv::shared()?;
    let mut race = Command::new(race_bench()?);
    race.args([
        "--pods",
        "2",
        "--rounds",
        "1",
        "--writers",
        "1",
        "--strategies",
        "lax",
    ])
    .arg("--out")
    .arg(&out);
    let outcome = run(race, Some(&kubeconfig), Duration::from_secs(180))?;
    assert!(
        outcome.success,
        "the run on the embedded control plane failed:\n{}",
        outcome.stderr
    );
    let expected = format!(
        "ignoring $KUBECONFIG ({}): running on the embedded control plane; to run on that cluster, pass --kubeconfig \"$KUBECONFIG\"",
        kubeconfig.display()
    );
    assert!(
        outcome.stderr.contains(&expected),
        "expected {expected:?} in stderr:\n{}",
        outcome.stderr
    );
    let path = kubeconfig.display().to_string();
    assert_on_troubleshooting_page(
        &outcome.stderr,
        "ignoring $KUBECONFIG",
        &[(&path, "{path}")],
    )?;
    let everything = format!("{}{}", outcome.stdout, outcome.stderr);
    assert!(
        everything.contains("on https://127.0.0.1:"),
        "ran on a loopback server:\n{everything}"
    );
    assert!(!everything.contains("10.255.255.1"), "{everything}");
    assert!(
        out.join("results.json").exists(),
        "the run wrote its results"
    );
    Ok(())
}
