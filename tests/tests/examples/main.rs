//! The example operators on the real control plane, their generated RBAC,
//! their manifests and deploy artifacts (charts and kustomize bases), and
//! the README's first run of the benchmarks.
//!
//! ```text
//! cargo test -p concord-tests --test examples            # every test below
//! cargo test -p concord-tests --test examples operators::   # one module's
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod deploy_artifacts;
mod first_run;
mod manifests;
mod mirror;
mod operators;
mod rbac;
