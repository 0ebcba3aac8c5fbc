//! The `controller-runtime` contender: a Go program (`peer/`) doing the
//! same work the way a Go operator does, built with the machine's Go and
//! cached like the control plane.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use crate::results::RoundFigures;
use crate::scenarios::{Change, FOREIGN, Race, Workload, name};
use crate::tally::Counts;
use crate::usage;
use crate::wire::Bytesum;

/// The Go module of the peer.
const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peer");

/// The peer's executable, built from `peer/` on first use and cached like
/// the control plane (see [`concord_testenv::GoProgram`]).
///
/// # Errors
///
/// When `go` is missing or the build fails (the message names the module
/// directory), or the cache cannot be written.
pub(crate) fn ensure() -> anyhow::Result<PathBuf> {
    concord_testenv::GoProgram::new("race-bench-peer", SOURCE_DIR, "the controller-runtime peer")
        .ensure()
        .context("building the controller-runtime peer")
}

/// The work sent to the peer on stdin.
#[derive(Serialize)]
struct Work<'a> {
    kubeconfig: &'a Path,
    namespace: &'a str,
    mode: &'a str,
    writers: u32,
    foreign_finalizer: &'a str,
    items: Vec<PeerItem>,
}

#[derive(Serialize)]
struct PeerItem {
    name: String,
    change: PeerChange,
    raced: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    twin: Option<PeerChange>,
}

#[derive(Serialize)]
struct PeerChange {
    #[serde(skip_serializing_if = "Option::is_none")]
    remove_finalizer: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_value: Option<String>,
}

impl From<&Change> for PeerChange {
    fn from(c: &Change) -> Self {
        PeerChange {
            remove_finalizer: c.remove_finalizer,
            label_key: c.set_label.as_ref().map(|(k, _)| k.clone()),
            label_value: c.set_label.as_ref().map(|(_, v)| v.clone()),
        }
    }
}

/// What the peer prints on stdout.
#[derive(Deserialize)]
struct PeerResult {
    wall_s: f64,
    latencies_micros: Option<Vec<u32>>,
    writes: u64,
    succeeded: u64,
    failed_writes: u64,
    errors: u64,
    requeues: u64,
    requests_by_verb: [u64; 4],
    conflicts: u64,
    retries: u64,
    cpu_ms: f64,
    peak_rss_kib: u64,
    bytes_sent: u64,
    bytes_received: u64,
}

/// The line the peer prints once its cache holds every pod; it then waits
/// for [`GO`] on stdin before its timed phase.
const READY: &str = "ready";
/// What starts the peer's timed phase.
const GO: &[u8] = b"go\n";

/// One run of the peer.
pub(crate) struct Job<'a> {
    /// The peer's executable.
    pub(crate) binary: &'a Path,
    /// The kubeconfig it connects with.
    pub(crate) kubeconfig: &'a Path,
    /// The namespace of the round.
    pub(crate) namespace: &'a str,
    /// `strict` or `lax`.
    pub(crate) mode: &'a str,
    /// Its workers.
    pub(crate) writers: u32,
    /// The API server process whose CPU time the phase is charged.
    pub(crate) server_pid: Option<u32>,
}

/// The longest a peer run may take, cache sync included.
const TIMEOUT: Duration = Duration::from_secs(1800);

/// Run `workload` with the peer as `job` says: hand it the work, wait
/// until its cache is full, then time its write phase (its own figures, and
/// the API server's CPU time around it).
///
/// # Errors
///
/// When the peer cannot start, fails, or prints something unreadable.
pub(crate) async fn run(job: Job<'_>, workload: &Workload) -> anyhow::Result<RoundFigures> {
    let Job {
        binary,
        kubeconfig,
        namespace,
        mode,
        writers,
        server_pid,
    } = job;
    let items = workload
        .lanes
        .items()
        .into_iter()
        .map(|item| PeerItem {
            name: name(item.object),
            change: (&item.change).into(),
            raced: matches!(item.race, Race::Foreign),
            twin: match &item.race {
                Race::Twin(twin) => Some(twin.into()),
                _ => None,
            },
        })
        .collect();
    let work = Work {
        kubeconfig,
        namespace,
        mode,
        writers,
        foreign_finalizer: FOREIGN,
        items,
    };
    let mut input = serde_json::to_vec(&work)?;
    input.push(b'\n');
    let mut child = tokio::process::Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let (Some(mut stdin), Some(stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        anyhow::bail!("the peer's standard streams were not piped");
    };
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let talk = async {
        stdin.write_all(&input).await?;
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).await?;
        anyhow::ensure!(
            line.trim() == READY,
            "the peer printed {line:?} instead of {READY:?}"
        );
        let server_before = server_pid.and_then(usage::cpu_ms_of_pid);
        stdin.write_all(GO).await?;
        drop(stdin);
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).await?;
        let server_after = server_pid.and_then(usage::cpu_ms_of_pid);
        anyhow::Ok((rest, server_before.zip(server_after).map(|(a, b)| b - a)))
    };
    let talked = tokio::time::timeout(TIMEOUT, talk)
        .await
        .with_context(|| format!("the peer did not finish within {TIMEOUT:?}"))?;
    let status = tokio::time::timeout(TIMEOUT, child.wait())
        .await
        .with_context(|| format!("the peer did not exit within {TIMEOUT:?}"))??;
    let stderr = errors.await.unwrap_or_default();
    anyhow::ensure!(
        status.success(),
        "the controller-runtime peer failed ({status}): {stderr}"
    );
    let (stdout, server_cpu_ms) =
        talked.with_context(|| format!("talking to the controller-runtime peer: {stderr}"))?;
    let r: PeerResult = serde_json::from_slice(&stdout).with_context(|| {
        format!(
            "reading the peer's figures from {:?}",
            String::from_utf8_lossy(&stdout)
        )
    })?;
    Ok(RoundFigures {
        wall: Duration::from_secs_f64(r.wall_s.max(0.0)),
        latencies_micros: r.latencies_micros.unwrap_or_default(),
        writes: r.writes,
        succeeded: r.succeeded,
        failed: r.failed_writes,
        errors: r.errors,
        requeues: r.requeues,
        raced: workload.raced() as u64,
        counts: Counts {
            // The peer reports get, patch, update and apply, in that order.
            requests: std::array::from_fn(|i| r.requests_by_verb.get(i).copied().unwrap_or(0)),
            conflicts: r.conflicts,
            retries: r.retries.saturating_sub(r.requeues),
            fallbacks: 0,
            cache_rereads: None,
            get_rereads: None,
        },
        lost: 0,
        cpu_ms: Some(r.cpu_ms),
        peak_rss_kib: Some(r.peak_rss_kib),
        bytes: Some(Bytesum {
            sent: r.bytes_sent,
            received: r.bytes_received,
        }),
        server_cpu_ms,
    })
}
