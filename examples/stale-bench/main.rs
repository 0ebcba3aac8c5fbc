//! The stale-decision benchmark: does a controller decide on a cache older
//! than its own last writes? A ReplicaSet-like controller keeps `N`
//! children (ConfigMaps created with `generateName`, labelled
//! `parent=<name>`, owned by their parent) per parent ConfigMap, counting
//! them in its watch cache, while a fault proxy between it and the API
//! server holds every ConfigMap watch event back (0.1, 0.5, 1 and 2 s,
//! one hold per round, in turn). Parents are created asking for 3
//! children, then scaled to 5, then to 1 (`--scale`).
//!
//! Three contenders take turns in every round, each on fresh parents in a
//! namespace of its own, in an order rotated per round: concord with
//! read-your-own-writes (the default), concord with
//! `.with_read_your_writes(false)`, and a controller-runtime v0.25 peer
//! written the ordinary way (Go, in `stale-bench/peer/`, built from its
//! modules on first use). A watch of each namespace straight to the API
//! server counts the children every contender created and deleted: the
//! excess created, those deleted wrongly, the parents right at the end,
//! and each phase's wall time; each contender counts its reconciles.
//!
//! It prints the tables and writes `stale.md` and `stale.json` into
//! `--out`; the book's "Measuring stale decisions" includes `stale.md`.
//!
//! What it needs: Go and Rust (the embedded control plane and the peer are
//! built from their Go modules on first use, then cached), or a cluster
//! named by `$CONCORD_TEST_KUBECONFIG`.
//!
//! ```text
//! cargo run --release -p concord-examples --example stale-bench -- --out book/src/measuring
//! cargo run --release -p concord-examples --example stale-bench -- --parents 64 --rounds 4
//! ```

mod args;
mod contender;
mod manager;
mod outcome;
mod peer;
mod phases;
mod report;
mod run;
mod stats;
mod tally;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Args;

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let problems = args.problems();
    if !problems.is_empty() {
        for p in problems {
            eprintln!("stale-bench: {p}");
        }
        return ExitCode::from(2);
    }
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(run::run(&args)));
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("stale-bench: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", report::markdown(&args, &outcome));
    if let Err(e) = report::write(&args.out, &args, &outcome) {
        eprintln!("stale-bench: {e:#}");
        return ExitCode::FAILURE;
    }
    println!("stale.md and stale.json in {}", args.out.display());
    ExitCode::SUCCESS
}
