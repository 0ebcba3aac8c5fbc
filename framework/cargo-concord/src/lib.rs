//! `cargo concord`: Operator-SDK-style tooling for concord operators.
//!
//! | command | what it does |
//! | --- | --- |
//! | `cargo concord init NAME` | a new operator crate: manager, configuration, test on the embedded control plane, `deploy/`, `Dockerfile` |
//! | `cargo concord create api --group G --version V --kind K` | a custom resource, its reconciler, its registration in `src/main.rs`, a sample |
//! | `cargo concord generate` | `deploy/` from the code, a kustomize base and a Helm chart from one [`deploy::Bundle`]: CRDs, RBAC from the strategy table, the configuration, the Deployment, Services, webhook configurations |
//! | `cargo concord explain` | the feature gates and strategy table in effect |
//!
//! Install it from a clone of the concord repository with `cargo install
//! --locked --debug --path framework/cargo-concord` (or `cargo install
//! --debug --git URL cargo-concord`); `init` then makes projects that depend on that
//! checkout ([`ConcordSource`]). In the repository, `cargo run -p
//! cargo-concord -- <command>` runs it too.
//!
//! # Guarantees
//!
//! Every name is checked (DNS-1123 group and project name, `v1`-style
//! version, CamelCase kind) and every file rendered before anything is
//! written; `init` writes into a temporary directory renamed into place.
//! `create api` and `generate` rewrite only files whose content changes,
//! so running either twice changes nothing the second time, and they
//! refuse a directory without the `PROJECT` file `init` writes.

mod cli;
mod create_api;
pub mod deploy;
mod error;
mod files;
mod generate;
mod init;
mod markers;
mod names;
mod project;
mod run;
mod source;

#[doc(inline)]
pub use cli::{Cli, Command, Create, CreateApiArgs, ExplainArgs, InitArgs, ProjectArgs};
#[doc(inline)]
pub use create_api::create_api;
#[doc(inline)]
pub use error::Error;
#[doc(inline)]
pub use generate::{explain, generate};
#[doc(inline)]
pub use init::{Made, init};
#[doc(inline)]
pub use run::run;
#[doc(inline)]
pub use source::ConcordSource;
