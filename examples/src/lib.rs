//! Shared plumbing for concord's runnable examples: connecting to a cluster
//! or, when none is configured, to an embedded control plane; and the race
//! benchmark ([`race`]), kept in the library so that integration tests run
//! the very code `cargo run --example race-bench` runs.

mod cli;
mod connect;
mod demo;

pub mod argo;
pub mod invariants;
pub mod kueue;
pub mod widgets;
pub mod widgets_demo;

#[doc(inline)]
pub use cli::{ExampleArgs, client_of, demo_connection, load_config, role_yaml};
#[doc(inline)]
pub use connect::{Connection, connect};
#[doc(inline)]
pub use demo::{ensure_namespace, wait_until};

// The benchmark's files live beside its `main.rs` in `race-bench/`.
#[path = "../race-bench/bench.rs"]
pub mod race;
