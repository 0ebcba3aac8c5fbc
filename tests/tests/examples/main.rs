//! The example operators on the real control plane, and their generated RBAC.
//!
//! ```text
//! cargo test -p concord-tests --test examples            # every test below
//! cargo test -p concord-tests --test examples operators::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod mirror;
mod operators;
mod rbac;
