//! The `controller-runtime` contender: a Go program (`peer/`) doing the
//! same work the way a Go operator does, built with the machine's Go and
//! cached like the control plane.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt as _;

use crate::results::RoundFigures;
use crate::scenarios::{Change, FOREIGN, Race, Workload, name};
use crate::tally::Counts;

/// The Go module of the peer.
const SOURCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peer");

/// The peer's executable, built from `peer/` on first use and cached in
/// `$CONCORD_CONTROLPLANE_CACHE`, else `$XDG_CACHE_HOME/concord`, else
/// `~/.cache/concord`, under a name keyed by a hash of its sources.
///
/// # Errors
///
/// When `go` is missing or the build fails (the message names the module
/// directory), or the cache cannot be written.
pub(crate) fn ensure() -> anyhow::Result<PathBuf> {
    let source = Path::new(SOURCE_DIR);
    let key = source_hash(source)?;
    let cache = cache_dir();
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let path = cache.join(format!("race-bench-peer-{key:016x}"));
    if path.is_file() {
        return Ok(path);
    }
    let lock_path = cache.join("race-bench-peer.lock");
    let lock =
        File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    if !path.is_file() {
        eprintln!(
            "race-bench: building the controller-runtime peer from {} (the first build takes a few minutes)",
            source.display()
        );
        let partial = path.with_extension("partial");
        let output = std::process::Command::new("go")
            .args(["build", "-o"])
            .arg(&partial)
            .arg(".")
            .current_dir(source)
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod -buildvcs=false")
            .output()
            .with_context(|| format!("running `go build` in {}", source.display()))?;
        anyhow::ensure!(
            output.status.success(),
            "building the controller-runtime peer in {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        fs::rename(&partial, &path).with_context(|| format!("moving to {}", path.display()))?;
    }
    Ok(path)
}

fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CONCORD_CONTROLPLANE_CACHE") {
        return dir.into();
    }
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("concord")
}

/// FNV-1a over `go.mod`, `go.sum` and the `*.go` files, names included.
fn source_hash(dir: &Path) -> anyhow::Result<u64> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name == "go.mod" || name == "go.sum" || name.ends_with(".go")
        })
        .collect();
    files.sort();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in files {
        let bytes = fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
        let name = file
            .file_name()
            .map(|n| n.as_encoded_bytes().to_vec())
            .unwrap_or_default();
        for byte in name.iter().chain(&bytes) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(hash)
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
}

/// The longest a peer run may take, cache sync included.
const TIMEOUT: Duration = Duration::from_secs(1800);

/// Run `workload` in `namespace` with the peer at `binary` in `mode`
/// (`strict` or `lax`).
///
/// # Errors
///
/// When the peer cannot start, fails, or prints something unreadable.
pub(crate) async fn run(
    binary: &Path,
    kubeconfig: &Path,
    namespace: &str,
    mode: &str,
    writers: u32,
    workload: &Workload,
) -> anyhow::Result<RoundFigures> {
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
    let input = serde_json::to_vec(&work)?;
    let mut child = tokio::process::Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&input).await?;
    }
    let output = tokio::time::timeout(TIMEOUT, child.wait_with_output())
        .await
        .with_context(|| format!("the peer did not finish within {TIMEOUT:?}"))??;
    anyhow::ensure!(
        output.status.success(),
        "the controller-runtime peer failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let r: PeerResult = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "reading the peer's figures from {:?}",
            String::from_utf8_lossy(&output.stdout)
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
            requests: r.requests_by_verb,
            conflicts: r.conflicts,
            retries: r.retries.saturating_sub(r.requeues),
            fallbacks: 0,
            cache_rereads: None,
            get_rereads: None,
        },
        lost: 0,
        cpu_ms: Some(r.cpu_ms),
        peak_rss_kib: Some(r.peak_rss_kib),
    })
}
