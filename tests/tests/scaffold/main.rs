//! `cargo-concord`'s scaffold, end to end: a project generated, run and
//! tested as the book's "Getting started" does (`project`), and the tool
//! installed with `cargo install --git` (`git_install`).
//!
//! ```text
//! cargo test -p concord-tests --test scaffold -- --nocapture
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod session;

mod git_install;
mod project;
