//! The harness's command line.

use std::path::PathBuf;
use std::time::Duration;

use crate::choice::AllocatorChoice;
use crate::objects::Kind;
use crate::operator::CacheMode;

// ANCHOR: args
/// What to measure, and how much of it.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "memory-bench",
    about = "the memory of a concord operator and of a controller-runtime operator holding the same objects"
)]
pub struct Args {
    /// Objects both operators hold (Pods, or Widgets with `--kind widgets`).
    #[arg(long, visible_alias = "objects", default_value_t = 10_000)]
    pub pods: usize,
    /// What the objects are.
    #[arg(long, value_enum, default_value = "pods")]
    pub kind: Kind,
    /// Rounds; each runs the concord operator, then the controller-runtime
    /// one. 0 runs no round (with `--burst`, only the burst).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Rounds run first and not reported: after one, every object carries
    /// the label, the annotation and the managedFields entries of both
    /// operators and the harness, so every reported process starts on
    /// objects of the same size.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Seconds each operator keeps running after a phase before its
    /// memory is read.
    #[arg(long, default_value_t = 3)]
    pub settle_secs: u64,
    /// Reconciles at once, in both operators.
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// How both operators cache the objects: `full` (each framework's
    /// default), `stripped` (no managedFields in either), `metadata`
    /// (metadata only, in both) or `view` (Pods only: the Kueue example's
    /// view of metadata and phase in concord, whole Pods in
    /// controller-runtime, whose default is what the same controller
    /// written for it holds).
    #[arg(long, value_enum, default_value = "full")]
    pub cache: CacheMode,
    /// How the concord operator's cache holds them: `compact` (each
    /// object as JSON, decoded per read: `CacheLayout::Compact`, concord's
    /// default) or `decoded` (typed objects). controller-runtime has no
    /// such choice and keeps its cache as `--cache` says.
    #[arg(long, value_enum, default_value_t)]
    pub layout: concord::cache::CacheLayout,
    /// What the concord operator allocates with, comma-separated: each
    /// choice runs in every round, in this order, before the
    /// controller-runtime operator; warm-up rounds and the burst run the
    /// first. `system` (glibc), `system-trim` (glibc, `malloc_trim(0)`
    /// when reconciles stop for a second), `system-arenas2` (glibc with
    /// `MALLOC_ARENA_MAX=2`), `system-arena1` (`MALLOC_ARENA_MAX=1`),
    /// `jemalloc`, `mimalloc`; the
    /// counting allocator wraps each, so heap figures compare.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "system", num_args = 1..)]
    pub allocators: Vec<AllocatorChoice>,
    /// Run the concord operator only, not the controller-runtime one (no
    /// ratios then).
    #[arg(long)]
    pub no_peer: bool,
    /// After the rounds, the burst: the concord operator with a slow
    /// reconciler (`--burst-sleep-ms`, concurrency 1) while `--events`
    /// annotation updates land on `--burst-pods` objects; its memory
    /// sampled every second.
    #[arg(long)]
    pub burst: bool,
    /// Annotation updates the burst sends.
    #[arg(long, default_value_t = 100_000)]
    pub events: usize,
    /// Objects the burst's updates are spread over.
    #[arg(long, default_value_t = 1_000)]
    pub burst_pods: usize,
    /// Milliseconds each reconcile sleeps in the burst.
    #[arg(long, default_value_t = 20)]
    pub burst_sleep_ms: u64,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the report's tables (the Markdown printed on stdout) here, for
    /// a page to include.
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// Kubeconfig of the cluster; default the embedded control plane
    /// (started, and built from its Go modules on first use). `$KUBECONFIG`
    /// is ignored.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Consent to run on a cluster that is not on this machine.
    #[command(flatten)]
    pub consent: concord_examples::RemoteConsent,
    /// The concord operator's executable; default this one (`memory-bench
    /// operator …`), or with `--example` the example beside it
    /// (`target/release/examples/<name>`).
    #[arg(long)]
    pub operator: Option<PathBuf>,
    /// Instead of the rounds' write pass: a shipped example operator itself
    /// (`<name> --serve`), holding the rounds' objects (created as its
    /// managed objects, its finalizer on) beside the controller-runtime
    /// operator's default cache. Build it first: `cargo build --release -p
    /// concord-examples --example <name>`.
    #[arg(long, value_enum)]
    pub example: Option<crate::example::Example>,
}
// ANCHOR_END: args

impl Args {
    /// The settle time.
    pub fn settle(&self) -> Duration {
        Duration::from_secs(self.settle_secs)
    }

    /// How long an operator may take to cache `objects` objects.
    pub(crate) fn sync_limit(objects: usize) -> Duration {
        Duration::from_secs(120) + Duration::from_millis(5) * objects as u32
    }

    /// How long the writes of `objects` objects may take.
    pub(crate) fn write_limit(objects: usize) -> Duration {
        Duration::from_secs(120) + Duration::from_millis(20) * objects as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn an_unknown_value_names_its_flag() {
        for (flag, value) in [("--cache", "sideways"), ("--kind", "gadgets")] {
            let err = Args::try_parse_from(["memory-bench", flag, value])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(flag) && err.contains(value), "{err}");
        }
    }

    #[test]
    fn defaults_are_the_documented_run() {
        let args = Args::try_parse_from(["memory-bench"]).unwrap();
        assert_eq!((args.pods, args.rounds, args.kind), (10_000, 3, Kind::Pods));
        assert_eq!(
            (args.events, args.burst_pods, args.burst),
            (100_000, 1_000, false)
        );
    }
}
