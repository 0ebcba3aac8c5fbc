//! Sharding benchmarks on the embedded control plane (or the cluster of
//! `$CONCORD_TEST_KUBECONFIG`): how long a handover takes, and how much
//! memory `label` mode saves per replica.
//!
//! - `handover`: N replicas (`--shards=hash`, in this process) on M
//!   ConfigMaps; K clean leaves (shutdown: drain, delete the Lease) and K
//!   crashes (the replica's task aborted, its Lease left to expire), each
//!   followed by a replacement joining. For every event it measures the time
//!   from the event until every moved key has been reconciled by its new
//!   owner, broken down into phases, and prints p50/p90/max beside the
//!   targets (clean leave ≤ 2 s, crash ≤ lease duration + 2 s).
//! - `memory`: creates `--pods` Pods, runs three `label` replicas (each its
//!   own process: RSS is per process) until each has cached its shard, then
//!   one unsharded replica, and prints each one's VmRSS and VmHWM beside the
//!   target (each sharded replica ≤ 0.5 × the unsharded one).
//!
//! - `standby`: a `--leader-elect` leader and one standby on `--objects`
//!   ConfigMaps; the leader crashes, and the time until the standby takes
//!   the Lease, until its first reconcile and until it has reconciled every
//!   object is measured with its caches warm (the default) and cold
//!   (`--cold-standby`).
//! - `report`: the figures the book's scaling page shows. Three replica
//!   processes on 10,000 ConfigMaps; 20 clean leaves (SIGTERM) and 20
//!   crashes (SIGKILL), each handover's p50, p99 and max; `label` mode's
//!   placement of every object against the API server's PATCH ceiling
//!   measured in the same run; reconciles of one object by two replicas
//!   at once (any fails the run). It writes Markdown tables into `--out`.
//!
//! ```text
//! cargo run --release -p concord-examples --example shard-bench -- report --out book/src/scaling-out
//! cargo run --release -p concord-examples --example shard-bench -- handover
//! cargo run --release -p concord-examples --example shard-bench -- standby --objects 10000
//! cargo run --release -p concord-examples --example shard-bench -- memory --pods 10000
//! ```
//!
//! The book chapter "Scaling out" (`book/src/scaling-out.md`) shows a run
//! and explains the phases.
#![allow(clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

mod fleet;
mod handover;
mod member;
mod memory;
mod placement;
mod procs;
mod replica;
mod report;
mod standby;
mod stats;
mod tables;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "sharding benchmarks: handover time, label-mode placement and memory")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time clean leaves and crashes until the moved keys are reconciled.
    Handover(handover::Args),
    /// Per-replica RSS of `label` mode against one unsharded replica.
    Memory(memory::Args),
    /// A leader's crash with a warm standby and with a cold one.
    Standby(standby::Args),
    /// Handover on SIGTERM and SIGKILL of replica processes, `label`
    /// placement against the PATCH ceiling, double reconciles: the book's tables.
    Report(Box<report::Args>),
    /// One replica process of the `report` benchmark (started by it).
    #[command(hide = true)]
    Member(Box<member::Args>),
    /// One replica process of the `memory` benchmark (started by it).
    #[command(hide = true)]
    Replica(Box<replica::Args>),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Handover(args) => runtime.block_on(handover::run(args)),
        Command::Memory(args) => runtime.block_on(memory::run(args)),
        Command::Standby(args) => runtime.block_on(standby::run(args)),
        Command::Report(args) => runtime.block_on(report::run(*args)),
        Command::Member(args) => runtime.block_on(member::run(*args)),
        Command::Replica(args) => runtime.block_on(replica::run(*args)),
    }
}
