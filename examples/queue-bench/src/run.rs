//! One benchmark: the existing objects created once, then each round runs
//! every contender over them, creating new objects during its storm.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::args::{Args, ContenderName};
use crate::contender::{self, Setup};
use crate::report::{Report, Round};

/// Requests in flight while objects are created or deleted.
const IN_FLIGHT: usize = 32;
/// How long a run waits for the new objects' first reconciles after its
/// storm ended.
const AFTER_STORM: Duration = Duration::from_secs(120);

/// Runs the benchmark `args` describes and returns its report (also
/// written where `--json` and `--table` say).
///
/// # Errors
///
/// Flags that measure nothing (no objects, rounds, rate or contenders),
/// a control plane, peer build or request that fails, or a run whose
/// storm outlasts `--timeout-s`.
pub async fn run(args: &Args) -> anyhow::Result<Report> {
    let mut problems = Vec::new();
    for (flag, zero) in [
        ("--objects", args.objects == 0),
        ("--rounds", args.rounds == 0),
        ("--rate", args.rate == 0),
        ("--contenders", args.contenders.is_empty()),
    ] {
        if zero {
            problems.push(format!("{flag} must not be 0 or empty"));
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    let connection = concord_examples::connect(args.kubeconfig.clone(), &args.consent).await?;
    let client = connection.client.clone();
    let uses_peer = args.contenders.iter().any(|c| *c != ContenderName::Concord);
    let peer = if uses_peer {
        tokio::task::spawn_blocking(contender::peer).await??
    } else {
        PathBuf::new()
    };
    let namespace = format!(
        "queue-bench-{}",
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs()
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}}))?;
    namespaces.create(&PostParams::default(), &ns).await?;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let setup = Setup {
        client: &client,
        kubeconfig: &connection.kubeconfig,
        peer: &peer,
        namespace: &namespace,
        work: Duration::from_millis(args.work_ms),
        concurrency: args.concurrency,
    };
    let result = rounds(args, &setup, &maps).await;
    namespaces
        .delete(&namespace, &DeleteParams::background())
        .await
        .with_context(|| format!("deleting namespace {namespace}"))?;
    let report = Report::new(args, result?);
    if let Some(path) = &args.json {
        write_file(path, &serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = &args.table {
        write_file(path, &crate::table(&report))?;
    }
    Ok(report)
}

fn write_file(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

async fn rounds(
    args: &Args,
    setup: &Setup<'_>,
    maps: &Api<ConfigMap>,
) -> anyhow::Result<Vec<Round>> {
    eprintln!(
        "queue-bench: creating {} ConfigMaps in {}",
        args.objects, setup.namespace
    );
    create(maps, (0..args.objects).map(|i| format!("listed-{i}"))).await?;
    let mut rounds = Vec::new();
    let mut order = args.contenders.clone();
    for round in 0..args.rounds {
        for who in &order {
            eprintln!(
                "queue-bench: round {} of {}: {}",
                round + 1,
                args.rounds,
                who.as_str()
            );
            let figures = one_run(*who, round, args, setup, maps).await?;
            eprintln!(
                "queue-bench:   storm {:.1} s, {} new objects, p99 {:.0} ms, max {:.0} ms",
                figures.storm_s, figures.new_objects, figures.p99_ms, figures.max_ms
            );
            rounds.push(figures);
        }
        order.rotate_left(1);
    }
    Ok(rounds)
}

async fn create(maps: &Api<ConfigMap>, names: impl Iterator<Item = String>) -> anyhow::Result<()> {
    futures::stream::iter(names)
        .map(|name| async move {
            let map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
            maps.create(&PostParams::default(), &map).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await
}

/// One contender's run: started over the listed objects, new objects
/// created at `args.rate` from its first reconcile until the last listed
/// object's, then every new object's first reconcile awaited.
async fn one_run(
    who: ContenderName,
    round: usize,
    args: &Args,
    setup: &Setup<'_>,
    maps: &Api<ConfigMap>,
) -> anyhow::Result<Round> {
    let started = SystemTime::now();
    let mut running = contender::start(who, setup).await?;
    let mut first: HashMap<String, SystemTime> = HashMap::new();
    let mut listed_done = 0usize;
    let mut last_listed = started;
    let mut created: Vec<(String, SystemTime)> = Vec::new();
    let mut creates = Vec::new();
    let timeout = tokio::time::sleep(Duration::from_secs(args.timeout_s));
    tokio::pin!(timeout);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut after_storm: Option<tokio::time::Instant> = None;
    loop {
        let storming = !first.is_empty() && listed_done < args.objects;
        tokio::select! {
            seen = running.first.recv() => {
                let Some((name, at)) = seen else { bail!("{} stopped", who.as_str()) };
                if name.starts_with("listed-") {
                    listed_done += 1;
                    last_listed = last_listed.max(at);
                }
                first.entry(name).or_insert(at);
            }
            _ = tick.tick(), if storming => {
                let name = format!("new-{round}-{}-{}", tag(who), created.len());
                created.push((name.clone(), SystemTime::now()));
                let maps = maps.clone();
                creates.push(tokio::spawn(async move {
                    let map: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
                    maps.create(&PostParams::default(), &map).await?;
                    anyhow::Ok(())
                }));
            }
            () = tokio::time::sleep(Duration::from_millis(100)), if after_storm.is_some() => {}
            () = &mut timeout, if after_storm.is_none() => {
                bail!("{}: {listed_done} of {} listed objects reconciled after {} s (--timeout-s)", who.as_str(), args.objects, args.timeout_s);
            }
        }
        if listed_done == args.objects {
            let deadline =
                *after_storm.get_or_insert_with(|| tokio::time::Instant::now() + AFTER_STORM);
            if created.iter().all(|(name, _)| first.contains_key(name)) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "{}: new objects not reconciled {} s after the storm",
                    who.as_str(),
                    AFTER_STORM.as_secs()
                );
            }
        }
    }
    running.stop().await?;
    for task in creates {
        task.await??;
    }
    let names: Vec<String> = created.iter().map(|(name, _)| name.clone()).collect();
    futures::stream::iter(names)
        .map(|name| async move {
            maps.delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await?;
    let latencies: Vec<f64> = created
        .iter()
        .filter_map(|(name, at)| {
            let seen = first.get(name)?;
            Some(seen.duration_since(*at).unwrap_or_default().as_secs_f64() * 1000.0)
        })
        .collect();
    let storm_s = last_listed
        .duration_since(started)
        .unwrap_or_default()
        .as_secs_f64();
    Ok(Round::new(round, who, args.objects, storm_s, latencies))
}

fn tag(who: ContenderName) -> &'static str {
    match who {
        ContenderName::Concord => "concord",
        ContenderName::CrPriority => "crpq",
        ContenderName::CrWorkqueue => "crwq",
    }
}
