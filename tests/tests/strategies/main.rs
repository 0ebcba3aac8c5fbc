//! The write strategies on the real control plane: the incidents, each strategy's
//! request shapes, retries, re-reads, turns and typed writes, and the stress
//! runs (which print figures).
//!
//! ```text
//! cargo test -p concord-tests --test strategies            # every test below
//! cargo test -p concord-tests --test strategies incidents::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod exact_support;
mod support;

mod apply;
mod exact_refusals;
mod exact_retries;
mod exact_turns;
mod exact_typed;
mod exact_values;
mod guarded;
mod incidents;
mod lifecycle;
mod reread;
mod resources;
mod retry;
mod stress;
mod turns;
mod write_path;
