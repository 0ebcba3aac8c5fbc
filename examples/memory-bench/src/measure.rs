//! One operator process through both phases: caches synced, then a full
//! pass of writes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use kube::api::{Api, DynamicObject};
use serde::Serialize;

use crate::args::Args;
use crate::objects::{self, census};
use crate::process::Process;
use crate::status::Status;

/// Resident memory at one moment, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Figure {
    /// VmRSS.
    pub rss_kib: u64,
    /// VmHWM.
    pub hwm_kib: u64,
}

impl From<concord_examples::procfs::Memory> for Figure {
    fn from(m: concord_examples::procfs::Memory) -> Self {
        Figure {
            rss_kib: m.rss_kib,
            hwm_kib: m.hwm_kib,
        }
    }
}

/// What one operator process did and used in one round.
#[derive(Clone, Debug, Serialize)]
pub struct RunFigures {
    /// `concord` or `controller-runtime`.
    pub operator: &'static str,
    /// What the concord operator allocated with (`AllocatorChoice`:
    /// `system`, `system-trim`, `jemalloc`, `mimalloc`); `go` for the
    /// controller-runtime operator.
    pub allocator: &'static str,
    /// The round, from 0.
    pub round: usize,
    /// Seconds from the start until its cache held every object.
    pub sync_s: f64,
    /// Memory after the caches synced and `settle_secs` more: its VmHWM is
    /// the peak of the start and the initial list.
    pub synced: Figure,
    /// Memory after every object carried this round's label and
    /// `settle_secs` more. Its VmHWM is the peak of the write pass alone
    /// when `peak_reset` (VmHWM was reset after the first reading),
    /// else of the whole life.
    pub written: Figure,
    /// KiB the process's allocator held at the synced reading (concord
    /// only: 0 for the Go peer): the steady state of a synced cache.
    pub synced_heap_kib: u64,
    /// The most the allocator held from the start to the synced reading
    /// (concord only): the peak of the initial list.
    pub list_heap_peak_kib: u64,
    /// KiB the allocator held at the written reading (concord only).
    pub written_heap_kib: u64,
    /// Whether VmHWM could be reset between the phases.
    pub peak_reset: bool,
    /// The peak over the whole life: the larger VmHWM.
    pub lifetime_hwm_kib: u64,
    /// Seconds from asking for the round until every object carried it.
    pub write_pass_s: f64,
    /// Reconciles during the write phase.
    pub reconciles: u64,
    /// Writes that succeeded during the write phase.
    pub writes: u64,
    /// Writes that failed during the write phase.
    pub failed: u64,
    /// Allocations during the write phase.
    pub allocations: u64,
    /// `allocations / reconciles`.
    pub allocations_per_reconcile: f64,
    /// Microseconds a reconcile took, on average, during the write phase
    /// (concord only: 0 for the Go peer).
    pub reconcile_us: f64,
    /// Microseconds of decoding per reconcile in a compact cache during
    /// the write phase (concord only).
    pub decode_us_per_reconcile: f64,
    /// Milliseconds of CPU (user and system, from `/proc/<pid>/stat`) the
    /// process used from the synced reading to the written one.
    pub write_cpu_ms: f64,
    /// glibc's arenas and their free bytes at the synced reading (concord
    /// on the system allocator only; else 0).
    pub synced_malloc: Malloc,
    /// The same at the written reading.
    pub written_malloc: Malloc,
    /// Trims of glibc's free memory during the write phase.
    pub trims: u64,
    /// Milliseconds those trims took.
    pub trim_ms: f64,
    /// Objects found carrying this round's label, listed from the server.
    pub written_objects: usize,
    /// Objects listed.
    pub objects: usize,
}

/// glibc's account of its arenas at one reading, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Malloc {
    /// What the arenas hold from the system, mmapped blocks included.
    pub arena_kib: u64,
    /// What is free inside them.
    pub free_kib: u64,
}

impl From<&Status> for Malloc {
    fn from(s: &Status) -> Self {
        Malloc {
            arena_kib: s.malloc_arena_kib,
            free_kib: s.malloc_free_kib,
        }
    }
}

/// The operator one round starts: who it is, its program, arguments and
/// the variables added to its environment.
pub(crate) type Launch<'a> = (
    &'static str,
    &'a Path,
    &'a [String],
    &'a [(&'a str, &'a str)],
);

/// Waits until `process` has cached `objects` objects, lets it settle and
/// reads its memory.
pub(crate) async fn synced(
    process: &mut Process,
    objects: usize,
    settle: Duration,
) -> anyhow::Result<(Figure, Status, f64)> {
    let started = Instant::now();
    let n = objects as u64;
    process
        .wait_for(
            &format!("a synced cache of {objects} objects"),
            Args::sync_limit(objects),
            // Both: the store (the informer) reports it synced — concord's
            // `Store::wait_until_ready`, the Go peer's `WaitForCacheSync` —
            // and holds all N objects.
            |s| s.synced && s.cached == n,
        )
        .await?;
    let sync_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(settle).await;
    let figure = process.memory()?.into();
    let status = process.status().unwrap_or_default();
    Ok((figure, status, sync_s))
}

/// Polls the server every second until every object carries a wanted
/// round starting with `token` in its label, at most `limit`.
pub(crate) async fn until_written(
    api: &Api<DynamicObject>,
    process: &mut Process,
    token: &str,
    objects: usize,
    limit: Duration,
) -> anyhow::Result<objects::Census> {
    let deadline = Instant::now() + limit;
    loop {
        let seen = census(api, Some(token)).await?;
        if seen.written == objects {
            return Ok(seen);
        }
        if Instant::now() > deadline {
            bail!(
                "{} of {objects} objects carry round {token} after {limit:?} ({} operator, last status {:?})",
                seen.written,
                process.who,
                process.status()
            );
        }
        // An operator that died fails here, not at the deadline.
        process
            .wait_for("running", Duration::ZERO, |_| true)
            .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs one operator through both phases on `objects` objects: start it
/// (`program args`), wait for its cache, read memory; ask for `token` on
/// every object, wait until the server shows every object written, read
/// memory; stop it.
pub(crate) async fn round(
    (who, program, args, env): Launch<'_>,
    api: &Api<DynamicObject>,
    objects: usize,
    round: usize,
    token: &str,
    settle: Duration,
) -> anyhow::Result<RunFigures> {
    let mut process = Process::spawn_with(who, program, args, env)?;
    let (synced, before, sync_s) = self::synced(&mut process, objects, settle).await?;
    let cpu_before = process.cpu_ms().unwrap_or_default();
    let peak_reset = process.reset_peak();
    let asked = Instant::now();
    objects::want(api, 0..objects, token).await?;
    let seen = until_written(
        api,
        &mut process,
        token,
        objects,
        Args::write_limit(objects),
    )
    .await?;
    let write_pass_s = asked.elapsed().as_secs_f64();
    tokio::time::sleep(settle).await;
    let written: Figure = process.memory()?.into();
    let after = process.status().unwrap_or_default();
    let write_cpu_ms = process.cpu_ms().unwrap_or_default() - cpu_before;
    process.stop().await?;
    let reconciles = after.reconciles.saturating_sub(before.reconciles);
    let allocations = after.allocs.saturating_sub(before.allocs);
    Ok(RunFigures {
        operator: who,
        allocator: "go",
        round,
        sync_s,
        synced,
        written,
        synced_heap_kib: before.heap_kib,
        list_heap_peak_kib: before.heap_peak_kib,
        written_heap_kib: after.heap_kib,
        peak_reset,
        lifetime_hwm_kib: synced.hwm_kib.max(written.hwm_kib),
        write_pass_s,
        reconciles,
        writes: after.writes.saturating_sub(before.writes),
        failed: after.failed.saturating_sub(before.failed),
        allocations,
        allocations_per_reconcile: allocations as f64 / reconciles.max(1) as f64,
        reconcile_us: after.reconcile_us.saturating_sub(before.reconcile_us) as f64
            / reconciles.max(1) as f64,
        decode_us_per_reconcile: after.decode_us.saturating_sub(before.decode_us) as f64
            / reconciles.max(1) as f64,
        write_cpu_ms,
        synced_malloc: (&before).into(),
        written_malloc: (&after).into(),
        trims: after.trims.saturating_sub(before.trims),
        trim_ms: after.trim_us.saturating_sub(before.trim_us) as f64 / 1000.0,
        written_objects: seen.written,
        objects: seen.objects,
    })
}
