//! `shard-bench report` at small scale on the real control plane: its
//! tables are written, every count in them is consistent, and no object
//! was ever reconciled by two replicas at once. Figures are printed, never
//! asserted: the benchmark measures them (book: "Scaling out").
//!
//! Runs the benchmark's own executable, built here, with small sizes,
//! exactly as a reader runs
//! `cargo run --release -p concord-examples --example shard-bench -- report`.
//!
//! Run with `cargo test -p concord-tests --test bench shard_bench:: -- --nocapture`
//! to see the tables.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, ensure};
use concord_tests::workspace_program;
use serde_json::Value;

const OBJECTS: u64 = 300;
const EVENTS: usize = 2;
const REPLICAS: usize = 3;

/// The benchmark's debug build (its figures are not what is tested).
fn shard_bench() -> anyhow::Result<PathBuf> {
    workspace_program("shard-bench", true)
}

fn number(v: &Value, key: &str) -> anyhow::Result<u64> {
    v[key].as_u64().with_context(|| format!("{key} in {v}"))
}

fn read(dir: &Path, name: &str) -> anyhow::Result<String> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The data rows of the Markdown table in `text` (header and rule left out).
fn rows(text: &str) -> Vec<Vec<String>> {
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
    lines
        .iter()
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn report_writes_consistent_tables_and_no_object_is_reconciled_by_two_replicas_at_once()
-> anyhow::Result<()> {
    let bench = shard_bench()?;
    let env = concord_testenv::TestEnv::shared()?;
    let out = std::env::temp_dir().join(format!("shard-bench-test-{}", std::process::id()));
    let json = out.join("report.json");
    let output = Command::new(&bench)
        .arg("report")
        .args(["--objects", &OBJECTS.to_string()])
        .args(["--events", &EVENTS.to_string()])
        .args(["--replicas", &REPLICAS.to_string()])
        // Short Leases: a crash hands over in about 3 s instead of 6.
        .args(["--lease-duration", "3", "--renew-deadline-ms", "2000"])
        .args(["--retry-period-ms", "250"])
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .arg(&json)
        // The benchmark uses this test's control plane rather than its own.
        .env(concord_testenv::KUBECONFIG_ENV, env.kubeconfig_path())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running shard-bench report")?;
    println!("{}", String::from_utf8_lossy(&output.stdout));
    ensure!(
        output.status.success(),
        "shard-bench report failed: {}",
        output.status
    );
    let report: Value = serde_json::from_str(&read(&out, "report.json")?)?;

    // No object was ever in a reconcile on two replicas at once.
    assert_eq!(number(&report, "double_reconciles")?, 0, "{report}");
    assert_eq!(number(&report, "handover_double")?, 0, "{report}");

    // Every event moved some objects, never all, and its phases were measured.
    for (kind, phase) in [("clean_leaves", "gone_ms"), ("crashes", "renewal_age_ms")] {
        let samples = report[kind].as_array().context(kind)?;
        assert_eq!(samples.len(), EVENTS, "{kind}: {report}");
        for sample in samples {
            let moved = number(sample, "moved")?;
            assert!(moved > 0 && moved < OBJECTS, "{kind}: {sample}");
            assert!(sample[phase].is_number(), "{kind} has {phase}: {sample}");
            let (first, done) = (&sample["first_start_ms"], &sample["all_done_ms"]);
            assert!(
                first.as_f64() <= done.as_f64(),
                "the first moved object started before the last finished: {sample}"
            );
        }
    }
    assert_eq!(
        report["joins_ms"].as_array().map(Vec::len),
        Some(2 * EVENTS),
        "a replacement joined after every event: {report}"
    );
    // Every object was reconciled at least once in each phase.
    assert!(
        number(&report, "handover_reconciles")? >= OBJECTS,
        "{report}"
    );
    assert!(
        number(&report, "reconciles")? >= number(&report, "handover_reconciles")? + OBJECTS,
        "{report}"
    );
    // Below 20 crashes the crash target cannot be decided.
    assert_eq!(report["crash_verdict"], "undecided", "{report}");

    let placement = &report["placement"];
    assert_eq!(number(placement, "objects")?, OBJECTS, "{placement}");
    assert!(
        number(placement, "label_writes")? >= OBJECTS,
        "every object was labelled at least once: {placement}"
    );
    let owned: Vec<u64> = placement["owned"]
        .as_array()
        .context("owned")?
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert_eq!(owned.len(), REPLICAS, "{placement}");
    assert_eq!(
        owned.iter().sum::<u64>(),
        OBJECTS,
        "the shards divide every object: {placement}"
    );
    assert!(
        ["met", "missed", "undecided"].contains(&placement["verdict"].as_str().unwrap_or("")),
        "{placement}"
    );

    // The tables the book includes: present, and saying what the JSON says.
    let summary = rows(&read(&out, "summary.md")?);
    assert_eq!(summary.len(), 3, "three targets: {summary:?}");
    let verdicts: Vec<&str> = summary
        .iter()
        .map(|r| r.last().map_or("", String::as_str))
        .collect();
    assert!(verdicts[0].starts_with("undecided"), "{summary:?}");
    assert_eq!(verdicts[1], placement["verdict"], "{summary:?}");
    assert_eq!(verdicts[2], "met", "{summary:?}");
    let handover = rows(&read(&out, "handover.md")?);
    let events = |label: &str| {
        handover
            .iter()
            .find(|r| r[0].contains(label))
            .map(|r| r[1].clone())
    };
    let count = EVENTS.to_string();
    assert_eq!(
        events("clean leave: every moved object").as_deref(),
        Some(count.as_str()),
        "{handover:?}"
    );
    assert_eq!(
        events("crash: every moved object").as_deref(),
        Some(count.as_str()),
        "{handover:?}"
    );
    let joins = (2 * EVENTS).to_string();
    assert_eq!(
        events("join").as_deref(),
        Some(joins.as_str()),
        "{handover:?}"
    );
    let placement_rows = rows(&read(&out, "placement.md")?);
    assert_eq!(placement_rows.len(), 3, "{placement_rows:?}");
    assert!(
        placement_rows
            .iter()
            .filter(|r| r[0].contains("ceiling"))
            .all(|r| r[1] == OBJECTS.to_string()),
        "each ceiling run labels every object once: {placement_rows:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}
