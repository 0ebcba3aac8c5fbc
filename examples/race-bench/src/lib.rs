//! The race benchmark behind `cargo run --release --example race-bench`.
//!
//! It reproduces concord's two motivating incidents at scale — Kueue's lost
//! finalizers and Argo Workflows' racing index patches — and runs every
//! write strategy through them in one run. Rounds — `--rounds N`, or with
//! `--baseline` as many as it takes to decide every checked ratio
//! ([`Stopping`]) — each run every contender once, in an order rotated per
//! round, on a fresh namespace and slice of pods:
//!
//! | step | what happens |
//! | --- | --- |
//! | setup | create the slice's pods (untimed), wait until the controller's watch cache holds them |
//! | writes | `--writers` tasks take logical writes off a work queue and send each from the cached object; with `--race lockstep` the raced writes are raced for certain (the other controller writes inside our window in `kueue`, both paths write at once in `argo`) |
//! | verify | list every pod from the server and count broken invariants: the lost writes |
//! | cleanup | strip finalizers, delete the pods and the namespace, wait until it is gone |
//!
//! Afterwards every contender's rounds are pooled; each ratio to the
//! `--baseline` gets a 95% interval paired by round ([`Interval`]), split
//! over the looks of a sequential run (Bonferroni). The first table is
//! what each write costs: requests, body bytes, client and API server CPU.
//!
//! The files beside this one are its parts: [`Args`] (the command line),
//! `scenarios/` (what each scenario creates, writes and expects), `send`,
//! `raw`, `json_index` and `ceiling` (how each contender writes, a `failure`
//! when a write does not happen), `peer`
//! (the controller-runtime program in `peer/`), `controller`, `cache` and
//! `foreign` (who writes), `verify`, `stats`, `sequential`, `wire` and `usage` (what is
//! measured), and the outputs ([`markdown`], `json`, `svg`, `progress`) and
//! [`failures`] (the graduation check).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser as _;
//! let args = concord_race_bench::Args::try_parse_from(["race-bench", "--pods", "200"])?;
//! let outcome = concord_race_bench::run(&args).await?;
//! println!("{}", concord_race_bench::markdown(&outcome.report));
//! # Ok(()) }
//! ```

mod args;
mod cache;
mod ceiling;
mod check;
mod controller;
mod failure;
mod foreign;
mod json;
mod json_index;
mod logging;
mod manager;
mod namespace;
mod peer;
mod progress;
mod raw;
mod report;
mod results;
mod run;
mod scenarios;
mod send;
mod sequential;
mod setup;
mod stats;
mod svg;
mod tally;
mod target_check;
mod targets;
#[cfg(test)]
mod test_support;
mod usage;
mod verify;
mod wire;

#[doc(inline)]
pub use args::{Args, Contender, RaceMode, Scenario};
#[doc(inline)]
pub use check::failures;
#[doc(inline)]
pub use logging::init_logging;
#[doc(inline)]
pub use namespace::{create as create_namespace, delete as delete_namespace};
#[doc(inline)]
pub use report::markdown;
#[doc(inline)]
pub use results::{Report, StrategyResult};
#[doc(inline)]
pub use run::{BenchOutcome, run};
#[doc(inline)]
pub use sequential::{ALPHA, FIRST_LOOK, Stopping};
#[doc(inline)]
pub use stats::{Interval, Verdict, median, t_quantile};
#[doc(inline)]
pub use target_check::TargetCheck;
#[doc(inline)]
pub use usage::peak_rss_kib;
