//! The queue benchmark's harness; see `main.rs` for what it measures and
//! how to run it.

mod args;
mod contender;
mod report;
mod run;

pub use args::{Args, ContenderName};
pub use report::{Report, Round, StormRatio, Summary, table};
pub use run::run;
