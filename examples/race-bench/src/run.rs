//! One benchmark run: rounds, each creating its slice of pods in a fresh
//! namespace and running every contender on them in an order rotated per
//! round, the pods reset to their creation state between contenders.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::progress::Progress;
use crate::results::RoundFigures;
use crate::scenarios::{Racing, Workload};
use crate::sequential::{Check, Stopping, Tracker};
use crate::wire::{self, WireBytes};
use crate::{
    Args, Contender, RaceMode, Report, StrategyResult, check, foreign, json, namespace, peer,
    setup, svg, usage, verify,
};

#[path = "run_phase.rs"]
mod phase;
use phase::{Setting, ours, through_manager};

/// What a run produced.
#[derive(Clone, Debug)]
pub struct BenchOutcome {
    /// The figures, as in `results.json`.
    pub report: Report,
    /// Why the run fails the graduation check; empty when it passes.
    pub failures: Vec<String>,
    /// The client's peak resident set size in KiB over the whole run,
    /// where measurable.
    pub peak_rss_kib: Option<u64>,
}

/// Run the benchmark `args` describe: connect (or start the embedded
/// control plane), run every round, write `--out`, apply the check.
///
/// # Errors
///
/// When the arguments do not fit together, the cluster is unreachable, the
/// peer cannot be built or a setup, cleanup or verification request fails.
/// Failed or lost writes are results, not errors.
pub async fn run(args: &Args) -> anyhow::Result<BenchOutcome> {
    let stopping = args.stopping();
    anyhow::ensure!(
        args.pods >= stopping.max_rounds(),
        "--pods {} cannot be split over {} rounds",
        args.pods,
        stopping.max_rounds()
    );
    let contenders = args.contenders();
    let mut tracker = Tracker::new(stopping, wanted_checks(&contenders, args));
    if let Stopping::UntilDecided { .. } = stopping {
        anyhow::ensure!(
            !tracker.checks().is_empty(),
            "--until-decided has no ratio to decide among {}: name --baseline (or run lax) with a concord strategy, or give --rounds",
            contenders
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    // Connecting first: a refused cluster is refused before the peer's build.
    let connection = concord_examples::connect(args.kubeconfig.clone(), &args.consent).await?;
    let server_pid = args
        .server_pid
        .or_else(|| connection.control_plane.as_ref().map(|cp| cp.pid()));
    let server_process = match (args.server_pid, server_pid) {
        (Some(pid), _) => {
            anyhow::ensure!(
                usage::cpu_ms_of_pid(pid).is_some(),
                "--server-pid {pid}: /proc/{pid}/stat cannot be read (no such process on this machine?)"
            );
            Some(format!("pid {pid} (--server-pid)"))
        }
        (None, Some(pid)) => Some(format!(
            "pid {pid} (the embedded control plane: kube-apiserver and etcd)"
        )),
        (None, None) => None,
    };
    let peer = if contenders.iter().any(|c| c.peer_mode().is_some()) {
        Some(tokio::task::spawn_blocking(peer::ensure).await??)
    } else {
        None
    };
    let kubeconfig = connection.kubeconfig.clone();
    // Our contenders' client counts its body bytes; the other controller
    // gets a client (and connection pool) of its own, not counted.
    let wire = Arc::new(WireBytes::default());
    let client = wire::counted_client(&kubeconfig, wire.clone()).await?;
    let foreign_client = separate_client(&kubeconfig).await?;
    let setting = Setting {
        args,
        client,
        wire,
        server_pid,
        foreign_client,
        kubeconfig,
        peer,
        progress: Progress::new(),
    };
    let max_rounds = stopping.max_rounds();
    let per_round = args.pods.div_ceil(max_rounds);
    setting.progress.line(&format!(
        "race-bench: scenario {}, {} of {per_round} pods per contender, {} writers, race {}, seed {}, on {}",
        args.scenario,
        match stopping {
            Stopping::Fixed(n) => format!("{n} rounds"),
            Stopping::UntilDecided { max_rounds, .. } => format!(
                "rounds until decided (at most {max_rounds}, each look at {:.4})",
                stopping.alpha_per_look()
            ),
        },
        args.writers,
        args.race.as_str(),
        args.seed,
        connection.server
    ));
    let racing = Racing {
        mode: args.race,
        intensity: args.race_intensity,
    };
    let mut figures: Vec<Vec<RoundFigures>> = vec![Vec::new(); contenders.len()];
    let mut order_log = Vec::with_capacity(max_rounds as usize);
    let started = Instant::now();
    let mut longest_round = Duration::ZERO;
    let mut stopped_because = match stopping {
        Stopping::Fixed(_) => "fixed",
        Stopping::UntilDecided { .. } => "max-rounds",
    };
    for round in 0..max_rounds {
        if let Stopping::UntilDecided {
            max_time: Some(limit),
            ..
        } = stopping
            && started.elapsed() + longest_round > limit
        {
            stopped_because = "max-minutes";
            break;
        }
        let round_started = Instant::now();
        let seed = args.seed.wrapping_add(u64::from(round));
        let workload = Workload::new(args.scenario, per_round, args.writers, seed, racing);
        let mut order: Vec<usize> = (0..contenders.len()).collect();
        order.rotate_left(round as usize % contenders.len().max(1));
        order_log.push(
            order
                .iter()
                .map(|&i| contenders[i].as_str().to_owned())
                .collect(),
        );
        let ns = namespace::create(
            &setting.client,
            args.scenario.as_str(),
            &format!("r{}", round + 1),
        )
        .await?;
        let pods: Api<Pod> = Api::namespaced(setting.client.clone(), &ns);
        let bar = setting
            .progress
            .bar(&format!("round {}", round + 1), "create", per_round.into());
        setup::create(&pods, &workload.specs, &bar).await?;
        bar.finish_and_clear();
        let mut with_finalizers = Vec::new();
        for (turn, i) in order.into_iter().enumerate() {
            let contender = contenders[i];
            if turn > 0 {
                let bar = setting
                    .progress
                    .bar(contender.as_str(), "reset", per_round.into());
                setup::reset(&pods, &workload.specs, &bar).await?;
                bar.finish_and_clear();
            }
            let (f, left) = run_one(&setting, contender, &ns, &workload, seed)
                .await
                .with_context(|| format!("running {contender} in round {}", round + 1))?;
            with_finalizers = left;
            setting.progress.line(&format!(
                "round {}: {contender}: {:.0} writes/s, {} failed, {} lost, {} conflicts",
                round + 1,
                f.writes_per_s(),
                f.failed,
                f.lost,
                f.counts.conflicts
            ));
            figures[i].push(f);
        }
        setup::strip_finalizers(&pods, &with_finalizers).await?;
        namespace::delete(&setting.client, &ns, per_round).await?;
        longest_round = longest_round.max(round_started.elapsed());
        let per_contender: Vec<Vec<f64>> = figures
            .iter()
            .map(|f| {
                f.iter()
                    .map(|r| crate::results::round(r.writes_per_s(), 1))
                    .collect()
            })
            .collect();
        let decided = tracker.look(round + 1, |name| {
            contenders
                .iter()
                .position(|c| c.as_str() == name)
                .map(|i| per_contender[i].as_slice())
        });
        if let Stopping::UntilDecided { .. } = stopping {
            setting.progress.line(&format!(
                "round {}: {} of {} checked ratios decided",
                round + 1,
                tracker.decided_count(),
                tracker.checks().len()
            ));
            if decided {
                stopped_because = "decided";
                break;
            }
        }
    }
    let rounds = figures.first().map_or(0, Vec::len);
    let mut results: Vec<StrategyResult> = contenders
        .iter()
        .zip(&figures)
        .map(|(c, f)| StrategyResult::from_rounds(c.as_str(), f))
        .collect();
    compare(&mut results, &contenders, args, &tracker);
    let targets = crate::targets::checks(&results, &tracker);
    let report = Report {
        scenario: args.scenario.as_str().to_owned(),
        pods: u64::from(args.pods),
        writers: u64::from(args.writers),
        rounds: rounds as u64,
        stopping: stopping.as_str().to_owned(),
        max_rounds: u64::from(max_rounds),
        alpha_per_look: stopping.alpha_per_look(),
        stopped_because: stopped_because.to_owned(),
        server_process,
        manager_cache: results
            .iter()
            .any(|r| r.strategy.starts_with("manager-"))
            .then(|| args.cache_layout.to_string()),
        pods_per_round: u64::from(per_round),
        race: args.race.as_str().to_owned(),
        race_intensity: args.race_intensity,
        seed: args.seed,
        baseline: args.baseline().map(|b| b.as_str().to_owned()),
        max_regression: args.max_regression,
        order: order_log,
        results,
        targets,
    };
    let dir = args.out_dir();
    json::write(&dir, &report)?;
    svg::write(&dir, &report)?;
    let mut failures = check::safety_failures(&report, args.scenario);
    // The speed verdicts are always printed; they fail the run only when a
    // graduation was asked for by naming the baseline.
    if args.baseline.is_some() {
        failures.extend(check::graduation_failures(&report));
    }
    Ok(BenchOutcome {
        report,
        failures,
        peak_rss_kib: usage::peak_rss_kib(),
    })
}

/// The ratios the run decides: every concord strategy's against the
/// baseline at `1 - max_regression/100`, and the targets whose two
/// contenders run.
fn wanted_checks(contenders: &[Contender], args: &Args) -> Vec<Check> {
    let floor = 1.0 - args.max_regression / 100.0;
    let mut checks = Vec::new();
    if let Some(baseline) = args.baseline().filter(|b| contenders.contains(b)) {
        for c in contenders {
            if *c != baseline && (c.strategy().is_some() || c.manager_strategy().is_some()) {
                checks.push(Check {
                    contender: c.as_str().to_owned(),
                    against: baseline.as_str().to_owned(),
                    floor,
                });
            }
        }
    }
    let names: Vec<&str> = contenders.iter().map(|c| c.as_str()).collect();
    checks.extend(crate::targets::wanted(&names));
    checks
}

/// Fill in every result's fraction of `ceiling` and, with a baseline, its
/// ratio to it paired by round (and, for concord strategies, the verdict
/// `tracker` came to).
fn compare(
    results: &mut [StrategyResult],
    contenders: &[Contender],
    args: &Args,
    tracker: &Tracker,
) {
    let find = |c: Contender| contenders.iter().position(|x| *x == c);
    let ceiling = find(Contender::Ceiling).map(|i| results[i].writes_per_s);
    let baseline = args.baseline();
    let base = baseline
        .and_then(find)
        .map(|i| results[i].rounds_writes_per_s.clone());
    let floor = 1.0 - args.max_regression / 100.0;
    let rounds: Vec<Vec<f64>> = results
        .iter()
        .map(|r| r.rounds_writes_per_s.clone())
        .collect();
    let cpu: Vec<Vec<f64>> = results
        .iter()
        .map(|r| r.rounds_cpu_ms_per_write.clone())
        .collect();
    for (r, c) in results.iter_mut().zip(contenders) {
        if let Some(direct) = c.direct().and_then(find) {
            r.vs_direct = tracker.interval(&r.rounds_writes_per_s, &rounds[direct]);
            r.cpu_vs_direct = tracker.interval(&r.rounds_cpu_ms_per_write, &cpu[direct]);
        }
        if let Some(ceiling) = ceiling.filter(|c| *c > 0.0) {
            r.fraction_of_ceiling = Some(crate::results::round(r.writes_per_s / ceiling, 3));
        }
        if let (Some(base), Some(b)) = (&base, baseline)
            && Some(*c) != baseline
        {
            match tracker.decision(c.as_str(), b.as_str(), floor) {
                Some(d) => {
                    r.vs_baseline = Some(d.interval);
                    r.verdict = Some(d.verdict);
                    r.decided_after_rounds = d.after_rounds.map(u64::from);
                }
                None => r.vs_baseline = tracker.interval(&r.rounds_writes_per_s, base),
            }
        }
    }
}

/// Run `contender` on the pods of `ns`, which are in their creation state,
/// and check them; returns its figures and the pods left with finalizers.
async fn run_one(
    s: &Setting<'_>,
    contender: Contender,
    ns: &str,
    workload: &Workload,
    seed: u64,
) -> anyhow::Result<(RoundFigures, Vec<String>)> {
    let name = contender.as_str();
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), ns);
    let objects = workload.specs.len();
    let other = (workload.foreign && s.args.race == RaceMode::Random).then(|| {
        let (client, ns) = (s.foreign_client.clone(), ns.to_owned());
        let (pods, tasks) = (objects as u32, s.args.writers);
        tokio::spawn(async move { foreign::add_everywhere(client, &ns, pods, tasks, seed).await })
    });
    let mut figures = match (contender.peer_mode(), &s.peer) {
        (Some(mode), Some(binary)) => {
            let job = peer::Job {
                binary,
                kubeconfig: &s.kubeconfig,
                namespace: ns,
                mode,
                writers: s.args.writers,
                server_pid: s.server_pid,
            };
            peer::run(job, workload).await?
        }
        (Some(_), _) => anyhow::bail!("{name} needs the peer binary"),
        (None, _) => match contender.manager_strategy() {
            Some(strategy) => {
                let rw = contender.read_your_writes();
                through_manager(s, strategy, name, rw, ns, workload).await?
            }
            None => ours(s, contender, ns, workload).await?,
        },
    };
    if let Some(other) = other {
        let failed = other.await?;
        anyhow::ensure!(failed == 0, "the foreign writer failed {failed} adds");
    }
    let verdict = verify::check(&pods, &workload.specs).await?;
    figures.lost = verdict.lost_writes;
    Ok((figures, verdict.with_finalizers))
}

/// A client of its own for the kubeconfig at `path`.
async fn separate_client(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    Ok(Client::try_from(config)?)
}
