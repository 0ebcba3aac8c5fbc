//! The controller-runtime contender: the Go program in `peer/`, built
//! from its modules with the machine's Go on first use and cached like
//! the control plane, connecting through the fault proxy.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, bail, ensure};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The Go module of the peer.
const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/stale-bench/peer");
/// How long the peer may take to start and fill its cache.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long it may take to stop and print its figures.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// The peer's executable, built on first use.
///
/// # Errors
///
/// When `go` is missing or the build fails (the message names the module).
pub(crate) fn ensure() -> Result<PathBuf> {
    concord_testenv::GoProgram::new(
        "stale-bench-peer",
        SOURCE_DIR,
        "the stale-decision benchmark's controller-runtime peer",
    )
    .ensure()
    .context("building the controller-runtime peer")
}

/// A kubeconfig whose cluster is the fault proxy at `address` (plain
/// HTTP on loopback, no credentials: the proxy forwards with its own).
pub(crate) fn kubeconfig(address: std::net::SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\n\
         clusters:\n- name: proxy\n  cluster:\n    server: http://{address}\n\
         users:\n- name: proxy\n  user: {{}}\n\
         contexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n\
         current-context: proxy\n"
    )
}

/// What the peer prints when it stops.
#[derive(Deserialize)]
pub(crate) struct Stopped {
    /// Reconciles it ran.
    pub(crate) reconciles: u64,
    /// Creates its reconciler sent (its own count; the table's come from
    /// the API server).
    pub(crate) creates: u64,
    /// Deletes its reconciler sent.
    pub(crate) deletes: u64,
    /// Reconciles that returned an error.
    pub(crate) errors: u64,
}

/// The peer running on one namespace.
pub(crate) struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: tokio::task::JoinHandle<String>,
}

/// Starts `binary` on `namespace` with the kubeconfig at `kubeconfig` and
/// waits until its cache has synced.
///
/// # Errors
///
/// When it cannot start, fails, or is not ready in time.
pub(crate) async fn start(
    binary: &Path,
    kubeconfig: &Path,
    namespace: &str,
    concurrency: u16,
) -> Result<Running> {
    let mut child = tokio::process::Command::new(binary)
        .arg(format!("-kubeconfig={}", kubeconfig.display()))
        .arg(format!("-namespace={namespace}"))
        .arg(format!("-concurrency={concurrency}"))
        // A paged LIST, then a WATCH from its version: client-go's default
        // streaming list asks for the latest version, and in two runs of
        // the benchmark the peer's cache did not sync within 120 s (one
        // logged client-go still waiting for the bookmark that ends the
        // initial events after 80 s). concord's cache streams from
        // version 0, which is served at once.
        .env("KUBE_FEATURE_WatchListClient", "false")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let (Some(stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        bail!("the peer's standard streams were not piped");
    };
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut running = Running {
        child,
        stdin,
        stdout: BufReader::new(stdout),
        stderr,
    };
    let mut line = String::new();
    let read = tokio::time::timeout(READY_TIMEOUT, running.stdout.read_line(&mut line)).await;
    if line.trim() != "ready" {
        let _ = running.child.start_kill();
        let stderr = running.stderr.await.unwrap_or_default();
        match read {
            Err(_) => bail!("the peer was not ready within {READY_TIMEOUT:?}: {stderr}"),
            Ok(_) => bail!("the peer printed {line:?} instead of \"ready\": {stderr}"),
        }
    }
    Ok(running)
}

impl Running {
    /// Stops the peer and reads its figures.
    ///
    /// # Errors
    ///
    /// When it fails, does not stop in time or prints something unreadable.
    pub(crate) async fn stop(mut self) -> Result<Stopped> {
        let talk = async {
            self.stdin.write_all(b"stop\n").await?;
            self.stdin.shutdown().await?;
            let mut rest = String::new();
            self.stdout.read_to_string(&mut rest).await?;
            let status = self.child.wait().await?;
            anyhow::Ok((rest, status))
        };
        let (rest, status) = tokio::time::timeout(STOP_TIMEOUT, talk)
            .await
            .with_context(|| format!("the peer did not stop within {STOP_TIMEOUT:?}"))??;
        let stderr = self.stderr.await.unwrap_or_default();
        ensure!(
            status.success(),
            "the controller-runtime peer failed ({status}): {stderr}"
        );
        serde_json::from_str(&rest)
            .with_context(|| format!("reading the peer's figures from {rest:?}"))
    }
}
