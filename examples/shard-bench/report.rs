//! The `report` benchmark: sharding's figures as a user reads them.
//! Replica processes (`shard-bench member`) of a `--shards=hash` (or
//! `--shards` of the report: `selector`) manager
//! on `--objects` ConfigMaps leave cleanly (SIGTERM) and crash (SIGKILL)
//! `--events` times each, a replacement joining after each; then
//! `--shards=label` replicas place the objects, timed against the API
//! server's PATCH ceiling measured around it. Every reconcile of every
//! replica is recorded; two on one object at once fail the run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail, ensure};
use concord::cache::CacheLayout;
use concord_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams};

use crate::fleet::{create_config_maps, member_lease};
use crate::member::wall_ns;
use crate::procs::{Fleet, Log, Proc, overlaps};
use crate::tables::{self, Figures, Sample};
use crate::{placement, stats::secs};

/// Sizes and timings of the report.
#[derive(clap::Args)]
pub struct Args {
    /// Replica processes running at once.
    #[arg(long, default_value_t = 3)]
    pub replicas: usize,
    /// ConfigMaps divided among them.
    #[arg(long, default_value_t = 10_000)]
    pub objects: usize,
    /// Clean leaves (SIGTERM), and as many crashes (SIGKILL), alternating.
    #[arg(long, default_value_t = 20)]
    pub events: usize,
    /// Lease duration, seconds.
    #[arg(long, default_value_t = 6)]
    pub lease_duration: u64,
    /// Renew deadline, milliseconds.
    #[arg(long, default_value_t = 4000)]
    pub renew_deadline_ms: u64,
    /// Retry period, milliseconds.
    #[arg(long, default_value_t = 500)]
    pub retry_period_ms: u64,
    /// How long each reconcile holds its object, milliseconds.
    #[arg(long, default_value_t = 2)]
    pub hold_ms: u64,
    /// How each replica's shared cache holds the ConfigMaps.
    #[arg(long, value_enum, default_value_t)]
    pub cache_layout: CacheLayout,
    /// Directory the Markdown tables are written to (the book includes
    /// them from `book/src/scaling-out`).
    #[arg(long, default_value = "target/shard-bench/report")]
    pub out: PathBuf,
    /// Also write every figure as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// How the handover replicas place the objects: `hash` (every cache
    /// holds everything) or `selector` (the API server's shard selectors;
    /// needs its `ShardedListAndWatch` gate, which the embedded control
    /// plane has).
    #[arg(long, default_value = "hash", value_parser = ["hash", "selector"])]
    pub shards: String,
}

/// The resourceVersion of every ConfigMap, by name.
async fn versions(api: &Api<ConfigMap>) -> Result<std::collections::HashMap<String, String>> {
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|cm| {
            (
                cm.metadata.name.unwrap_or_default(),
                cm.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect())
}

/// How long before `at` (wall-clock ns) the Lease was last renewed.
fn renewal_age(lease: &Lease, at: u64) -> Option<Duration> {
    let renewed = lease.spec.as_ref()?.renew_time.as_ref()?.0.as_nanosecond();
    u64::try_from(i128::from(at) - renewed)
        .ok()
        .map(Duration::from_nanos)
}

fn since(at: u64, later: u64) -> Duration {
    Duration::from_nanos(later.saturating_sub(at))
}

/// The first time after `at` each survivor's view left out the departed
/// member, and acknowledged a view newer than `versions`: the latest of
/// each over the survivors, once all have.
fn view_phases(live: &[Proc], at: u64, versions: &[u64]) -> Option<(Duration, Duration)> {
    let (mut dropped, mut acked) = (Duration::ZERO, Duration::ZERO);
    for (proc, version) in live.iter().zip(versions) {
        let state = proc.state.lock().unwrap();
        let after = || state.history.iter().filter(|(t, ..)| *t >= at);
        let drop_at = after().find(|(_, _, members)| *members == live.len())?.0;
        let ack_at = after().find(|(_, v, _)| v > version)?.0;
        dropped = dropped.max(since(at, drop_at));
        acked = acked.max(since(at, ack_at));
    }
    Some((dropped, acked))
}

/// The age of its last renewal the `n`-th crash aims to kill its victim
/// at, as a fraction of the retry period (how often a replica renews):
/// the fractional parts of `n` times the golden ratio, which spread any
/// number of crashes evenly over the renewal cycle. A crash just after a
/// renewal is the slowest to hand over (its Lease runs longest), and a
/// kill whose moment followed from the previous event's timing would land
/// at whatever age that timing favoured.
fn aimed_age(n: usize) -> f64 {
    (n as f64 * 0.618_033_988_749_894_9).fract()
}

/// Waits until `member`'s last renewal is about `age` old (within one
/// renewal's jitter: the replica renews about every `period`).
async fn wait_for_age(
    leases: &Api<Lease>,
    member: &str,
    age: Duration,
    period: Duration,
) -> Result<()> {
    let lease = member_lease(leases, member).await?;
    let now = renewal_age(&lease, wall_ns()).context("the victim's Lease has no renewTime")?;
    let period = period.as_nanos().max(1);
    let wait = (age.as_nanos() + period - now.as_nanos() % period) % period;
    tokio::time::sleep(Duration::from_nanos(u64::try_from(wait)?)).await;
    Ok(())
}

/// Takes `victim` out (SIGTERM; or for a `crash` of `(age, period)`,
/// SIGKILL about `age` after its last renewal) and measures until every
/// object it owned has finished a reconcile on its new owner.
async fn event(
    fleet: &Fleet,
    leases: &Api<Lease>,
    victim: Proc,
    crash: Option<(Duration, Duration)>,
    live: &mut [Proc],
    owners: &[usize],
) -> Result<Sample> {
    let departed = victim.index;
    let moved: Vec<usize> = (0..owners.len())
        .filter(|i| owners[*i] == departed)
        .collect();
    ensure!(!moved.is_empty(), "replica {departed} owns no object");
    let member = victim.member().context("the victim's member id")?;
    let versions: Vec<u64> = live
        .iter()
        .map(|p| p.state.lock().unwrap().view.version)
        .collect();
    let mut sample = Sample {
        moved: moved.len(),
        ..Sample::default()
    };
    if let Some((age, period)) = crash {
        wait_for_age(leases, &member, age, period).await?;
    }
    let at = wall_ns();
    let mut leaving = None;
    if crash.is_some() {
        victim.kill(&fleet.log).await?;
        // A renewal in flight at the kill may still land: read after it would have.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lease = member_lease(leases, &member).await?;
        sample.renewal_age = renewal_age(&lease, at);
    } else {
        victim.terminate()?;
        leaving = Some(victim);
    }
    let limit = Duration::from_secs(120);
    let started = Instant::now();
    loop {
        for proc in live.iter_mut() {
            proc.alive()?;
        }
        if let Some(proc) = leaving.as_mut()
            && proc.child.try_wait()?.is_some()
        {
            sample.gone = Some(since(at, wall_ns()));
            let proc = leaving.take().context("checked above")?;
            proc.exited(Duration::from_secs(10)).await?;
        }
        // For each moved object: the first reconcile another replica
        // finished on it after the event.
        let done: Option<Vec<(u64, u64)>> = {
            let log = fleet.log.lock().unwrap();
            moved
                .iter()
                .map(|i| {
                    log[*i]
                        .iter()
                        .filter(|s| s.replica != departed && s.start >= at)
                        .filter_map(|s| Some((s.start, s.end?)))
                        .min_by_key(|(_, end)| *end)
                })
                .collect()
        };
        if let Some(done) = done {
            let first = done.iter().map(|(start, _)| *start).min().unwrap_or(at);
            let last = done.iter().map(|(_, end)| *end).max().unwrap_or(at);
            sample.first_start = since(at, first);
            sample.all_done = since(at, last);
            break;
        }
        if started.elapsed() > limit {
            let log = fleet.log.lock().unwrap();
            let missing = moved
                .iter()
                .filter(|i| {
                    !log[**i]
                        .iter()
                        .any(|s| s.replica != departed && s.start >= at && s.end.is_some())
                })
                .count();
            bail!(
                "{missing} of the {} objects of replica {departed} were not reconciled by another within {limit:?}",
                moved.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if let Some(proc) = leaving {
        proc.exited(Duration::from_secs(60)).await?;
        sample.gone = Some(since(at, wall_ns()));
    }
    // A survivor may report its view after the last object is done.
    let waited = Instant::now();
    let phases = loop {
        if let Some(phases) = view_phases(live, at, &versions) {
            break phases;
        }
        ensure!(
            waited.elapsed() < Duration::from_secs(30),
            "a survivor did not report a view without replica {departed} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    (sample.dropped, sample.acked) = phases;
    Ok(sample)
}

/// Runs the report, prints it, and writes its tables into `--out`.
pub async fn run(args: Args) -> Result<()> {
    ensure!(args.replicas >= 2, "--replicas must be at least 2");
    ensure!(
        args.objects >= args.replicas,
        "--objects must be at least --replicas"
    );
    let began = Instant::now();
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    create_config_maps(&api, args.objects).await?;
    let log: Log = Log::default();
    log.lock().unwrap().resize(args.objects, Vec::new());
    let fleet = |name: &str, shards| Fleet {
        kubeconfig: env.kubeconfig_path().to_owned(),
        namespace: ns.name().to_owned(),
        name: name.to_owned(),
        shards,
        objects: args.objects,
        hold_ms: args.hold_ms,
        lease_duration: args.lease_duration,
        renew_deadline_ms: args.renew_deadline_ms,
        retry_period_ms: args.retry_period_ms,
        cache_layout: args.cache_layout,
        log: log.clone(),
    };
    let mode: &'static str = if args.shards == "selector" {
        "selector"
    } else {
        "hash"
    };
    let hash = fleet("shard-bench", mode);
    let unwritten = versions(&api).await?;
    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    let settle = Duration::from_secs(600);

    let mut next = 0;
    let mut live = Vec::new();
    for _ in 0..args.replicas {
        live.push(hash.spawn(next).await?);
        next += 1;
    }
    let mut owners = hash.wait_settled(&mut live, settle).await?;
    println!(
        "{} replica processes settled on {} objects (lease {} s, renew deadline {} ms, retry period {} ms, reconcile {} ms)",
        args.replicas,
        args.objects,
        args.lease_duration,
        args.renew_deadline_ms,
        args.retry_period_ms,
        args.hold_ms
    );
    let (mut leaves, mut crashes, mut joins) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..2 * args.events {
        let crash = round % 2 == 1;
        let victim = live.remove(round % live.len());
        let period = Duration::from_millis(args.retry_period_ms);
        let kill = crash.then(|| (period.mul_f64(aimed_age(crashes.len())), period));
        let sample = event(&hash, &leases, victim, kill, &mut live, &owners).await?;
        println!(
            "{:<22} {:>5} objects moved, every one reconciled by its new owner after {} s",
            if crash {
                "crash (SIGKILL)"
            } else {
                "clean leave (SIGTERM)"
            },
            sample.moved,
            secs(Some(sample.all_done))
        );
        if crash { &mut crashes } else { &mut leaves }.push(sample);
        let joined = Instant::now();
        live.push(hash.spawn(next).await?);
        next += 1;
        owners = hash.wait_settled(&mut live, settle).await?;
        joins.push(joined.elapsed());
    }
    for proc in &live {
        proc.terminate()?;
    }
    for proc in live {
        proc.exited(Duration::from_secs(60)).await?;
    }
    let (handover_double, handover_reconciles) = overlaps(&log);
    // Objects written while the handover replicas ran (placement writes:
    // labels; the bench's reconciler writes nothing).
    let after = versions(&api).await?;
    let placement_writes = unwritten
        .iter()
        .filter(|(name, version)| after.get(*name) != Some(*version))
        .count();

    let label = fleet("shard-bench-label", "label");
    let placement = placement::run(env.config().clone(), &label, args.replicas, next).await?;
    let (double, reconciles) = overlaps(&log);

    let figures = Figures {
        mode: mode.to_owned(),
        placement_writes,
        replicas: args.replicas,
        objects: args.objects,
        lease_duration: Duration::from_secs(args.lease_duration),
        renew_deadline: Duration::from_millis(args.renew_deadline_ms),
        retry_period: Duration::from_millis(args.retry_period_ms),
        hold: Duration::from_millis(args.hold_ms),
        cache_layout: args.cache_layout.to_string(),
        leaves,
        crashes,
        joins,
        placement,
        handover_reconciles,
        handover_double,
        reconciles,
        double,
        wall: began.elapsed(),
    };
    let written = tables::write(&figures, &args.out)?;
    print!("{}", tables::summary(&figures));
    println!();
    print!("{}", tables::handover(&figures));
    println!();
    print!("{}", tables::placement(&figures));
    for path in written {
        println!("written: {}", path.display());
    }
    if let Some(path) = &args.json {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(&tables::json(&figures))?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let namespaces: Api<Namespace> = Api::all(ns.client());
    namespaces
        .delete(ns.name(), &DeleteParams::default())
        .await?;
    ensure!(
        double == 0,
        "{double} times two replicas reconciled one object at once: sharding is broken, the figures are void"
    );
    Ok(())
}
