//! Leader election on the real control plane: defaults and standbys.
//!
//! ```text
//! cargo test -p concord-tests --test leader_election            # every test below
//! cargo test -p concord-tests --test leader_election defaults::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod defaults;
mod standby;
