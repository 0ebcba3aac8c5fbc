//! The operator memory benchmark: a concord operator and a
//! controller-runtime operator holding the same objects, side by side.
//!
//! What it shows: each operator's VmHWM and VmRSS after its cache synced
//! and after a full pass of writes, allocations per reconcile, over
//! interleaved rounds, with the concord/controller-runtime ratio of VmHWM
//! and its 95% interval; with `--burst`, the concord operator's memory
//! over time while a burst of updates meets a slow reconciler. A table on
//! stdout, the report as JSON with `--json`.
//!
//! What it needs: Go and Rust (the embedded control plane and the Go
//! operator are built from their Go modules on first use, then cached), or
//! a cluster named with `--kubeconfig` (`$KUBECONFIG` is ignored; a server
//! that is not on this machine also needs `--yes-create-pods-in
//! <context>`).
//!
//! ```text
//! cargo run --release -p concord-memory-bench -- --pods 10000 --rounds 3 --json target/memory-bench/pods.json
//! cargo run --release -p concord-memory-bench -- --kind widgets --pods 10000 --rounds 3
//! cargo run --release -p concord-memory-bench -- --pods 100000 --rounds 3
//! cargo run --release -p concord-memory-bench -- --rounds 0 --burst --events 100000 --burst-pods 1000
//! ```
//!
//! `memory-bench operator …` is the concord operator the harness starts.

use std::process::ExitCode;

use clap::Parser as _;
use concord_memory_bench::operator::{self, OperatorArgs};
use concord_memory_bench::{Args, CountingAlloc};

/// Counts allocations for the operator's allocations per reconcile, and
/// the heap it holds.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

#[derive(clap::Parser)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(flatten)]
    bench: Args,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand)]
enum Command {
    /// The concord operator the harness measures (started by it).
    #[command(hide = true)]
    Operator(OperatorArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    concord_race_bench::init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Operator(args)) => operator::run(args, &ALLOC).await,
        None => match concord_memory_bench::run(&cli.bench).await {
            Ok(report) => {
                println!("{}", concord_memory_bench::table(&report));
                Ok(())
            }
            Err(err) => Err(err),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("memory-bench: {err:#}");
            ExitCode::from(2)
        }
    }
}
