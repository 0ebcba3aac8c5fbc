//! The race benchmark: reproduce the Kueue and Argo write races at scale
//! and compare every write strategy in one run.
//!
//! What it shows: first what each contender's writes cost (requests, HTTP
//! body bytes sent and received, client CPU and the API server's CPU per
//! write), then per contender — every strategy called directly and
//! through a `Manager`, `raw` (the same requests without concord),
//! `ceiling` (the API server's capacity), `controller-runtime` (a Go peer)
//! and `json-index` (Argo's original code) — the throughput over paired
//! rounds with 95% intervals of its ratio to the baseline, latency,
//! requests, conflicts, failed and lost writes (counted on the final
//! objects), CPU per write and peak RSS, as a Markdown table on stdout,
//! with `results.json`, `results.md` and `results.svg` in `--out DIR` (default
//! `target/race-bench/<scenario>`). It exits non-zero when `strict`,
//! `update` or `apply` (or `locked`, in `argo`) lose or give up a write.
//! Every ratio to the baseline (`lax` by default) is printed with its
//! verdict against `1 - --max-regression/100`; naming `--baseline` makes it
//! the graduation check Kueue's maintainers asked for, which also exits
//! non-zero unless every strategy's interval clears that floor.
//!
//! What it needs: Go and Rust (the embedded control plane is built from its
//! Go modules on first use, then cached), or a cluster named with
//! `--kubeconfig` (`$KUBECONFIG` is ignored; a server that is not on this
//! machine also needs `--yes-create-pods-in <context>`). Memory: under 128 MiB for the client at 10,000 pods.
//!
//! ```text
//! cargo run --release --example race-bench -- --scenario kueue --pods 10000 --max-rounds 20 \
//!     --writers 16 --seed 1 --out target/race-bench/kueue --baseline lax --max-regression 5
//! ```

use std::process::ExitCode;

use clap::Parser as _;
use concord_race_bench::{self as race, Args};

#[tokio::main]
async fn main() -> ExitCode {
    race::init_logging();
    let args = Args::parse();
    let outcome = match race::run(&args).await {
        Ok(outcome) => outcome,
        Err(err) => {
            eprintln!("race-bench: {err:#}");
            return ExitCode::from(2);
        }
    };
    println!("{}", race::markdown(&outcome.report));
    println!(
        "results.json, results.md and results.svg in {}",
        args.out_dir().display()
    );
    match outcome.peak_rss_kib {
        Some(kib) => println!("client peak RSS (VmHWM): {:.1} MiB", kib as f64 / 1024.0),
        None => println!("client peak RSS: unavailable (no /proc/self/status)"),
    }
    if outcome.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        for failure in &outcome.failures {
            eprintln!("race-bench: FAIL: {failure}");
        }
        ExitCode::FAILURE
    }
}
