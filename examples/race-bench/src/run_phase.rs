//! A contender's timed write phase, in this process: the clocks and
//! counters it is measured by, read when the phase starts and when its
//! last write is made, for a direct writer and for a `Manager`; and the
//! setting every contender of a round runs in.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;

use crate::cache::Cache;
use crate::controller::{self, Crew};
use crate::foreign::Inline;
use crate::progress::Progress;
use crate::results::RoundFigures;
use crate::scenarios::Workload;
use crate::send::Sender;
use crate::wire::{Bytesum, WireBytes};
use crate::{Args, Contender, manager, usage};

/// The longest the writes of one contender may take.
const WRITE_PHASE_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest the cache may take to see every created pod.
const CACHE_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the contenders of a round run, shared by every `run_one`.
pub(super) struct Setting<'a> {
    pub(super) args: &'a Args,
    /// The client of our contenders (setup and checks too), its body bytes
    /// counted in `wire`.
    pub(super) client: Client,
    pub(super) wire: Arc<WireBytes>,
    /// The API server's process, when known.
    pub(super) server_pid: Option<u32>,
    pub(super) foreign_client: Client,
    pub(super) kubeconfig: PathBuf,
    pub(super) peer: Option<PathBuf>,
    pub(super) progress: Progress,
}

/// The write phase of a contender running in this process.
pub(super) async fn ours(
    s: &Setting<'_>,
    contender: Contender,
    ns: &str,
    workload: &Workload,
) -> anyhow::Result<RoundFigures> {
    let name = contender.as_str();
    let objects = workload.specs.len();
    let cache = Arc::new(Cache::start(s.client.clone(), ns, objects));
    cache.wait_for(objects, CACHE_TIMEOUT).await?;
    let sender = Arc::new(Sender::new(contender, &s.client, ns, cache.clone()));
    let bar = s.progress.bar(name, "write", workload.lanes.len() as u64);
    let crew = Crew {
        cache: cache.clone(),
        sender: sender.clone(),
        foreign: Some(Arc::new(Inline::new(s.foreign_client.clone(), ns))),
        bar: bar.clone(),
    };
    let rss_reset = usage::reset_peak_rss();
    let phase = s.phase_start();
    let run = tokio::time::timeout(
        WRITE_PHASE_TIMEOUT,
        controller::run(&workload.lanes, s.args.writers, crew),
    )
    .await
    .with_context(|| format!("{name} did not finish its writes within {WRITE_PHASE_TIMEOUT:?}"))?;
    let costs = phase.end(s);
    let peak = usage::peak_rss_kib().filter(|_| rss_reset);
    bar.finish_and_clear();
    anyhow::ensure!(
        run.foreign_failed == 0,
        "the other controller failed {} adds inside the window",
        run.foreign_failed
    );
    drop(cache);
    Ok(RoundFigures {
        wall: run.wall,
        latencies_micros: run.latencies_micros,
        writes: run.succeeded + run.failed,
        succeeded: run.succeeded,
        failed: run.failed,
        errors: run.errors,
        requeues: run.requeues,
        raced: workload.raced() as u64,
        counts: sender.counts(),
        lost: 0,
        cpu_ms: costs.cpu_ms,
        peak_rss_kib: peak,
        bytes: Some(costs.bytes),
        server_cpu_ms: costs.server_cpu_ms,
    })
}

/// The write phase of a contender running through a `Manager`.
pub(super) async fn through_manager(
    s: &Setting<'_>,
    strategy: concord::featuregates::StrategyName,
    name: &str,
    read_your_writes: bool,
    ns: &str,
    workload: &Workload,
) -> anyhow::Result<RoundFigures> {
    let bar = s.progress.bar(name, "write", workload.lanes.len() as u64);
    let foreign = Arc::new(Inline::new(s.foreign_client.clone(), ns));
    let rss_reset = usage::reset_peak_rss();
    let job = manager::Job {
        client: s.client.clone(),
        namespace: ns,
        strategy,
        writers: s.args.writers,
        foreign,
        bar: bar.clone(),
        timeout: WRITE_PHASE_TIMEOUT,
        layout: s.args.cache_layout,
        name,
        read_your_writes,
    };
    let (mut figures, counts, costs) =
        manager::run(job, workload, || s.phase_start(), |phase| phase.end(s)).await?;
    figures.cpu_ms = costs.cpu_ms;
    figures.bytes = Some(costs.bytes);
    figures.server_cpu_ms = costs.server_cpu_ms;
    figures.peak_rss_kib = usage::peak_rss_kib().filter(|_| rss_reset);
    figures.counts = counts;
    bar.finish_and_clear();
    Ok(figures)
}

/// The readings at the start of a write phase.
struct PhaseStart {
    cpu_ms: Option<f64>,
    server_cpu_ms: Option<f64>,
    bytes: Bytesum,
}

/// What a write phase of an in-process contender cost.
struct PhaseCosts {
    /// This process's CPU time.
    cpu_ms: Option<f64>,
    /// The API server process's CPU time, when it is known.
    server_cpu_ms: Option<f64>,
    /// Body bytes of our client.
    bytes: Bytesum,
}

impl Setting<'_> {
    /// Read the clocks and counters a write phase is measured by.
    fn phase_start(&self) -> PhaseStart {
        PhaseStart {
            cpu_ms: usage::cpu_ms(),
            server_cpu_ms: self.server_pid.and_then(usage::cpu_ms_of_pid),
            bytes: self.wire.now(),
        }
    }
}

impl PhaseStart {
    /// What happened since the start.
    fn end(self, s: &Setting<'_>) -> PhaseCosts {
        let server_now = s.server_pid.and_then(usage::cpu_ms_of_pid);
        PhaseCosts {
            cpu_ms: self.cpu_ms.zip(usage::cpu_ms()).map(|(a, b)| b - a),
            server_cpu_ms: self.server_cpu_ms.zip(server_now).map(|(a, b)| b - a),
            bytes: s.wire.now().since(self.bytes),
        }
    }
}
