//! The operator memory benchmark at small scale on the real control plane:
//! both operators — concord's and the controller-runtime peer — must write
//! every object of their round, and the burst must end with every object
//! reconciled at its final value. Memory figures are printed, never
//! asserted: benchmarks measure them (book: "Measuring memory").
//!
//! Runs the benchmark's own executable, built here, with a small
//! `--pods`, exactly as a reader runs
//! `cargo run --release -p concord-memory-bench`.
//!
//! Run with `cargo test -p concord-tests --test bench memory_bench:: -- --nocapture`
//! to see the tables.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, ensure};
use concord_tests::workspace_program;
use serde_json::Value;

/// The benchmark's debug build (its figures are not what is tested).
fn memory_bench() -> anyhow::Result<PathBuf> {
    workspace_program("memory-bench", false)
}

fn number(v: &Value, key: &str) -> anyhow::Result<u64> {
    v[key].as_u64().with_context(|| format!("{key} in {v}"))
}

#[test]
fn both_operators_write_every_pod_from_a_metadata_only_cache() -> anyhow::Result<()> {
    let bench = memory_bench()?;
    let env = concord_testenv::TestEnv::shared()?;
    let metadata = run(&bench, env, "metadata", &[])?;
    check_runs(&metadata)
}

#[test]
fn both_operators_write_every_pod_with_a_full_cache_and_the_burst_reconciles_every_final_value()
-> anyhow::Result<()> {
    let bench = memory_bench()?;
    let env = concord_testenv::TestEnv::shared()?;
    let report = run(
        &bench,
        env,
        "full",
        &[
            "--burst",
            "--burst-pods",
            "50",
            "--events",
            "500",
            "--burst-sleep-ms",
            "5",
        ],
    )?;
    check_runs(&report)?;

    let burst = &report["burst"];
    assert_eq!(number(burst, "objects")?, 50, "{burst}");
    assert_eq!(
        number(burst, "reconciled_at_final")?,
        50,
        "every burst object reconciled at its final value: {burst}"
    );
    assert!(
        !burst["samples"].as_array().is_none_or(Vec::is_empty),
        "{burst}"
    );
    Ok(())
}

#[test]
fn the_shipped_kueue_operator_holds_every_pod_beside_the_peer() -> anyhow::Result<()> {
    let bench = memory_bench()?;
    let env = concord_testenv::TestEnv::shared()?;
    let report = run(&bench, env, "full", &["--example", "kueue-finalizer"])?;
    let hold = &report["hold"];
    assert_eq!(hold["example"], "kueue-finalizer", "{report}");
    let runs = hold["runs"].as_array().context("hold.runs")?;
    let operators: Vec<&str> = runs.iter().filter_map(|r| r["operator"].as_str()).collect();
    assert_eq!(operators, ["concord", "controller-runtime"], "{hold}");
    for run in runs {
        assert!(
            number(run, "reconciles")? >= 200,
            "every pod reconciled: {run}"
        );
        assert!(number(&run["held"], "hwm_kib")? > 0, "{run}");
    }
    assert!(
        report["runs"].as_array().is_some_and(Vec::is_empty),
        "no write pass with --example: {report}"
    );
    Ok(())
}

#[test]
fn the_concord_operator_writes_every_pod_on_each_allocator() -> anyhow::Result<()> {
    let bench = memory_bench()?;
    let env = concord_testenv::TestEnv::shared()?;
    let choices = [
        "system",
        "system-trim",
        "system-arenas2",
        "system-arena1",
        "jemalloc",
        "mimalloc",
    ];
    let report = run(
        &bench,
        env,
        "metadata",
        // Three seconds after the pass: the trimming choice trims once
        // reconciles stop for one, checked each second.
        &[
            "--no-peer",
            "--allocators",
            &choices.join(","),
            "--settle-secs",
            "3",
        ],
    )?;
    let runs = report["runs"].as_array().context("runs")?;
    let allocators: Vec<&str> = runs
        .iter()
        .filter_map(|r| r["allocator"].as_str())
        .collect();
    assert_eq!(
        allocators, choices,
        "one concord run per choice, no peer: {report}"
    );
    for run in runs {
        assert_eq!(run["operator"], "concord", "{run}");
        assert_eq!(
            number(run, "written_objects")?,
            200,
            "every pod written: {run}"
        );
        // The counting allocator wraps every choice: heap figures exist
        // whichever allocator serves the blocks.
        assert!(number(run, "written_heap_kib")? > 0, "{run}");
        assert!(
            run["write_cpu_ms"].as_f64().is_some_and(|ms| ms > 0.0),
            "{run}"
        );
        let glibc = run["allocator"]
            .as_str()
            .is_some_and(|a| a.starts_with("system"));
        let arenas = number(&run["written_malloc"], "arena_kib")?;
        assert_eq!(
            arenas > 0,
            glibc,
            "glibc's arenas are read on glibc only: {run}"
        );
    }
    // The trimming choice trimmed once the write pass stopped.
    assert!(number(&runs[1], "trims")? >= 1, "{}", runs[1]);
    assert!(
        report["ratios"].as_array().is_some_and(Vec::is_empty),
        "no ratios without the peer: {report}"
    );
    Ok(())
}

/// `--yes-create-pods-in` for a cluster `$CONCORD_TEST_KUBECONFIG` chose for
/// the tests; nothing for the embedded control plane.
fn consent(env: &concord_testenv::TestEnv) -> anyhow::Result<Vec<String>> {
    if std::env::var_os(concord_testenv::KUBECONFIG_ENV).is_none() {
        return Ok(Vec::new());
    }
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig_path())?;
    Ok(vec![
        "--yes-create-pods-in".into(),
        kubeconfig.current_context.unwrap_or_default(),
    ])
}

/// Runs the benchmark small with `--cache cache` and `extra`; its JSON report.
fn run(
    bench: &std::path::Path,
    env: &concord_testenv::TestEnv,
    cache: &str,
    extra: &[&str],
) -> anyhow::Result<Value> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let json = std::env::temp_dir().join(format!(
        "memory-bench-test-{}-{cache}-{}.json",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    // One second of settling unless `extra` says otherwise.
    let settle: &[&str] = if extra.contains(&"--settle-secs") {
        &[]
    } else {
        &["--settle-secs", "1"]
    };
    let output = Command::new(bench)
        .args(["--pods", "200", "--rounds", "1", "--warmup", "0"])
        .args(settle)
        .args(["--cache", cache])
        .args(extra)
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(consent(env)?)
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running memory-bench")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    ensure!(
        output.status.success(),
        "memory-bench failed: {}",
        output.status
    );
    let report = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    let _ = std::fs::remove_file(&json);
    Ok(report)
}

/// Both operators wrote every Pod, and the report has its figures.
fn check_runs(report: &Value) -> anyhow::Result<()> {
    let runs = report["runs"].as_array().context("runs")?;
    let operators: Vec<&str> = runs.iter().filter_map(|r| r["operator"].as_str()).collect();
    assert_eq!(operators, ["concord", "controller-runtime"], "{report}");
    for run in runs {
        assert_eq!(number(run, "objects")?, 200, "{run}");
        assert_eq!(
            number(run, "written_objects")?,
            200,
            "every pod written: {run}"
        );
        assert!(
            number(run, "writes")? >= 200,
            "one write per pod at least: {run}"
        );
        assert!(number(run, "reconciles")? >= 200, "{run}");
        // Figures are reported, not judged.
        assert!(number(&run["synced"], "hwm_kib")? > 0, "{run}");
        assert!(
            run["allocations_per_reconcile"]
                .as_f64()
                .is_some_and(|a| a > 0.0),
            "{run}"
        );
    }
    // concord's allocator reports the heap it held once synced, and a peak
    // of the initial list that is at least that.
    let concord = &runs[0];
    let held = number(concord, "synced_heap_kib")?;
    assert!(held > 0, "{concord}");
    assert!(number(concord, "list_heap_peak_kib")? >= held, "{concord}");
    assert!(number(concord, "written_heap_kib")? > 0, "{concord}");
    assert_eq!(
        report["ratios"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );

    Ok(())
}
