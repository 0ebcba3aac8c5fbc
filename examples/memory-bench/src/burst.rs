//! The burst: the concord operator with a deliberately slow reconciler
//! (one reconcile at a time, each sleeping first) while the harness sends
//! a bounded number of annotation updates over a set of objects; its
//! memory is sampled every second, and at the end every object must carry
//! its final wanted value, reconciled.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt, stream};
use kube::Client;
use serde::Serialize;

use crate::args::Args;
use crate::measure::{self, Figure};
use crate::objects::{self, census};
use crate::process::Process;
use crate::programs::Programs;

/// The prefix of the burst's wanted values.
const TOKEN: &str = "b";
/// Updates in flight at most.
const CONCURRENCY: usize = 32;

/// One reading, once a second.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sample {
    /// Seconds since the first update was sent.
    pub t_s: f64,
    /// VmRSS in KiB.
    pub rss_kib: u64,
    /// VmHWM in KiB (since the cache synced, when the reset worked).
    pub hwm_kib: u64,
    /// Updates the harness had sent.
    pub events_sent: usize,
    /// Reconciles the operator had started since the burst began.
    pub reconciles: u64,
}

/// What the burst measured.
#[derive(Clone, Debug, Serialize)]
pub struct BurstReport {
    /// Objects the updates were spread over.
    pub objects: usize,
    /// Updates sent.
    pub events: usize,
    /// Milliseconds each reconcile slept.
    pub sleep_ms: u64,
    /// Memory once the cache synced.
    pub synced: Figure,
    /// Whether VmHWM was reset after that reading.
    pub peak_reset: bool,
    /// The samples.
    pub samples: Vec<Sample>,
    /// The largest VmHWM sampled.
    pub peak_hwm_kib: u64,
    /// Memory once every object was reconciled at its final value.
    pub end: Figure,
    /// Seconds the updates took to send.
    pub send_s: f64,
    /// Seconds from the last update until every object carried its final
    /// value.
    pub drain_s: f64,
    /// Reconciles during the burst.
    pub reconciles: u64,
    /// Writes that succeeded during the burst.
    pub writes: u64,
    /// Writes that failed during the burst.
    pub failed: u64,
    /// Objects whose label carries their final wanted value, listed from
    /// the server.
    pub reconciled_at_final: usize,
}

/// Runs the burst in `namespace`.
///
/// # Errors
///
/// When a request fails, the operator fails, or the objects are not all
/// reconciled at their final value within the limit.
pub(crate) async fn run(
    args: &Args,
    programs: &Programs,
    client: &Client,
    namespace: &str,
) -> anyhow::Result<BurstReport> {
    let n = args.burst_pods;
    anyhow::ensure!(n > 0, "--burst-pods must be at least 1");
    anyhow::ensure!(
        args.events >= n,
        "--events ({}) must be at least --burst-pods ({n}): every object needs a final value",
        args.events
    );
    let api = objects::api(client, namespace, args.kind);
    objects::create(&api, args.kind, n, None).await?;
    let choice = args.allocators.first().copied().unwrap_or_default();
    let argv = programs.concord_args(
        namespace,
        args.kind,
        args.cache,
        1,
        args.burst_sleep_ms,
        choice,
    );
    let mut process = Process::spawn_with("concord", &programs.concord, &argv, &choice.env())?;
    let (synced, before, _) = measure::synced(&mut process, n, args.settle()).await?;
    let peak_reset = process.reset_peak();

    let sent = Arc::new(AtomicUsize::new(0));
    let sender = {
        let (api, sent, events) = (api.clone(), sent.clone(), args.events);
        // Updates j and j + n go to the same object; fewer than n in
        // flight keeps them in order, so the last value sent is final.
        let in_flight = CONCURRENCY.min(n);
        tokio::spawn(async move {
            stream::iter(0..events)
                .map(|j| {
                    let (api, sent) = (&api, &sent);
                    async move {
                        objects::set_want(api, j % n, &format!("{TOKEN}{}", j / n)).await?;
                        sent.fetch_add(1, Relaxed);
                        anyhow::Ok(())
                    }
                })
                .buffer_unordered(in_flight)
                .try_collect::<()>()
                .await
        })
    };
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut send_s = None;
    let limit =
        Args::write_limit(n) * 4 + Duration::from_millis(args.burst_sleep_ms) * (4 * n) as u32;
    let reconciled = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let memory = process.memory()?;
        let status = process.status().unwrap_or_default();
        samples.push(Sample {
            t_s: started.elapsed().as_secs_f64(),
            rss_kib: memory.rss_kib,
            hwm_kib: memory.hwm_kib,
            events_sent: sent.load(Relaxed),
            reconciles: status.reconciles.saturating_sub(before.reconciles),
        });
        if send_s.is_none() && sender.is_finished() {
            send_s = Some(started.elapsed());
        }
        if let Some(sent_at) = send_s {
            let seen = census(&api, Some(TOKEN)).await?;
            if seen.written == n {
                break (seen, sent_at);
            }
            anyhow::ensure!(
                started.elapsed() < sent_at + limit,
                "{} of {n} objects reconciled at their final value {limit:?} after the burst",
                seen.written
            );
        }
        process
            .wait_for("running", Duration::ZERO, |_| true)
            .await?;
    };
    sender.await.context("the burst's sender")??;
    let (seen, sent_at) = reconciled;
    let drain_s = (started.elapsed() - sent_at).as_secs_f64();
    let end: Figure = process.memory()?.into();
    let after = process.status().unwrap_or_default();
    process.stop().await?;
    Ok(BurstReport {
        objects: n,
        events: args.events,
        sleep_ms: args.burst_sleep_ms,
        synced,
        peak_reset,
        peak_hwm_kib: samples.iter().map(|s| s.hwm_kib).max().unwrap_or(0),
        samples,
        end,
        send_s: sent_at.as_secs_f64(),
        drain_s,
        reconciles: after.reconciles.saturating_sub(before.reconciles),
        writes: after.writes.saturating_sub(before.writes),
        failed: after.failed.saturating_sub(before.failed),
        reconciled_at_final: seen.written,
    })
}

/// The burst as text.
pub(crate) fn table(b: &BurstReport) -> String {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nburst: {} updates over {} objects, reconciler sleeping {} ms, one at a time",
        b.events, b.objects, b.sleep_ms
    );
    let _ = writeln!(
        out,
        "  synced: VmHWM {:.1} MiB, VmRSS {:.1} MiB; peak during the burst {:.1} MiB{}; at the end VmRSS {:.1} MiB",
        mib(b.synced.hwm_kib),
        mib(b.synced.rss_kib),
        mib(b.peak_hwm_kib),
        if b.peak_reset { "" } else { " (lifetime)" },
        mib(b.end.rss_kib)
    );
    let _ = writeln!(
        out,
        "  sent in {:.1} s, drained {:.1} s later; {} reconciles, {} writes, {} failed; {} of {} objects reconciled at their final value",
        b.send_s, b.drain_s, b.reconciles, b.writes, b.failed, b.reconciled_at_final, b.objects
    );
    let _ = writeln!(
        out,
        "  | t (s) | sent | reconciles | VmRSS MiB | VmHWM MiB |"
    );
    let _ = writeln!(out, "  | ---: | ---: | ---: | ---: | ---: |");
    // At most about 30 rows: every k-th sample, and the last.
    let step = b.samples.len().div_ceil(30).max(1);
    for (i, s) in b.samples.iter().enumerate() {
        if i % step == 0 || i + 1 == b.samples.len() {
            let _ = writeln!(
                out,
                "  | {:.0} | {} | {} | {:.1} | {:.1} |",
                s.t_s,
                s.events_sent,
                s.reconciles,
                mib(s.rss_kib),
                mib(s.hwm_kib)
            );
        }
    }
    out
}
