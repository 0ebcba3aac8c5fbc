//! The race benchmark at small scale on the real control plane, in its
//! deterministic race mode: every raced write is raced for certain, so
//! `lax` must lose exactly the foreign finalizers of the raced pods, Argo's
//! `json-index` patch must fail, and the safe strategies — and the
//! controller-runtime peer's optimistic lock — must lose and give up
//! nothing while meeting a conflict on every race.
//!
//! Runs the same library code as
//! `cargo run --release --example race-bench`; see the book chapter
//! "Measuring strategies" for the 10,000-pod figures.
//!
//! Run with `cargo test -p concord-tests --test bench race_bench:: -- --nocapture`
//! to see the tables.

use std::path::Path;

use anyhow::{Context, ensure};
use clap::Parser as _;
use concord_race_bench::{self as race, Args, BenchOutcome, Report, StrategyResult};

async fn bench(args: &[&str], out: &Path) -> anyhow::Result<BenchOutcome> {
    let env = tokio::task::spawn_blocking(concord_testenv::TestEnv::shared).await??;
    let mut argv: Vec<String> = ["race-bench", "--writers", "4", "--seed", "7"]
        .iter()
        .chain(args)
        .map(|s| (*s).to_owned())
        .collect();
    argv.push("--kubeconfig".into());
    argv.push(env.kubeconfig_path().display().to_string());
    // A cluster named by $CONCORD_TEST_KUBECONFIG was chosen for the tests.
    if std::env::var_os(concord_testenv::KUBECONFIG_ENV).is_some() {
        let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig_path())?;
        argv.push("--yes-create-pods-in".into());
        argv.push(kubeconfig.current_context.unwrap_or_default());
    }
    argv.push("--out".into());
    argv.push(out.display().to_string());
    // The control plane the harness started: its CPU per write is measured.
    if let Some(pid) = env.control_plane_pid() {
        argv.push("--server-pid".into());
        argv.push(pid.to_string());
    }
    let outcome = race::run(&Args::try_parse_from(argv)?).await?;
    println!("{}", race::markdown(&outcome.report));
    Ok(outcome)
}

fn result<'a>(report: &'a Report, name: &str) -> anyhow::Result<&'a StrategyResult> {
    report
        .result(name)
        .with_context(|| format!("{name} did not run"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_lax_loses_every_raced_finalizer_and_safe_writers_lose_none() -> anyhow::Result<()> {
    let out = std::env::temp_dir().join(format!("race-bench-test-{}", std::process::id()));
    let outcome = bench(
        &[
            "--scenario",
            "kueue",
            "--pods",
            "160",
            "--rounds",
            "2",
            "--race",
            "lockstep",
            "--race-intensity",
            "0.75",
            "--strategies",
            "lax,strict,update,apply,ceiling,controller-runtime,manager-guarded",
            "--baseline",
            "lax",
        ],
        &out,
    )
    .await?;
    let report = &outcome.report;

    // 2 rounds of 80 pods, 60 of each raced.
    let lax = result(report, "lax")?;
    assert_eq!(lax.raced_writes, 120, "{lax:?}");
    assert_eq!(
        lax.lost_writes, lax.raced_writes,
        "lax must drop the foreign finalizer of every raced pod: {lax:?}"
    );
    for safe in [
        "strict",
        "update",
        "apply",
        "controller-runtime",
        "manager-guarded",
    ] {
        let r = result(report, safe)?;
        assert_eq!(r.raced_writes, 120, "{safe}: {r:?}");
        assert_eq!((r.lost_writes, r.failed_writes), (0, 0), "{safe}: {r:?}");
        assert!(r.writes_per_s > 0.0, "{safe}: {r:?}");
    }
    for locking in ["strict", "update", "controller-runtime"] {
        let r = result(report, locking)?;
        ensure!(
            r.conflicts >= r.raced_writes,
            "{locking} must meet a conflict on every race: {r:?}"
        );
    }
    let ceiling = result(report, "ceiling")?;
    assert_eq!(ceiling.lost_writes, 0, "{ceiling:?}");
    assert_eq!(ceiling.fraction_of_ceiling, Some(1.0));
    let strict = result(report, "strict")?;
    let i = strict.vs_baseline.context("strict has a ratio to lax")?;
    assert_eq!(i.rounds, 2);
    assert!(i.lo <= i.ratio && i.ratio <= i.hi, "{i:?}");
    assert!(strict.verdict.is_some());
    assert!(strict.cpu_ms_per_write.is_some() && strict.peak_rss_mib.is_some());
    let peer = result(report, "controller-runtime")?;
    assert!(peer.peak_rss_mib.is_some_and(|m| m > 0.0), "{peer:?}");
    assert_eq!(report.stopping, "fixed");
    assert_eq!(report.rounds, 2);
    // The manager contender ran on the layout a `Manager` has by default.
    assert_eq!(report.manager_cache.as_deref(), Some("compact"));
    // The costs: every contender, the peer included, sent and received
    // bodies and spent CPU on its writes; the server's CPU is there when its
    // process is known and absent (never 0) otherwise.
    let measured_server = std::env::var_os(concord_testenv::KUBECONFIG_ENV).is_none();
    assert_eq!(report.server_process.is_some(), measured_server);
    for r in &report.results {
        ensure!(
            r.requests_per_write >= 1.0,
            "one request per write at least: {r:?}"
        );
        ensure!(
            r.bytes_sent_per_write.is_some_and(|b| b > 0.0)
                && r.bytes_received_per_write.is_some_and(|b| b > 0.0),
            "{}: body bytes counted: {r:?}",
            r.strategy
        );
        ensure!(r.cpu_ms_per_write.is_some_and(|c| c > 0.0), "{r:?}");
        match r.server_cpu_ms_per_write {
            Some(ms) => ensure!(measured_server && ms > 0.0, "{r:?}"),
            None => ensure!(!measured_server, "server CPU not measured: {r:?}"),
        }
    }
    // Lost writes by a safe strategy would fail; the ratios decide the rest.
    assert!(
        outcome.failures.iter().all(|f| f.contains("x lax")),
        "{:?}",
        outcome.failures
    );

    // results.json keeps the old keys and adds the new ones.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json"))?)?;
    let results = json["results"].as_array().context("results is a list")?;
    assert_eq!(results.len(), 7);
    for r in results {
        for key in [
            "strategy",
            "wall_s",
            "writes_per_s",
            "p50_ms",
            "p99_ms",
            "requests",
            "conflicts",
            "retries",
            "errors",
            "lost_writes",
            "failed_writes",
            "fallbacks",
            "cpu_ms_per_write",
            "peak_rss_mib",
            "fraction_of_ceiling",
            "requests_per_write",
            "bytes_sent_per_write",
            "bytes_received_per_write",
            "server_cpu_ms_per_write",
            "decided_after_rounds",
        ] {
            ensure!(r.get(key).is_some(), "results.json lacks {key}: {r}");
        }
    }
    assert_eq!(json["pods"], 160);
    assert!(std::fs::read_to_string(out.join("results.svg"))?.starts_with("<svg"));
    // results.md is the table the program printed, for a book page to include.
    let table = std::fs::read_to_string(out.join("results.md"))?;
    ensure!(
        table.contains("| contender | writes/s |") && table.contains("| lax |"),
        "results.md is the Markdown table: {table}"
    );
    let costs = table.find("| contender | writes | requests/write |");
    ensure!(
        costs.is_some() && costs < table.find("| contender | writes/s |"),
        "the costs are the first table: {table}"
    );
    std::fs::remove_dir_all(&out)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_json_index_fails_and_safe_strategies_lose_none() -> anyhow::Result<()> {
    let out = std::env::temp_dir().join(format!("race-bench-argo-{}", std::process::id()));
    let outcome = bench(
        &[
            "--scenario",
            "argo",
            "--pods",
            "100",
            "--rounds",
            "1",
            "--race-intensity",
            "1",
            "--strategies",
            "json-index,strict,update,locked,apply,controller-runtime",
        ],
        &out,
    )
    .await?;
    std::fs::remove_dir_all(&out)?;
    let report = &outcome.report;
    let json_index = result(report, "json-index")?;
    assert_eq!(json_index.raced_writes, 200, "{json_index:?}");
    ensure!(
        json_index.failed_writes > 0,
        "json-index was expected to give up writes on 422s: {json_index:?}"
    );
    ensure!(
        json_index.lost_writes > 0,
        "json-index was expected to lose writes: {json_index:?}"
    );
    // The peer too: its cache holds each pod once, however many of the
    // scenario's paths write it.
    for safe in ["strict", "update", "locked", "apply", "controller-runtime"] {
        let r = result(report, safe)?;
        assert_eq!((r.lost_writes, r.failed_writes), (0, 0), "{safe}: {r:?}");
    }
    assert!(outcome.failures.is_empty(), "{:?}", outcome.failures);
    assert_eq!(report.manager_cache, None, "no manager contender ran");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn until_decided_stops_when_every_ratio_is_decided_or_the_budget_ends() -> anyhow::Result<()>
{
    let out = std::env::temp_dir().join(format!("race-bench-seq-{}", std::process::id()));
    // `strict` against `lax` with every pod raced: `strict` sends about
    // twice the requests, `guarded` as many as `lax`; the run stops when
    // both ratios are decided, or after 4 rounds.
    let outcome = bench(
        &[
            "--scenario",
            "kueue",
            "--pods",
            "120",
            "--race-intensity",
            "1",
            "--strategies",
            "lax,guarded,strict",
            "--baseline",
            "lax",
            "--max-rounds",
            "4",
        ],
        &out,
    )
    .await?;
    std::fs::remove_dir_all(&out)?;
    let report = &outcome.report;
    assert_eq!(report.stopping, "until-decided");
    assert_eq!((report.max_rounds, report.pods_per_round), (4, 30));
    ensure!(
        (3..=4).contains(&report.rounds),
        "the first look is after round 3, the last after round 4: {report:?}"
    );
    // Two looks, each at half of 5%.
    assert!((report.alpha_per_look - 0.025).abs() < 1e-12);
    let decided_all = ["guarded", "strict"].iter().all(|n| {
        report
            .result(n)
            .is_some_and(|r| r.decided_after_rounds.is_some())
    });
    match report.stopped_because.as_str() {
        "decided" => ensure!(decided_all, "{report:?}"),
        "max-rounds" => assert_eq!(report.rounds, 4),
        other => anyhow::bail!("stopped because {other}"),
    }
    for name in ["guarded", "strict"] {
        let r = result(report, name)?;
        let i = r.vs_baseline.context("a ratio to lax")?;
        let verdict = r.verdict.context("a verdict")?;
        match r.decided_after_rounds {
            // A decided ratio keeps the interval of the round that decided it.
            Some(n) => {
                assert_eq!(i.rounds as u64, n, "{r:?}");
                assert_ne!(verdict, race::Verdict::Undecided, "{r:?}");
            }
            None => {
                assert_eq!(verdict, race::Verdict::Undecided, "{r:?}");
                assert_eq!(i.rounds as u64, report.rounds, "{r:?}");
            }
        }
        assert_eq!((r.lost_writes, r.failed_writes), (0, 0), "{name}: {r:?}");
        assert_eq!(r.rounds_writes_per_s.len() as u64, report.rounds);
    }
    // The table says after how many rounds each verdict was reached.
    let table = race::markdown(report);
    ensure!(table.contains("until decided: at most 4"), "{table}");
    for name in ["guarded", "strict"] {
        let r = result(report, name)?;
        let (Some(i), Some(v)) = (r.vs_baseline, r.verdict) else {
            anyhow::bail!("{name} has no verdict");
        };
        let n = r.decided_after_rounds.unwrap_or(i.rounds as u64);
        let cell = format!("{} after {n} rounds", v.as_str());
        ensure!(table.contains(&cell), "{name}: no {cell:?} in {table}");
    }
    Ok(())
}
