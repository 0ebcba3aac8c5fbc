//! The queue benchmark: an operator (re)starts over many existing
//! ConfigMaps and, during the storm of its initial list, new ConfigMaps
//! are created at a fixed rate; how long does each new one wait for its
//! first reconcile, and how long does the storm last?
//!
//! What it shows: per contender — concord, controller-runtime with its
//! priority queue (its default) and with its classic work queue — the
//! new objects' latency from create to first reconcile (p50, p99, max),
//! the storm's length (start to the last listed object's first
//! reconcile) and the longest wait of any object against the storm, over
//! paired rounds (every contender once per round, the order rotating),
//! with the median p99 over rounds. A table on stdout, also written with
//! `--table`, the report as JSON with `--json`.
//!
//! What it needs: Go and Rust (the embedded control plane and the Go
//! operator are built from their Go modules on first use, then cached), or
//! a cluster named with `--kubeconfig` (`$KUBECONFIG` is ignored; a server
//! that is not on this machine also needs `--yes-create-pods-in
//! <context>`).
//!
//! ```text
//! cargo run --release -p concord-queue-bench -- --objects 10000 --rounds 5 --table book/src/measuring/queue-results.md --json target/queue-bench/results.json
//! ```

use std::process::ExitCode;

use clap::Parser as _;
use concord_queue_bench::Args;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match concord_queue_bench::run(&args).await {
        Ok(report) => {
            print!("{}", concord_queue_bench::table(&report));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("queue-bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}
