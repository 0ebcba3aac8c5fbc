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

mod manager;
mod peer;
mod phases;
mod report;
mod run;
mod stats;
mod tally;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::run::Contender;

// ANCHOR: args
/// Count the children a ReplicaSet-like controller creates and deletes
/// beyond its spec while its watch is held back: concord with and
/// without read-your-own-writes, and a controller-runtime peer.
#[derive(Clone, Debug, Parser)]
#[command(name = "stale-bench", about, long_about = None)]
pub(crate) struct Args {
    /// Parents per contender over all rounds; each round gives every
    /// contender `parents / rounds` fresh parents.
    #[arg(long, default_value_t = 1_000, value_parser = count(1, 100_000))]
    parents: usize,
    /// Rounds; each holds the watch back by the next of `--holds`.
    #[arg(long, default_value_t = 8, value_parser = count(1, 100))]
    rounds: usize,
    /// How long the fault proxy holds each ConfigMap watch event back, in
    /// seconds, one per round in turn.
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.5,1,2", value_parser = hold)]
    holds: Vec<Duration>,
    /// Children per parent, phase by phase (the first creates the parents).
    #[arg(long, value_delimiter = ',', default_value = "3,5,1", value_parser = count(0, 50))]
    scale: Vec<usize>,
    /// The contenders, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "concord,concord-ungated,controller-runtime"
    )]
    contenders: Vec<Contender>,
    /// Reconciles at once, for every contender (concord's default; the
    /// peer's `MaxConcurrentReconciles`).
    #[arg(long, default_value_t = concord::manager::DEFAULT_CONCURRENCY)]
    concurrency: u16,
    /// The longest one phase may take to settle, in seconds; a phase that
    /// does not is reported and ends its contender's turn.
    #[arg(long, default_value_t = 300)]
    phase_timeout: u64,
    /// Directory `stale.md` and `stale.json` are written to.
    #[arg(long, default_value = "target/stale-bench")]
    out: PathBuf,
}
// ANCHOR_END: args

/// A parser of whole numbers from `min` to `max`.
fn count(min: u64, max: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(min..=max)
}

/// Parse a hold: seconds, above 0 and at most 10.
fn hold(text: &str) -> Result<Duration, String> {
    let s: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if s > 0.0 && s <= 10.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(format!("{s} s is not between 0 (excluded) and 10"))
    }
}

impl Args {
    /// The contenders, in order, without duplicates.
    fn contenders(&self) -> Vec<Contender> {
        let mut unique = Vec::with_capacity(self.contenders.len());
        for c in &self.contenders {
            if !unique.contains(c) {
                unique.push(*c);
            }
        }
        unique
    }

    /// The problems of the command line, all at once.
    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.parents < self.rounds {
            problems.push(format!(
                "--parents {} cannot be split over {} rounds",
                self.parents, self.rounds
            ));
        }
        if self.scale.is_empty() {
            problems.push("--scale needs at least one phase".into());
        }
        if self.contenders.is_empty() {
            problems.push("--contenders names none".into());
        }
        problems
    }
}

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
