//! `stale-bench` at small scale on the real control plane: its tables are
//! written, the API server's count of each contender's children adds up,
//! and concord with read-your-own-writes creates and deletes exactly what
//! the spec changes need. The other contenders' figures are printed, never
//! asserted: the benchmark measures them (book: "Measuring stale
//! decisions").
//!
//! Runs the benchmark's own executable, built here, with small sizes,
//! exactly as a reader runs
//! `cargo run --release -p concord-examples --example stale-bench`.
//!
//! Run with `cargo test -p concord-tests --test bench stale_bench:: -- --nocapture`
//! to see the tables.

use std::process::{Command, Stdio};

use anyhow::{Context as _, ensure};
use concord_tests::workspace_program;
use serde_json::Value;

const PARENTS: u64 = 6;

fn number(v: &Value, key: &str) -> anyhow::Result<u64> {
    v[key].as_u64().with_context(|| format!("{key} in {v}"))
}

#[test]
fn the_gate_creates_and_deletes_exactly_what_the_spec_needs_and_the_counts_add_up()
-> anyhow::Result<()> {
    let bench = workspace_program("stale-bench", true)?;
    let env = concord_testenv::TestEnv::shared()?;
    let out = std::env::temp_dir().join(format!("stale-bench-test-{}", std::process::id()));
    let output = Command::new(&bench)
        .args(["--parents", &PARENTS.to_string(), "--rounds", "1"])
        .args(["--holds", "0.3", "--phase-timeout", "120"])
        .arg("--out")
        .arg(&out)
        // The benchmark uses this test's control plane rather than its own.
        .env(concord_testenv::KUBECONFIG_ENV, env.kubeconfig_path())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running stale-bench")?;
    println!("{}", String::from_utf8_lossy(&output.stdout));
    ensure!(
        output.status.success(),
        "stale-bench failed: {}",
        output.status
    );
    let text = std::fs::read_to_string(out.join("stale.json")).context("reading stale.json")?;
    let report: Value = serde_json::from_str(&text)?;
    let contenders = report["contenders"].as_array().context("contenders")?;
    let names: Vec<&str> = contenders
        .iter()
        .filter_map(|c| c["contender"].as_str())
        .collect();
    assert_eq!(
        names,
        ["concord", "concord-ungated", "controller-runtime"],
        "{report}"
    );
    for c in contenders {
        assert_eq!(number(c, "parents")?, PARENTS, "{c}");
        // 3, then 5, then 1 child per parent.
        assert_eq!(number(c, "needed_creates")?, 5 * PARENTS, "{c}");
        assert_eq!(number(c, "needed_deletes")?, 4 * PARENTS, "{c}");
        if number(c, "unsettled_turns")? == 0 {
            assert_eq!(
                number(c, "created")? - number(c, "deleted")?,
                PARENTS,
                "what the API server saw created and deleted leaves one child per parent: {c}"
            );
            assert_eq!(number(c, "right")?, PARENTS, "{c}");
        }
    }
    let gated = &contenders[0];
    assert_eq!(number(gated, "unsettled_turns")?, 0, "{gated}");
    assert_eq!(number(gated, "excess")?, 0, "no excess child: {gated}");
    assert_eq!(
        number(gated, "wrong_deletes")?,
        0,
        "no wrong delete: {gated}"
    );
    assert_eq!(number(gated, "created")?, 5 * PARENTS, "{gated}");

    // The table the book includes: one row per contender, saying what the
    // JSON says.
    let md = std::fs::read_to_string(out.join("stale.md")).context("reading stale.md")?;
    let row = md
        .lines()
        .find(|l| l.starts_with("| concord |"))
        .with_context(|| format!("the gate's row in {md}"))?;
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
    assert_eq!(cells[3], "0", "excess created: {row}");
    assert_eq!(cells[5], "0", "deleted wrongly: {row}");
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}
