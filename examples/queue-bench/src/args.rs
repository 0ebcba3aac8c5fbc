//! The benchmark's flags.

use std::path::PathBuf;

/// One of the operators measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContenderName {
    /// A concord manager with one controller (its default queue).
    Concord,
    /// controller-runtime v0.25 with its priority queue (its default).
    CrPriority,
    /// controller-runtime v0.25 with its classic work queue
    /// (`UsePriorityQueue: false`).
    CrWorkqueue,
}

impl ContenderName {
    /// The name in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ContenderName::Concord => "concord",
            ContenderName::CrPriority => "controller-runtime priority queue",
            ContenderName::CrWorkqueue => "controller-runtime work queue",
        }
    }
}

// ANCHOR: args
/// The benchmark's flags.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "queue-bench",
    about = "New objects during an initial-list storm: concord against controller-runtime"
)]
pub struct Args {
    /// ConfigMaps that exist when each operator starts.
    #[arg(long, default_value_t = 10_000)]
    pub objects: usize,
    /// Paired rounds: each contender runs once per round.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// New ConfigMaps created per second during the storm.
    #[arg(long, default_value_t = 20)]
    pub rate: u32,
    /// How long each reconcile takes (milliseconds), in every contender.
    #[arg(long, default_value_t = 10)]
    pub work_ms: u64,
    /// Reconciles at once, in every contender (concord's default).
    #[arg(long, default_value_t = concord::manager::DEFAULT_CONCURRENCY)]
    pub concurrency: u16,
    /// The contenders, in the first round's order.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [ContenderName::Concord, ContenderName::CrPriority, ContenderName::CrWorkqueue])]
    pub contenders: Vec<ContenderName>,
    /// A run gives up when its storm lasts longer than this (seconds).
    #[arg(long, default_value_t = 600)]
    pub timeout_s: u64,
    /// The cluster (default: the embedded control plane).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Consent to create objects on a cluster not on this machine.
    #[command(flatten)]
    pub consent: concord_examples::RemoteConsent,
    /// Also write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write the table (Markdown) here.
    #[arg(long)]
    pub table: Option<PathBuf>,
}
// ANCHOR_END: args
