//! The benchmark's command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::contender::Contender;

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
    pub(crate) parents: usize,
    /// Rounds; each holds the watch back by the next of `--holds`.
    #[arg(long, default_value_t = 8, value_parser = count(1, 100))]
    pub(crate) rounds: usize,
    /// How long the fault proxy holds each ConfigMap watch event back, in
    /// seconds, one per round in turn.
    #[arg(long, value_delimiter = ',', default_value = "0.1,0.5,1,2", value_parser = hold)]
    pub(crate) holds: Vec<Duration>,
    /// Children per parent, phase by phase (the first creates the parents).
    #[arg(long, value_delimiter = ',', default_value = "3,5,1", value_parser = count(0, 50))]
    pub(crate) scale: Vec<usize>,
    /// The contenders, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "concord,concord-ungated,controller-runtime"
    )]
    pub(crate) contenders: Vec<Contender>,
    /// Reconciles at once, for every contender (concord's default; the
    /// peer's `MaxConcurrentReconciles`).
    #[arg(long, default_value_t = concord::manager::DEFAULT_CONCURRENCY)]
    pub(crate) concurrency: u16,
    /// The longest one phase may take to settle, in seconds; a phase that
    /// does not is reported and ends its contender's turn.
    #[arg(long, default_value_t = 300)]
    pub(crate) phase_timeout: u64,
    /// Directory `stale.md` and `stale.json` are written to.
    #[arg(long, default_value = "target/stale-bench")]
    pub(crate) out: PathBuf,
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
    pub(crate) fn contenders(&self) -> Vec<Contender> {
        let mut unique = Vec::with_capacity(self.contenders.len());
        for c in &self.contenders {
            if !unique.contains(c) {
                unique.push(*c);
            }
        }
        unique
    }

    /// The problems of the command line, all at once.
    pub(crate) fn problems(&self) -> Vec<String> {
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
