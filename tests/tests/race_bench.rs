//! The race benchmark at small scale on the real control plane: it must
//! reproduce both incidents (`lax` loses foreign finalizers in `kueue`,
//! Argo's `json-index` patch fails in `argo`) and show the safe strategies
//! losing nothing.
//!
//! Runs the same library code as
//! `cargo run --release --example race-bench`; see the book chapter
//! "Measuring strategies" for the 10,000-pod figures.
//!
//! Run with `cargo test -p concord-tests --test race_bench -- --nocapture`
//! to see the tables.

use std::path::PathBuf;

use anyhow::{Context, ensure};
use concord_examples::race::{self, Args, BenchOutcome, Contender, Report, Scenario};

const PODS: u32 = 200;
const WRITERS: u32 = 4;

async fn bench(
    scenario: Scenario,
    contenders: &[Contender],
    out: Option<PathBuf>,
) -> anyhow::Result<BenchOutcome> {
    let env = tokio::task::spawn_blocking(concord_testenv::TestEnv::shared).await??;
    let args = Args {
        scenario,
        pods: PODS,
        writers: WRITERS,
        strategies: Some(contenders.to_vec()),
        seed: 7,
        out,
        kubeconfig: Some(env.kubeconfig_path().to_path_buf()),
        baseline: None,
        max_regression: 5.0,
    };
    let outcome = race::run(&args).await?;
    println!("{}", race::markdown(&outcome.report, None));
    Ok(outcome)
}

fn lost(report: &Report, strategy: &str) -> anyhow::Result<u64> {
    Ok(report
        .result(strategy)
        .with_context(|| format!("{strategy} did not run"))?
        .lost_writes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_lax_loses_foreign_finalizers_and_safe_strategies_lose_none() -> anyhow::Result<()> {
    let out = std::env::temp_dir().join(format!("race-bench-test-{}", std::process::id()));
    let contenders = [
        Contender::Lax,
        Contender::Strict,
        Contender::Update,
        Contender::Apply,
    ];
    let outcome = bench(Scenario::Kueue, &contenders, Some(out.clone())).await?;
    let report = &outcome.report;
    ensure!(
        lost(report, "lax")? > 0,
        "lax was expected to drop foreign finalizers"
    );
    for safe in ["strict", "update", "apply"] {
        assert_eq!(lost(report, safe)?, 0, "{safe} lost writes");
    }
    assert!(outcome.failures.is_empty(), "{:?}", outcome.failures);

    // results.json has exactly the documented keys.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json"))?)?;
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    };
    assert_eq!(keys(&json), ["pods", "results", "scenario", "writers"]);
    let results = json["results"].as_array().context("results is a list")?;
    assert_eq!(results.len(), contenders.len());
    for r in results {
        assert_eq!(
            keys(r),
            [
                "conflicts",
                "errors",
                "lost_writes",
                "p50_ms",
                "p99_ms",
                "requests",
                "retries",
                "strategy",
                "wall_s",
                "writes_per_s"
            ]
        );
        assert!(r["wall_s"].is_f64() && r["requests"].is_u64() && r["strategy"].is_string());
    }
    assert_eq!(json["pods"], PODS);
    assert!(std::fs::read_to_string(out.join("results.svg"))?.starts_with("<svg"));
    std::fs::remove_dir_all(&out)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_json_index_fails_and_safe_strategies_lose_none() -> anyhow::Result<()> {
    let contenders = [
        Contender::JsonIndex,
        Contender::Strict,
        Contender::Update,
        Contender::Locked,
        Contender::Apply,
    ];
    let outcome = bench(Scenario::Argo, &contenders, None).await?;
    let report = &outcome.report;
    let json_index = report
        .result("json-index")
        .context("json-index did not run")?;
    ensure!(
        json_index.errors > 0,
        "json-index was expected to meet 422s: {json_index:?}"
    );
    ensure!(
        json_index.lost_writes > 0,
        "json-index was expected to lose writes: {json_index:?}"
    );
    for safe in ["strict", "update", "locked", "apply"] {
        let r = report
            .result(safe)
            .with_context(|| format!("{safe} did not run"))?;
        assert_eq!((r.lost_writes, r.errors), (0, 0), "{safe}: {r:?}");
    }
    assert!(outcome.failures.is_empty(), "{:?}", outcome.failures);
    Ok(())
}
