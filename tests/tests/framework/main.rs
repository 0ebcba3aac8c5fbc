//! The framework on the real control plane: the manager, the shared cache,
//! graceful shutdown and the strategy table's warnings.
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
mod table_warnings;
