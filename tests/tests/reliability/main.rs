//! Reliability on the real control plane: least privilege, objects deleted or
//! recreated mid-write, conflict storms, a control plane restarted and one
//! throttled mid-run, the fault proxy and seeded chaos. The tests of
//! `restart` and `throttling` start control planes of their own.
//!
//! ```text
//! cargo test -p concord-tests --test reliability            # every test below
//! cargo test -p concord-tests --test reliability least_privilege::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chaos;
mod conflicts;
mod faults;
mod least_privilege;
mod lifecycle;
mod restart;
mod throttling;
