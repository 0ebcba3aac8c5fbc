//! Reliability on the real control plane: least privilege, objects deleted or
//! recreated mid-write, and conflict storms.
//!
//! ```text
//! cargo test -p concord-tests --test reliability            # every test below
//! cargo test -p concord-tests --test reliability least_privilege::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod conflicts;
mod least_privilege;
mod lifecycle;
