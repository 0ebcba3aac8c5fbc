//! What a manager exposes to the people who run it: metrics, readiness and
//! the secure metrics endpoint.
//!
//! ```text
//! cargo test -p concord-tests --test observability            # every test below
//! cargo test -p concord-tests --test observability metrics::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../webhooks/support/mod.rs"]
mod webhooks_support;

mod metrics;
mod readiness;
mod secure;
