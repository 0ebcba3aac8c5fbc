//! The book and the code agree: every file and item the book cites exists,
//! the feature-gate pages match the registry, and the troubleshooting
//! page's commands and messages are the ones the code prints. None of
//! these needs a control plane.
//!
//! ```text
//! cargo test -p concord-tests --test book                 # every test below
//! cargo test -p concord-tests --test book citations::     # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod citations;
mod feature_gates;
mod troubleshooting;
