//! The write oracle and its regressions, on the real control plane.
//!
//! ```text
//! cargo test -p concord-tests --test oracle            # every test below
//! cargo test -p concord-tests --test oracle search::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod probes;
mod regressions;
mod search;
