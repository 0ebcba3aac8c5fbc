//! The controller API on the real control plane: selectors, predicates, error
//! policy, writes through `Context`, dynamic types and the fair queue.
//!
//! ```text
//! cargo test -p concord-tests --test controller            # every test below
//! cargo test -p concord-tests --test controller api::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../strategies/exact_support/mod.rs"]
mod exact_support;

mod api;
mod context;
mod dynamic;
mod first_week;
mod fresh;
mod held;
mod mapped;
mod policies;
mod queue;
