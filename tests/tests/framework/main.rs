//! The framework on the real control plane: the manager, the shared cache,
//! graceful shutdown, the strategy table's warnings, a first smoke test of
//! the whole write path, and a throttled control plane (`throttling`, on a
//! control plane of its own).
//!
//! ```text
//! cargo test -p concord-tests --test framework            # every test below
//! cargo test -p concord-tests --test framework manager::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod builtin_types;
mod cache;
mod compact;
mod manager;
mod shutdown;
mod smoke;
mod table_warnings;
mod throttling;
