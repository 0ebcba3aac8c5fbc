//! Sharding on the real control plane: membership and rings.
//!
//! ```text
//! cargo test -p concord-tests --test sharding            # every test below
//! cargo test -p concord-tests --test sharding membership::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod membership;
mod rings;
mod selectors;
