//! The shipped example operators `--example` names: what each is called,
//! where it is built and what its managed objects carry.

use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;
use serde_json::json;

/// The shipped operators the benchmark can hold objects with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Example {
    /// `kueue-finalizer --serve` with `kueue-finalizer/guarded.yaml`: Pods
    /// read as its `PodPhase` view.
    KueueFinalizer,
}

impl Example {
    /// Its executable's name (`cargo build --release -p concord-examples
    /// --example <name>`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Example::KueueFinalizer => "kueue-finalizer",
        }
    }

    /// Where `cargo build --release -p concord-examples --example …` puts
    /// it, beside this executable.
    pub(crate) fn default_path(self) -> anyhow::Result<PathBuf> {
        let exe = std::env::current_exe().context("this executable's path")?;
        let dir = exe.parent().context("this executable's directory")?;
        Ok(dir.join("examples").join(self.as_str()))
    }

    /// The metadata every object carries: what makes it the example's
    /// managed Pod, with its finalizer already on.
    pub(crate) fn metadata(self) -> serde_json::Value {
        match self {
            Example::KueueFinalizer => json!({
                "labels": {concord_examples::kueue::MANAGED_LABEL: "memory-bench"},
                "finalizers": [concord_examples::kueue::FINALIZER],
            }),
        }
    }
}
