//! The race benchmark behind `cargo run --release --example race-bench`.
//!
//! It reproduces concord's two motivating incidents at scale — Kueue's lost
//! finalizers and Argo Workflows' racing index patches — and runs every
//! write strategy through them in one run, each in a fresh namespace:
//!
//! | step | what happens |
//! | --- | --- |
//! | setup | create the scenario's pods (untimed), wait until the controller's watch cache holds them |
//! | writes | `--writers` tasks take logical writes off a work queue and send each from the cached object; in `kueue` a separate client adds a foreign finalizer to every pod meanwhile |
//! | verify | list every pod from the server and count broken invariants: the lost writes |
//! | cleanup | strip finalizers, delete the pods and the namespace, wait until it is gone |
//!
//! The files beside this one are its parts: [`Args`] (the command line),
//! `scenarios/` (what each scenario creates, writes and expects), `send`,
//! `raw` and `json_index` (how each contender writes), `controller`,
//! `cache` and `foreign` (who writes), `verify`, and the outputs
//! ([`markdown`], `json`, `svg`, `progress`) and [`failures`] (the graduation
//! check).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser as _;
//! let args = concord_examples::race::Args::try_parse_from(["race-bench", "--pods", "200"])?;
//! let outcome = concord_examples::race::run(&args).await?;
//! println!("{}", concord_examples::race::markdown(&outcome.report, None));
//! # Ok(()) }
//! ```

mod args;
mod cache;
mod check;
mod controller;
mod foreign;
mod json;
mod json_index;
mod memory;
mod namespace;
mod progress;
mod raw;
mod report;
mod results;
mod run;
mod scenarios;
mod send;
mod setup;
mod svg;
mod tally;
mod verify;

#[doc(inline)]
pub use args::{Args, Contender, Scenario};
#[doc(inline)]
pub use check::failures;
#[doc(inline)]
pub use memory::peak_rss_kib;
#[doc(inline)]
pub use report::markdown;
#[doc(inline)]
pub use results::{Report, StrategyResult};
#[doc(inline)]
pub use run::{BenchOutcome, run};
