//! Sharding on the real control plane: membership and rings, selectors the
//! API server serves (`server_selectors`, on control planes of its own),
//! `locked` across replica processes, and sharding under seeded chaos.
//!
//! ```text
//! cargo test -p concord-tests --test sharding            # every test below
//! cargo test -p concord-tests --test sharding membership::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod chaos;
mod locked;
mod membership;
mod rings;
mod selectors;
mod server_selectors;
