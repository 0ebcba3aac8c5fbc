//! Webhooks on the real control plane: admission, conversion, the example's
//! webhooks, limits, managed certificates and certificate rotation.
//!
//! ```text
//! cargo test -p concord-tests --test webhooks            # every test below
//! cargo test -p concord-tests --test webhooks admission::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod admission;
mod conversion;
mod example;
mod limits;
mod managed_certs;
mod reload;
