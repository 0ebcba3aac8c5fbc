//! The standby benchmark: a leader and one standby replica of a
//! `--leader-elect` manager in this process, on M ConfigMaps. The leader
//! crashes (its task aborted, its Lease left to expire) and the time until
//! the standby takes the Lease, until its first reconcile, and until it has
//! reconciled every object, is measured — with the standby's caches filled
//! while it waits (the default) and with `--cold-standby` (filled on taking
//! over), in paired rounds whose order alternates. The Lease's expiry is
//! the same for both and varies with when the leader last renewed, so the
//! times after taking the Lease are the ones the standby's mode decides.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use concord::{Manager, ManagerArgs, manager::LeaderElectionConfig, manager::ShutdownHandle};
use concord_testenv::TestEnv;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tokio::task::JoinHandle;

use crate::fleet::{Log, Recorder, create_config_maps};
use crate::stats::{percentile, secs};

/// Sizes and timings of the standby benchmark.
#[derive(clap::Args)]
pub struct Args {
    /// ConfigMaps the manager reconciles.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Paired rounds (one crash with a warm standby, one with a cold one).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Lease duration, seconds (the defaults are controller-runtime's).
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
    /// Renew deadline, milliseconds.
    #[arg(long, default_value_t = 10_000)]
    renew_deadline_ms: u64,
    /// Retry period, milliseconds.
    #[arg(long, default_value_t = 2_000)]
    retry_period_ms: u64,
    /// Where the Markdown table goes (the book includes it).
    #[arg(long, default_value = "target/shard-bench/standby.md")]
    out: std::path::PathBuf,
}

struct Replica {
    index: usize,
    run: JoinHandle<Result<(), concord::Error>>,
    stop: ShutdownHandle,
    store: Option<concord::cache::Store<ConfigMap>>,
    metrics: std::sync::Arc<concord::metrics::Metrics>,
}

/// One crash's times, from the crash.
#[derive(Clone, Copy)]
struct Sample {
    /// The standby took the Lease.
    led: Duration,
    /// It started its first reconcile.
    first: Duration,
    /// It had reconciled every object.
    all: Duration,
}

struct Bench {
    config: kube::Config,
    namespace: String,
    timings: LeaderElectionConfig,
    log: Log,
}

impl Bench {
    async fn replica(&self, index: usize, lease: &str, cold: bool) -> Result<Replica> {
        let args = ManagerArgs::new()
            .with_leader_election(lease, &self.namespace)
            .with_cold_standby(cold);
        let mut manager = Manager::builder("standby-bench")
            .with_builtin_type::<ConfigMap>()
            .with_kube_config(self.config.clone())
            .with_args(args)
            .with_leader_election_config(self.timings)
            .with_signal_handling(false)
            .build()
            .await?;
        let api: Api<ConfigMap> = Api::namespaced(manager.client().clone(), &self.namespace);
        let recorder = Recorder {
            replica: index,
            log: self.log.clone(),
            hold: Duration::ZERO,
        };
        manager.controller("configmaps", api, recorder).add()?;
        let store = manager.context::<ConfigMap>().store();
        let stop = manager.shutdown_handle();
        let metrics = manager.metrics();
        let run = tokio::spawn(manager.run());
        Ok(Replica {
            index,
            run,
            stop,
            store,
            metrics,
        })
    }

    /// Objects `replica` has reconciled at least once, and when it first
    /// started one.
    fn progress(&self, replica: usize) -> (usize, Option<Instant>) {
        let log = self.log.lock().unwrap();
        let mut done = 0;
        let mut first: Option<Instant> = None;
        for spans in log.values() {
            let mine = spans.iter().filter(|s| s.replica == replica);
            let mut any = false;
            for span in mine {
                any = true;
                first = Some(first.map_or(span.start, |f| f.min(span.start)));
            }
            done += usize::from(any);
        }
        (done, first)
    }

    async fn until_all(&self, replica: usize, objects: usize, limit: Duration) -> Result<Instant> {
        let started = Instant::now();
        loop {
            if self.progress(replica).0 >= objects {
                return Ok(Instant::now());
            }
            ensure!(
                started.elapsed() < limit,
                "replica {replica} reconciled {} of {objects} objects within {limit:?}",
                self.progress(replica).0
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// One crash: the time to the standby's taking the Lease, to its first
/// reconcile and to its last first-reconcile of an object.
async fn crash(bench: &Bench, round: usize, cold: bool, objects: usize) -> Result<Sample> {
    let mode = if cold { "cold" } else { "warm" };
    let lease = format!("standby-bench-{round}-{mode}");
    // Replica indices unique over the run: the log is shared by every crash.
    let crash = 2 * round + usize::from(cold);
    let (leader, standby) = (2 * crash, 2 * crash + 1);
    let limit = Duration::from_secs(600);
    let first = bench.replica(leader, &lease, cold).await?;
    bench.until_all(first.index, objects, limit).await?;
    let second = bench.replica(standby, &lease, cold).await?;
    if cold {
        // Nothing to wait for: a cold standby watches nothing.
        tokio::time::sleep(Duration::from_secs(1)).await;
    } else {
        let store = second.store.clone().context("the standby has a store")?;
        store.wait_until_ready().await?;
        ensure!(
            store.state().len() >= objects,
            "the warm standby holds every object"
        );
    }
    ensure!(
        !first.run.is_finished(),
        "the leader stopped before the crash (it could not renew its Lease in time on this machine: raise --lease-duration and --renew-deadline-ms)"
    );
    ensure!(
        bench.progress(second.index).0 == 0,
        "the standby reconciled while the leader held the Lease"
    );
    let at = Instant::now();
    first.run.abort();
    // Polled often enough that its error is small beside the list a cold
    // standby waits for.
    while !second.metrics.is_leader() {
        ensure!(
            at.elapsed() < limit,
            "the standby did not take the Lease within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let led = Instant::now();
    let done = bench.until_all(second.index, objects, limit).await?;
    let started = bench
        .progress(second.index)
        .1
        .context("the standby reconciled")?;
    second.stop.shutdown();
    let _ = second.run.await;
    Ok(Sample {
        led: led - at,
        first: started.saturating_duration_since(at),
        all: done - at,
    })
}

pub async fn run(args: Args) -> Result<()> {
    let mut timings = LeaderElectionConfig::default();
    timings.lease_duration = Duration::from_secs(args.lease_duration);
    timings.renew_deadline = Duration::from_millis(args.renew_deadline_ms);
    timings.retry_period = Duration::from_millis(args.retry_period_ms);
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    create_config_maps(&api, args.objects).await?;
    let bench = Bench {
        config: env.config().clone(),
        namespace: ns.name().to_owned(),
        timings,
        log: Log::default(),
    };
    println!(
        "leader crash with a standby on {} ConfigMaps (lease {:?}, retry period {:?}), {} paired rounds",
        args.objects, timings.lease_duration, timings.retry_period, args.rounds
    );
    let (mut warm, mut cold) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        // Alternate which mode goes first, so drift favours neither.
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for is_cold in order {
            let sample = crash(&bench, round, is_cold, args.objects).await?;
            println!(
                "  round {round} {}: took the Lease {:.2} s, first reconcile {:.2} s, every object {:.2} s after the crash",
                if is_cold { "cold" } else { "warm" },
                sample.led.as_secs_f64(),
                sample.first.as_secs_f64(),
                sample.all.as_secs_f64()
            );
            if is_cold { &mut cold } else { &mut warm }.push(sample);
        }
    }
    let column =
        |samples: &[Sample], f: fn(&Sample) -> Duration| samples.iter().map(f).collect::<Vec<_>>();
    let mut table = format!(
        "{} ConfigMaps, lease duration {:?}, retry period {:?}, {} paired rounds. \
         After taking the Lease: what the standby's mode decides; after the crash: \
         the Lease's expiry included, which depends on when the leader last renewed.\n\n",
        args.objects, timings.lease_duration, timings.retry_period, args.rounds
    );
    table.push_str(
        "| standby | first reconcile after taking the Lease p50 (s) | max (s) | every object after taking the Lease p50 (s) | max (s) | took the Lease after the crash p50 (s) | every object after the crash p50 (s) |\n",
    );
    table.push_str("| --- | --- | --- | --- | --- | --- | --- |\n");
    for (label, samples) in [
        ("warm (default)", &warm),
        ("cold (`--cold-standby`)", &cold),
    ] {
        let first = column(samples, |s| s.first.saturating_sub(s.led));
        let all = column(samples, |s| s.all.saturating_sub(s.led));
        let led = column(samples, |s| s.led);
        let total = column(samples, |s| s.all);
        table.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} | {} |\n",
            secs(percentile(&first, 50.0)),
            secs(first.iter().max().copied()),
            secs(percentile(&all, 50.0)),
            secs(all.iter().max().copied()),
            secs(percentile(&led, 50.0)),
            secs(percentile(&total, 50.0)),
        ));
    }
    println!("\n{table}");
    if let Some(dir) = args.out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.out, &table).with_context(|| format!("writing {}", args.out.display()))?;
    println!("table written to {}", args.out.display());
    Ok(())
}
