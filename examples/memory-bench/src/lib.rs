//! The operator memory benchmark behind `cargo run --release -p
//! concord-memory-bench`.
//!
//! It measures, side by side in one run on one control plane, the memory
//! of two operator processes doing the same reconcile on the same
//! objects: a concord operator on the framework path ([`operator`]: a
//! `Manager`, its shared cache, metrics and health served) and a
//! controller-runtime operator (the Go program in `peer/`: a manager and
//! its informer cache). Each reconcile copies an object's wanted round (an
//! annotation the harness sets) into a label with an optimistic lock —
//! concord's `strict`, controller-runtime's
//! `MergeFromWithOptimisticLock`.
//!
//! | step | what happens |
//! | --- | --- |
//! | setup | N objects (`--pods`; Pods, or Widgets with `--kind widgets`) in a fresh namespace |
//! | synced | an operator starts; once its cache holds N objects and `--settle-secs` pass, its VmHWM and VmRSS are read from `/proc/<pid>/status`, and VmHWM is reset |
//! | written | the harness asks for the round on every object; once the API server shows every object written and `--settle-secs` pass, VmHWM (the write pass's peak) and VmRSS are read again, with the allocations per reconcile of the phase; the operator is stopped |
//! | rounds | concord, controller-runtime, concord, … (`--rounds`); medians, ranges, and the concord/controller-runtime ratio of VmHWM paired by round with a 95% interval |
//! | hold | with `--example kueue-finalizer`, instead of the write pass: the shipped example itself (`--serve`) and the controller-runtime operator, each until it holds every object and reconciled each once, then VmHWM and VmRSS ([`HoldReport`]) |
//! | burst | with `--burst`: the concord operator reconciling slowly while `--events` updates land; memory sampled every second; every object must end reconciled at its final value |
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use clap::Parser as _;
//! let args = concord_memory_bench::Args::try_parse_from(["memory-bench", "--pods", "200"])?;
//! let report = concord_memory_bench::run(&args).await?;
//! println!("{}", concord_memory_bench::table(&report));
//! # Ok(()) }
//! ```

mod alloc;
mod args;
mod burst;
mod choice;
mod example;
mod hold;
mod measure;
mod objects;
pub mod operator;
mod process;
mod programs;
mod report;
mod run;
mod status;
mod summary;
mod widget;

#[doc(inline)]
pub use alloc::{ALLOCATOR_VAR, Allocator, CountingAlloc, Heap, MallocInfo, malloc_info};
#[doc(inline)]
pub use args::Args;
#[doc(inline)]
pub use burst::{BurstReport, Sample};
#[doc(inline)]
pub use choice::AllocatorChoice;
#[doc(inline)]
pub use example::Example;
#[doc(inline)]
pub use hold::{HoldReport, HoldRun};
#[doc(inline)]
pub use measure::{Figure, Malloc, RunFigures};
#[doc(inline)]
pub use objects::{Kind, ROUND, WANT};
#[doc(inline)]
pub use report::{Report, table};
#[doc(inline)]
pub use run::{peer, run};
#[doc(inline)]
pub use status::Status;
#[doc(inline)]
pub use summary::{OPERATORS, Ratio, Spread};
#[doc(inline)]
pub use widget::{Widget, WidgetSpec};
