//! `--example kueue-finalizer`: a shipped example operator itself, as a
//! Deployment runs it (`--serve`), holding the objects beside the
//! controller-runtime operator holding the same ones.
//!
//! The objects are the example's managed Pods, created already carrying
//! its finalizer, so each operator lists them, reconciles each once and
//! has nothing to write: the figure is what holding them costs. The
//! example prints no status line; the harness reads its `/readyz` (which
//! passes once its caches synced) and its `concord_reconcile_total` from
//! the endpoints it starts on ephemeral loopback ports.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use concord_race_bench::{Interval, median};
use futures::{StreamExt as _, TryStreamExt as _, stream};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::args::Args;
use crate::example::Example;
use crate::measure::Figure;
use crate::objects;
use crate::process::Process;
use crate::summary::{OPERATORS, side};

/// One operator process holding the objects.
#[derive(Clone, Debug, Serialize)]
pub struct HoldRun {
    /// `concord` (the example) or `controller-runtime`.
    pub operator: &'static str,
    /// The round, from 0.
    pub round: usize,
    /// Seconds from the start until it was ready and had reconciled every
    /// object.
    pub ready_s: f64,
    /// Memory `--settle-secs` after that: VmHWM is the peak of the start,
    /// the initial list and the reconciles.
    pub held: Figure,
    /// Reconciles it reported.
    pub reconciles: u64,
}

/// The runs and what they say.
#[derive(Clone, Debug, Serialize)]
pub struct HoldReport {
    /// The example that was the concord operator.
    pub example: Example,
    /// Every run of every reported round.
    pub runs: Vec<HoldRun>,
    /// VmHWM and VmRSS per operator (MiB): median, min, max.
    pub spreads: Vec<crate::summary::Spread>,
    /// concord / controller-runtime VmHWM, paired by round.
    pub ratio: Option<crate::summary::Ratio>,
}

/// The two processes' command lines.
pub(crate) struct HoldPrograms {
    pub(crate) example: PathBuf,
    pub(crate) peer: PathBuf,
    pub(crate) kubeconfig: PathBuf,
}

/// Runs `args.rounds` rounds (after `args.warmup`) of the example, then
/// the controller-runtime operator, on the objects of `api`.
pub(crate) async fn rounds(
    args: &Args,
    example: Example,
    programs: &HoldPrograms,
    namespace: &str,
) -> anyhow::Result<HoldReport> {
    if !programs.example.exists() {
        bail!(
            "the {} example is not built at {} (build it with `cargo build --release -p concord-examples --example {}`, or name it with --operator)",
            example.as_str(),
            programs.example.display(),
            example.as_str()
        );
    }
    let mut runs = Vec::new();
    for index in 0..args.warmup + args.rounds {
        let round = index.checked_sub(args.warmup);
        let what = match round {
            Some(r) => format!("round {r}"),
            None => format!("warm-up {index} (not reported)"),
        };
        for operator in OPERATORS {
            let run = if operator == OPERATORS[0] {
                hold_example(args, programs, namespace).await
            } else {
                hold_peer(args, programs, namespace).await
            }
            .with_context(|| format!("{what}, the {operator} operator"))?;
            let run = HoldRun {
                round: round.unwrap_or(index),
                ..run
            };
            println!(
                "{what} {:<18} ready in {:>5.1} s, {} reconciles: VmHWM {:>6.1} MiB, VmRSS {:>6.1} MiB",
                run.operator,
                run.ready_s,
                run.reconciles,
                mib(run.held.hwm_kib),
                mib(run.held.rss_kib)
            );
            if round.is_some() {
                runs.push(run);
            }
        }
    }
    Ok(summarise(example, runs))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The example with `--serve`, its endpoints on free loopback ports.
async fn hold_example(
    args: &Args,
    programs: &HoldPrograms,
    namespace: &str,
) -> anyhow::Result<HoldRun> {
    let health = free_port()?;
    let metrics = free_port()?;
    let argv = vec![
        "--serve".to_owned(),
        "--kubeconfig".to_owned(),
        programs.kubeconfig.display().to_string(),
        "--namespace".to_owned(),
        namespace.to_owned(),
        "--config".to_owned(),
        concord_examples::kueue::GUARDED_CONFIG.to_owned(),
        "--health-probe-bind-address".to_owned(),
        format!("127.0.0.1:{health}"),
        "--metrics-bind-address".to_owned(),
        format!("127.0.0.1:{metrics}"),
    ];
    let mut process = Process::spawn(OPERATORS[0], &programs.example, &argv)?;
    let started = Instant::now();
    let deadline = started + Args::sync_limit(args.pods);
    let n = args.pods as u64;
    let mut reconciles = 0;
    loop {
        process.running()?;
        if get(health, "/readyz")
            .await
            .is_ok_and(|(code, _)| code == 200)
        {
            reconciles = get(metrics, "/metrics")
                .await
                .map(|(_, body)| reconcile_total(&body))
                .unwrap_or(0);
            if reconciles >= n {
                break;
            }
        }
        if Instant::now() > deadline {
            bail!(
                "not ready with {n} objects reconciled within {:?} ({reconciles} reconciles)",
                Args::sync_limit(args.pods)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ready_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(args.settle()).await;
    let held = process.memory()?.into();
    process.stop().await?;
    Ok(HoldRun {
        operator: OPERATORS[0],
        round: 0,
        ready_s,
        held,
        reconciles,
    })
}

/// The controller-runtime operator with its default cache (whole Pods).
async fn hold_peer(
    args: &Args,
    programs: &HoldPrograms,
    namespace: &str,
) -> anyhow::Result<HoldRun> {
    let argv = vec![
        format!("-kubeconfig={}", programs.kubeconfig.display()),
        format!("-namespace={namespace}"),
        "-kind=pods".to_owned(),
        "-cache=full".to_owned(),
        format!("-concurrency={}", args.concurrency),
    ];
    let mut process = Process::spawn(OPERATORS[1], &programs.peer, &argv)?;
    let started = Instant::now();
    let n = args.pods as u64;
    let status = process
        .wait_for(
            &format!("a synced cache of {n} objects, each reconciled"),
            Args::sync_limit(args.pods),
            |s| s.synced && s.cached == n && s.reconciles >= n,
        )
        .await?;
    let ready_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(args.settle()).await;
    let held = process.memory()?.into();
    process.stop().await?;
    Ok(HoldRun {
        operator: OPERATORS[1],
        round: 0,
        ready_s,
        held,
        reconciles: status.reconciles,
    })
}

fn summarise(example: Example, runs: Vec<HoldRun>) -> HoldReport {
    type Read = fn(&HoldRun) -> f64;
    let figures: [(&str, Read); 2] = [
        ("held VmHWM MiB", |r| mib(r.held.hwm_kib)),
        ("held VmRSS MiB", |r| mib(r.held.rss_kib)),
    ];
    let values = |operator: &str, read: Read| -> Vec<f64> {
        let mut mine: Vec<&HoldRun> = runs.iter().filter(|r| r.operator == operator).collect();
        mine.sort_by_key(|r| r.round);
        mine.into_iter().map(read).collect()
    };
    let mut spreads = Vec::new();
    for (figure, read) in figures {
        for operator in OPERATORS {
            let v = values(operator, read);
            if v.is_empty() {
                continue;
            }
            spreads.push(crate::summary::Spread {
                operator: operator.to_owned(),
                figure: figure.to_owned(),
                median: median(&v),
                min: v.iter().copied().fold(f64::INFINITY, f64::min),
                max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            });
        }
    }
    let (_, hwm) = figures[0];
    let ratio =
        Interval::paired(&values(OPERATORS[0], hwm), &values(OPERATORS[1], hwm)).map(|interval| {
            crate::summary::Ratio {
                figure: figures[0].0.to_owned(),
                interval,
                against_peer: side(&interval, 1.0, ["lower", "higher"]),
                against_half: side(&interval, 0.5, ["within", "beyond"]),
            }
        });
    HoldReport {
        example,
        runs,
        spreads,
        ratio,
    }
}

/// The sum of every `concord_reconcile_total` sample in a scrape.
fn reconcile_total(scrape: &str) -> u64 {
    scrape
        .lines()
        .filter(|l| l.starts_with("concord_reconcile_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// `GET path` from 127.0.0.1:`port` over HTTP/1.0: the status code and
/// the body.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        stream.read_to_string(&mut response),
    )
    .await
    .context("the endpoint did not answer in 10 s")??;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no status line from 127.0.0.1:{port}{path}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// Takes the example's finalizer off every object, so that the namespace
/// can go.
pub(crate) async fn release(api: &Api<DynamicObject>, n: usize) -> anyhow::Result<()> {
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    stream::iter(0..n)
        .map(|i| {
            let patch = &patch;
            async move {
                match api
                    .patch(&objects::name(i), &PatchParams::default(), patch)
                    .await
                {
                    Ok(_) => anyhow::Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
}

/// The hold's tables.
pub(crate) fn table(report: &HoldReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n`{} --serve` (concord) and the controller-runtime operator's default cache, each holding the objects and reconciling each once\n",
        report.example.as_str()
    );
    out.push_str(&crate::summary::tables(
        &report.spreads,
        &["held VmHWM MiB", "held VmRSS MiB"],
        report.ratio.as_slice(),
    ));
    out
}

/// The example's executable: `--operator` when given, else beside this
/// executable.
pub(crate) fn example_path(example: Example, operator: Option<&Path>) -> anyhow::Result<PathBuf> {
    match operator {
        Some(path) => Ok(path.to_owned()),
        None => example.default_path(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_are_summed_over_results() {
        let scrape = "# TYPE concord_reconcile_total counter\n\
                      concord_reconcile_total{controller=\"pods\",result=\"success\"} 9998\n\
                      concord_reconcile_total{controller=\"pods\",result=\"error\"} 2\n\
                      concord_reconcile_errors_total{controller=\"pods\"} 2\n";
        assert_eq!(reconcile_total(scrape), 10_000);
    }
}
