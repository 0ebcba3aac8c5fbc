//! The handover benchmark: replicas of one `--shards=hash` manager in this
//! process, clean leaves and crashes, and the time until every moved key
//! has been reconciled by its new owner, phase by phase.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail, ensure};
use concord::manager::LeaderElectionConfig;
use concord_testenv::TestEnv;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams};
use tokio::task::JoinHandle;

use crate::fleet::{Log, Replica, Setup, Span, alive, create_config_maps, member_lease, overlaps};
use crate::stats::{header, row};

/// Sizes and timings of the handover benchmark.
#[derive(clap::Args)]
pub struct Args {
    /// Replicas running at once.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// ConfigMaps divided among them.
    #[arg(long, default_value_t = 600)]
    objects: usize,
    /// Clean leaves, and as many crashes (alternating; each followed by a
    /// replacement joining).
    #[arg(long, default_value_t = 5)]
    events: usize,
    /// Lease duration, seconds. (The `sharding` test's 3 s / 2 s leave a
    /// replica on a loaded machine too little time to renew.)
    #[arg(long, default_value_t = 6)]
    lease_duration: u64,
    /// Renew deadline, milliseconds.
    #[arg(long, default_value_t = 4000)]
    renew_deadline_ms: u64,
    /// Retry period, milliseconds.
    #[arg(long, default_value_t = 500)]
    retry_period_ms: u64,
    /// How long each reconcile holds its object, milliseconds.
    #[arg(long, default_value_t = 20)]
    hold_ms: u64,
}

/// What one clean leave or crash took, each phase measured from the event.
#[derive(Debug, Default)]
struct Sample {
    moved: usize,
    /// Crash: how old the crashed replica's last renewal was at the crash.
    renewal_age: Option<Duration>,
    /// Clean leave: the leaver drained and deleted its Lease (`run` returned).
    gone: Option<Duration>,
    /// The last survivor dropped the departed member from its view.
    dropped: Duration,
    /// The last survivor acknowledged the view without it.
    acked: Duration,
    /// The first moved key started on its new owner.
    first_start: Duration,
    /// Every moved key had finished a reconcile on its new owner.
    all_done: Duration,
}

/// How long before `wall` the Lease was last renewed.
fn renewal_age(lease: &Lease, wall: SystemTime) -> Option<Duration> {
    let renewed = lease.spec.as_ref()?.renew_time.as_ref()?.0.as_nanosecond();
    let now = i128::try_from(wall.duration_since(UNIX_EPOCH).ok()?.as_nanos()).ok()?;
    u64::try_from(now - renewed).ok().map(Duration::from_nanos)
}

/// Takes `victim` out (shutdown, or abort for a crash) and measures until
/// every key it owned has been reconciled by its new owner.
async fn event(
    setup: &Setup,
    leases: &Api<Lease>,
    victim: Replica,
    crash: bool,
    live: &[Replica],
    keys: &[String],
) -> Result<Sample> {
    let member = victim.shard.member().to_owned();
    let moved: Vec<String> = keys
        .iter()
        .filter(|k| {
            let name = k.rsplit('/').next().unwrap_or_default();
            victim.shard.owns(&setup.namespace, name)
        })
        .cloned()
        .collect();
    ensure!(!moved.is_empty(), "replica {} owns no key", victim.index);
    let versions: Vec<u64> = live.iter().map(|r| r.shard.ring_version()).collect();
    let mut sample = Sample {
        moved: moved.len(),
        ..Sample::default()
    };
    let at = Instant::now();
    let wall = SystemTime::now();
    let mut leaving = None;
    if crash {
        victim.run.abort();
        // A renewal in flight at the abort may still land: read after it would have.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lease = member_lease(leases, &member).await?;
        sample.renewal_age = renewal_age(&lease, wall);
    } else {
        victim.stop.shutdown();
        leaving = Some(victim.run);
    }
    let mut dropped = vec![None; live.len()];
    let mut acked = vec![None; live.len()];
    loop {
        let now = Instant::now();
        alive(live)?;
        if now - at > Duration::from_secs(60) {
            let log = setup.log.lock().unwrap();
            let missing: Vec<&String> = moved
                .iter()
                .filter(|k| {
                    !log.get(*k).is_some_and(|spans| {
                        spans
                            .iter()
                            .any(|s| s.replica != victim.index && s.start >= at)
                    })
                })
                .collect();
            let detail = missing.first().map(|k| {
                let name = k.rsplit('/').next().unwrap_or_default();
                let spans: Vec<String> = log
                    .get(*k)
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        format!(
                            "replica {} at {:?}",
                            s.replica,
                            s.start.checked_duration_since(at)
                        )
                    })
                    .collect();
                let owners: Vec<String> = live
                    .iter()
                    .map(|r| {
                        format!(
                            "replica {} owns {} settled {} members {}",
                            r.index,
                            r.shard.owns(&setup.namespace, name),
                            r.shard.settled(),
                            r.shard.members().len()
                        )
                    })
                    .collect();
                format!("{k}: spans {spans:?}; {owners:?}")
            });
            bail!(
                "{} of the {} keys of a departed replica were not reconciled within 60 s by another; first: {detail:?}; dropped {dropped:?}",
                missing.len(),
                moved.len()
            );
        }
        if sample.gone.is_none() && leaving.as_ref().is_some_and(JoinHandle::is_finished) {
            sample.gone = Some(now - at);
            leaving.take().context("checked above")?.await??;
        }
        for (i, r) in live.iter().enumerate() {
            if dropped[i].is_none() && !r.shard.members().contains(&member) {
                dropped[i] = Some(now - at);
            }
            if acked[i].is_none() && r.shard.ring_version() > versions[i] {
                acked[i] = Some(now - at);
            }
        }
        // For each moved key: its first reconcile by another replica since the event.
        let firsts: Vec<Option<Span>> = {
            let log = setup.log.lock().unwrap();
            moved
                .iter()
                .map(|k| {
                    log.get(k)?
                        .iter()
                        .filter(|s| s.replica != victim.index && s.start >= at)
                        .min_by_key(|s| s.start)
                        .copied()
                })
                .collect()
        };
        if firsts.iter().all(Option::is_some) && dropped.iter().all(Option::is_some) {
            let spans: Vec<Span> = firsts.into_iter().flatten().collect();
            sample.first_start = spans.iter().map(|s| s.start - at).min().unwrap_or_default();
            sample.all_done = spans.iter().map(|s| s.end - at).max().unwrap_or_default();
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if let Some(run) = leaving {
        run.await??;
        sample.gone = Some(at.elapsed());
    }
    sample.dropped = dropped.into_iter().flatten().max().unwrap_or_default();
    // A survivor may acknowledge after the last key is done; wait briefly for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while acked.iter().any(Option::is_none) && Instant::now() < deadline {
        for (i, r) in live.iter().enumerate() {
            if acked[i].is_none() && r.shard.ring_version() > versions[i] {
                acked[i] = Some(at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sample.acked = acked.into_iter().flatten().max().unwrap_or_default();
    Ok(sample)
}

/// Runs the benchmark and prints its tables.
pub async fn run(args: Args) -> Result<()> {
    ensure!(args.replicas >= 2, "--replicas must be at least 2");
    let mut timings = LeaderElectionConfig::default();
    timings.lease_duration = Duration::from_secs(args.lease_duration);
    timings.renew_deadline = Duration::from_millis(args.renew_deadline_ms);
    timings.retry_period = Duration::from_millis(args.retry_period_ms);
    let env = TestEnv::shared()?;
    let ns = env.namespace().await?;
    let api: Api<ConfigMap> = Api::namespaced(ns.client(), ns.name());
    let names = create_config_maps(&api, args.objects).await?;
    let keys: Vec<String> = names.iter().map(|n| format!("{}/{n}", ns.name())).collect();
    let setup = Setup {
        config: env.config().clone(),
        namespace: ns.name().to_owned(),
        timings,
        hold: Duration::from_millis(args.hold_ms),
        log: Log::default(),
    };
    let leases: Api<Lease> = Api::namespaced(ns.client(), ns.name());
    let mut next = 0;
    let mut live = Vec::new();
    for _ in 0..args.replicas {
        live.push(setup.replica(next).await?);
        next += 1;
    }
    setup.wait_settled(&live, &keys).await?;
    println!(
        "{} replicas settled on {} objects (lease {:?}, renew deadline {:?}, retry period {:?}, reconcile {} ms)",
        args.replicas,
        args.objects,
        timings.lease_duration,
        timings.renew_deadline,
        timings.retry_period,
        args.hold_ms
    );
    let (mut leaves, mut crashes, mut joins) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..2 * args.events {
        let crash = round % 2 == 1;
        let victim = live.remove(round % live.len());
        let sample = event(&setup, &leases, victim, crash, &live, &keys).await?;
        println!(
            "{:<11} {} keys moved: every one reconciled by its new owner after {:.2} s {sample:?}",
            if crash { "crash" } else { "clean leave" },
            sample.moved,
            sample.all_done.as_secs_f64()
        );
        if crash {
            crashes.push(sample);
        } else {
            leaves.push(sample);
        }
        let joined = Instant::now();
        live.push(setup.replica(next).await?);
        next += 1;
        setup.wait_settled(&live, &keys).await?;
        joins.push(joined.elapsed());
    }
    let overlapping = overlaps(&setup.log);
    for replica in &live {
        replica.stop.shutdown();
    }
    for replica in live {
        replica.run.await??;
    }
    ensure!(
        overlapping == 0,
        "{overlapping} reconciles overlapped on two replicas: the figures are void"
    );
    report(&args, timings, &leaves, &crashes, &joins);
    let namespaces: Api<Namespace> = Api::all(ns.client());
    namespaces
        .delete(ns.name(), &DeleteParams::default())
        .await?;
    Ok(())
}

fn report(
    args: &Args,
    timings: LeaderElectionConfig,
    leaves: &[Sample],
    crashes: &[Sample],
    joins: &[Duration],
) {
    let pick = |samples: &[Sample], f: fn(&Sample) -> Option<Duration>| -> Vec<Duration> {
        samples.iter().filter_map(f).collect()
    };
    let met = |samples: &[Sample], target: Duration| {
        let n = samples.iter().filter(|s| s.all_done <= target).count();
        format!(
            "target ≤ {:.2} s: {n} of {} within",
            target.as_secs_f64(),
            samples.len()
        )
    };
    let leave_target = Duration::from_secs(2);
    let crash_target = timings.lease_duration + Duration::from_secs(2);
    println!();
    println!(
        "{}",
        header(&format!(
            "clean leave ({} events, {} replicas, {} objects)",
            leaves.len(),
            args.replicas,
            args.objects
        ))
    );
    for (label, values, note) in [
        (
            "leaver drained, deleted its Lease",
            pick(leaves, |s| s.gone),
            String::new(),
        ),
        (
            "last survivor dropped it from its view",
            pick(leaves, |s| Some(s.dropped)),
            String::new(),
        ),
        (
            "last survivor acknowledged the new view",
            pick(leaves, |s| Some(s.acked)),
            String::new(),
        ),
        (
            "first moved key started by its new owner",
            pick(leaves, |s| Some(s.first_start)),
            String::new(),
        ),
        (
            "every moved key reconciled by its new owner",
            pick(leaves, |s| Some(s.all_done)),
            met(leaves, leave_target),
        ),
    ] {
        println!("{}", row(label, &values, &note));
    }
    println!();
    println!(
        "{}",
        header(&format!(
            "crash ({} events; lease duration {:?}: expiry is due lease duration − renewal age after the crash)",
            crashes.len(),
            timings.lease_duration
        ))
    );
    let lag = |s: &Sample| {
        let due = timings.lease_duration.checked_sub(s.renewal_age?)?;
        s.dropped.checked_sub(due)
    };
    for (label, values, note) in [
        (
            "age of its last renewal at the crash",
            pick(crashes, |s| s.renewal_age),
            String::new(),
        ),
        (
            "last survivor dropped it from its view",
            pick(crashes, |s| Some(s.dropped)),
            String::new(),
        ),
        (
            "  of which after the expiry was due",
            crashes.iter().filter_map(lag).collect(),
            String::new(),
        ),
        (
            "last survivor acknowledged the new view",
            pick(crashes, |s| Some(s.acked)),
            String::new(),
        ),
        (
            "first moved key started by its new owner",
            pick(crashes, |s| Some(s.first_start)),
            String::new(),
        ),
        (
            "every moved key reconciled by its new owner",
            pick(crashes, |s| Some(s.all_done)),
            met(crashes, crash_target),
        ),
    ] {
        println!("{}", row(label, &values, &note));
    }
    println!();
    println!(
        "{}",
        header(&format!("join ({} replacements)", joins.len()))
    );
    println!(
        "{}",
        row(
            "ring settled, newcomer reconciled its keys",
            joins,
            "includes the newcomer's start and first LIST"
        )
    );
}
